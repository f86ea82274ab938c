import { isUniqueViolation } from '../../db/errors.js';
import { ERRORS } from '../../http/errors.js';
import type { ProjectScope } from '../../http/principal.js';
import { untilWritten } from '../../platform/compare-and-set.js';
import { newId, randomBase32, slugify } from '../../platform/ids.js';
import type { SecretBox } from '../../platform/secrets.js';
import type { GuardrailService } from '../guardrails/service.js';
import type { ModelService } from '../models/service.js';
import { nonPublicLiteralHost } from './addresses.js';
import { checkConnectionHeaders, checkHeaderValue } from './headers.js';
import type { AgentConfig, AgentRecord, AgentStatus, AgentStore, Connection, ConnectionProtocol, VersionRecord } from './store.js';

export interface ConnectionInput {
  protocol: ConnectionProtocol;
  url: string;
  model?: string | null;
  /** Omitted keeps the stored headers, null removes them, an object replaces them. */
  headers?: Record<string, string> | null;
  /** Omitted keeps the stored key, null removes it. */
  apiKey?: string | null;
}

export interface AgentConfigInput {
  kind?: 'native' | 'external';
  modelKey?: string | null;
  systemPrompt?: string | null;
  temperature?: number | null;
  topP?: number | null;
  maxTokens?: number | null;
  inputGuardrailKey?: string | null;
  outputGuardrailKey?: string | null;
  connection?: ConnectionInput | null;
}

export interface AgentInput {
  name: string;
  description?: string | null;
  status?: AgentStatus;
  config?: AgentConfigInput;
  metadata?: Record<string, unknown>;
}

export type AgentPatch = Partial<AgentInput>;

/** A connection's secrets, sealed together. */
export interface ConnectionSecrets {
  apiKey?: string;
  headers?: Record<string, string>;
}

export interface AgentSettings {
  /** Connections may point at loopback, private and link-local addresses. */
  allowPrivateUrls: boolean;
}

const NATIVE_FIELDS = ['modelKey', 'systemPrompt', 'temperature', 'topP', 'maxTokens', 'inputGuardrailKey', 'outputGuardrailKey'] as const;
const EMPTY_CONFIG: AgentConfig = {
  kind: 'native', modelKey: null, systemPrompt: null, temperature: null, topP: null, maxTokens: null, inputGuardrailKey: null, outputGuardrailKey: null, connection: null,
};
const KEY_ATTEMPTS = 3;
/**
 * Concurrent changes of one agent are made one after another. Every lost race means another change landed, so this
 * many lost races in a row takes that many writers at once on one agent; beyond it the change is a 409.
 */
const UPDATE_ATTEMPTS = 20;
const PRIVATE_URLS_HINT = 'set WAYGATE_AGENT_ALLOW_PRIVATE_URLS=true to allow loopback and private networks';

/** Whether the agent is exposed over A2A (interface 4.1 rule 1: opt-in through `metadata.a2a.enabled`). */
export function a2aEnabled(agent: AgentRecord): boolean {
  return (agent.metadata.a2a as { enabled?: unknown } | undefined)?.enabled === true;
}

/** Only active agents answer: an inactive or draft one is a 400. */
export function checkActive(agent: AgentRecord): void {
  if (agent.status !== 'active') throw ERRORS.validation(`Agent "${agent.key}" is ${agent.status}; only active agents answer`);
}

function originOf(connection: Connection | null): string | null {
  return connection ? new URL(connection.url).origin : null;
}

/**
 * Agents (interface 2.4, 4.1, 9.4): configurations with sealed connection secrets, immutable published versions,
 * and the project rules their configuration must follow.
 */
export class AgentService {
  constructor(
    private readonly store: AgentStore,
    private readonly models: ModelService,
    private readonly guardrails: GuardrailService,
    private readonly secrets: SecretBox,
    private readonly settings: AgentSettings,
  ) {}

  list(scope: ProjectScope, status?: AgentStatus): Promise<AgentRecord[]> {
    return this.store.list(scope, status);
  }

  /** A live agent of the project; another project's, or a deleted one, is a 404 like a missing one. */
  async get(scope: ProjectScope, key: string): Promise<AgentRecord> {
    const agent = await this.store.find(scope, key);
    if (!agent) throw ERRORS.notFound('Agent', key);
    return agent;
  }

  /** The key is a slug of the name and a short random suffix, unique in the project. */
  async create(scope: ProjectScope, input: AgentInput): Promise<AgentRecord> {
    const now = Date.now();
    const { config, secrets } = await this.applyConfig(scope, { config: EMPTY_CONFIG, secrets: null }, input.config ?? {});
    for (let attempt = 1; ; attempt++) {
      const agent: AgentRecord = {
        id: newId('agt'),
        ...scope,
        key: `${slugify(input.name) || 'agent'}-${randomBase32(6)}`,
        name: input.name,
        description: input.description ?? null,
        status: input.status ?? 'active',
        config,
        secrets,
        metadata: input.metadata ?? {},
        createdAt: now,
        updatedAt: now,
        revision: 1,
      };
      try {
        await this.store.insert(scope, agent);
        return agent;
      } catch (err) {
        if (!isUniqueViolation(err) || attempt >= KEY_ATTEMPTS) throw err;
      }
    }
  }

  /**
   * Interface 4.1: fields given replace the stored ones. Native settings never overwrite a stored connection (the
   * agent stays connected unless `kind` says otherwise), and a connection without `apiKey` keeps the stored key.
   * The patch is applied to the agent as stored and written only if nobody changed it meanwhile (else applied again
   * to the newer agent), so concurrent patches of different fields both land.
   */
  async update(scope: ProjectScope, key: string, patch: AgentPatch): Promise<AgentRecord> {
    const updated = await untilWritten(UPDATE_ATTEMPTS, async () => {
      const agent = await this.get(scope, key);
      const { config, secrets } = patch.config ? await this.applyConfig(scope, agent, patch.config) : agent;
      const next: AgentRecord = {
        ...agent,
        name: patch.name ?? agent.name,
        description: patch.description === undefined ? agent.description : patch.description,
        status: patch.status ?? agent.status,
        config,
        secrets,
        metadata: patch.metadata ?? agent.metadata,
        updatedAt: Date.now(),
        revision: agent.revision + 1,
      };
      return (await this.store.update(scope, next)) ? next : null;
    });
    if (!updated) throw ERRORS.conflict(`Agent "${key}" is being changed by other requests; send the change again`);
    return updated;
  }

  /** Deleted agents answer 404; their versions and conversations stay, for audit. */
  async delete(scope: ProjectScope, key: string): Promise<void> {
    if (!(await this.store.softDelete(scope, key, Date.now()))) throw ERRORS.notFound('Agent', key);
  }

  /** Interface 9.4: an immutable snapshot of the current configuration, numbered one after the last. */
  async publish(scope: ProjectScope, key: string, changelog: string | null): Promise<{ agent: AgentRecord; version: VersionRecord }> {
    const published = await this.store.publish(scope, key, changelog, Date.now());
    if (!published) throw ERRORS.notFound('Agent', key);
    return published;
  }

  /** A pinned published version (404 when there is none with that number), or the newest (400 when never published). */
  async versionToRun(scope: ProjectScope, agent: AgentRecord, number?: number): Promise<VersionRecord> {
    const version = await this.store.version(scope, agent.id, number);
    if (version) return version;
    if (number !== undefined) throw ERRORS.notFound('Version', `${agent.key}@${number}`);
    throw ERRORS.validation(`Agent "${agent.key}" has no published version; publish it first (POST /agents/${agent.key}/publish)`);
  }

  /** The latest published version number, or null. */
  async publishedVersion(scope: ProjectScope, agent: AgentRecord): Promise<number | null> {
    return (await this.store.version(scope, agent.id))?.number ?? null;
  }

  /**
   * The secrets to call a version's connection with: the agent's current ones (a rotated key applies to every
   * version), but only while the agent still connects to the version's origin, so an old version never carries
   * the key to a server it was not meant for. Refuses a non-public address the operator no longer allows.
   */
  callSecrets(agent: AgentRecord, version: VersionRecord): ConnectionSecrets {
    const connection = version.config.connection!;
    const host = this.settings.allowPrivateUrls ? null : nonPublicLiteralHost(new URL(connection.url));
    // The owner's configuration, not the caller's request, is at fault: an upstream failure, like a name resolving there.
    if (host) throw ERRORS.upstreamFailed(`Agent "${agent.key}" version ${version.number} connects to ${host}, which is not a public address`);
    if (!agent.secrets || originOf(agent.config.connection) !== originOf(connection)) return {};
    const secrets = this.secrets.openJson<ConnectionSecrets>(agent.secrets);
    if (!secrets) {
      throw ERRORS.unavailable(`Agent "${agent.key}" cannot be called: its stored connection credentials cannot be decrypted (the secret key changed); set config.connection.apiKey and headers again with PATCH`);
    }
    return secrets;
  }

  /** Merges an input into a configuration and checks it against the project; seals the connection's secrets. */
  private async applyConfig(scope: ProjectScope, current: { config: AgentConfig; secrets: string | null }, input: AgentConfigInput): Promise<{ config: AgentConfig; secrets: string | null }> {
    const config: AgentConfig = { ...current.config };
    for (const field of NATIVE_FIELDS) if (input[field] !== undefined) (config as unknown as Record<string, unknown>)[field] = input[field];
    let secrets = current.secrets;
    if (input.connection === null) {
      config.connection = null;
      secrets = null;
    } else if (input.connection) {
      const { connection, sealed } = this.applyConnection(current.config.connection, current.secrets, input.connection);
      config.connection = connection;
      secrets = sealed;
    }
    // A connection makes an agent external; only an explicit kind turns a connected agent back into a native one.
    config.kind = input.kind ?? (input.connection ? 'external' : current.config.kind);
    if (config.kind === 'external' && !config.connection) throw ERRORS.validation('config.connection is required for an external agent');
    if (config.kind === 'external' && config.connection!.protocol !== 'a2a' && !config.connection!.model) {
      throw ERRORS.validation(`config.connection.model is required for ${config.connection!.protocol} (the model the connected service runs)`);
    }
    await this.checkReferences(scope, config);
    return { config, secrets };
  }

  /**
   * A new connection and its sealed secrets. Stored secrets are kept only for the same origin: moving the
   * connection elsewhere must say again which key and headers go there (or null), or the old ones would follow.
   */
  private applyConnection(current: Connection | null, sealed: string | null, input: ConnectionInput): { connection: Connection; sealed: string | null } {
    const url = this.checkUrl(input.url);
    if (typeof input.apiKey === 'string') checkHeaderValue('config.connection.apiKey', input.apiKey);
    checkConnectionHeaders(input.headers);
    const keeps = input.apiKey === undefined || input.headers === undefined;
    const stored = keeps ? this.secrets.openJson<ConnectionSecrets>(sealed) : {};
    if (!stored) throw ERRORS.validation('The stored connection credentials cannot be decrypted (the secret key changed): send apiKey and headers together (null to remove)');
    const storedHeaders = Object.keys(stored.headers ?? {}).length > 0;
    if (current && url.origin !== originOf(current) && ((input.apiKey === undefined && stored.apiKey !== undefined) || (input.headers === undefined && storedHeaders))) {
      throw ERRORS.validation(
        `config.connection.url moves the connection from ${originOf(current)} to ${url.origin}: send apiKey and headers again (or null to drop them), so the stored ones are not sent to a new server`,
      );
    }
    const secrets: ConnectionSecrets = {
      apiKey: input.apiKey === undefined ? stored.apiKey : (input.apiKey ?? undefined),
      headers: input.headers === undefined ? stored.headers : (input.headers ?? undefined),
    };
    const hasHeaders = Object.keys(secrets.headers ?? {}).length > 0;
    return {
      connection: { protocol: input.protocol, url: input.url, model: input.model ?? null, headerNames: Object.keys(secrets.headers ?? {}), hasApiKey: secrets.apiKey !== undefined },
      sealed: secrets.apiKey !== undefined || hasHeaders ? this.secrets.encrypt(JSON.stringify(secrets)) : null,
    };
  }

  /** An absolute http(s) URL without credentials, at a public address unless the operator allows private ones. */
  private checkUrl(raw: string): URL {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw ERRORS.validation('config.connection.url must be an absolute http:// or https:// URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw ERRORS.validation('config.connection.url must be an absolute http:// or https:// URL');
    if (url.username || url.password) throw ERRORS.validation('config.connection.url may not hold credentials; use apiKey or headers');
    const host = this.settings.allowPrivateUrls ? null : nonPublicLiteralHost(url);
    if (host) throw ERRORS.validation(`config.connection.url points at ${host}, which is not a public address; ${PRIVATE_URLS_HINT}`);
    return url;
  }

  /** The model and guardrails an agent names must be the project's, and fit for the purpose. */
  private async checkReferences(scope: ProjectScope, config: AgentConfig): Promise<void> {
    if (config.modelKey) {
      const model = await this.models.find(scope, config.modelKey);
      if (!model) throw ERRORS.validation(`config.modelKey: model "${config.modelKey}" does not exist in this project`);
      if (!model.record.capabilities.includes('chat')) throw ERRORS.validation(`config.modelKey: model "${config.modelKey}" does not offer chat`);
    }
    for (const [field, stage] of [['inputGuardrailKey', 'input'], ['outputGuardrailKey', 'output']] as const) {
      const key = config[field];
      if (!key) continue;
      const guardrail = await this.guardrails.find(scope, key);
      if (!guardrail) throw ERRORS.validation(`config.${field}: guardrail "${key}" does not exist in this project`);
      if (guardrail.target !== 'both' && guardrail.target !== stage) throw ERRORS.validation(`config.${field}: guardrail "${key}" targets ${guardrail.target} only`);
    }
  }
}
