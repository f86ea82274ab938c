import { isUniqueViolation } from '../../db/errors.js';
import { ERRORS } from '../../http/errors.js';
import type { ProjectScope } from '../../http/principal.js';
import { newId, randomBase32, slugify } from '../../platform/ids.js';
import type { SecretBox } from '../../platform/secrets.js';
import type { GuardrailService } from '../guardrails/service.js';
import type { ModelService } from '../models/service.js';
import type { AgentConfig, AgentRecord, AgentStatus, AgentStore, ConnectionProtocol, VersionRecord } from './store.js';

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

const NATIVE_FIELDS = ['modelKey', 'systemPrompt', 'temperature', 'topP', 'maxTokens', 'inputGuardrailKey', 'outputGuardrailKey'] as const;
const EMPTY_CONFIG: AgentConfig = {
  kind: 'native', modelKey: null, systemPrompt: null, temperature: null, topP: null, maxTokens: null, inputGuardrailKey: null, outputGuardrailKey: null, connection: null,
};
const KEY_ATTEMPTS = 3;
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/** Headers Waygate sets itself on calls to a connected agent. */
const RESERVED_HEADERS = new Set(['authorization', 'content-type', 'content-length', 'host', 'a2a-version', 'x-request-id']);

/** Whether the agent is exposed over A2A (interface 4.1 rule 1: opt-in through `metadata.a2a.enabled`). */
export function a2aEnabled(agent: AgentRecord): boolean {
  return (agent.metadata.a2a as { enabled?: unknown } | undefined)?.enabled === true;
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
    const { config, secrets } = await this.applyConfig(scope, EMPTY_CONFIG, {}, input.config ?? {});
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
      };
      try {
        await this.store.insert(agent);
        return agent;
      } catch (err) {
        if (!isUniqueViolation(err) || attempt >= KEY_ATTEMPTS) throw err;
      }
    }
  }

  /**
   * Interface 4.1: fields given replace the stored ones. Native settings never overwrite a stored connection (the
   * agent stays connected unless `kind` says otherwise), and a connection without `apiKey` keeps the stored key.
   */
  async update(scope: ProjectScope, key: string, patch: AgentPatch): Promise<AgentRecord> {
    const agent = await this.get(scope, key);
    const stored = agent.secrets ? (JSON.parse(this.secrets.decrypt(agent.secrets)) as ConnectionSecrets) : {};
    const { config, secrets } = patch.config ? await this.applyConfig(scope, agent.config, stored, patch.config) : { config: agent.config, secrets: agent.secrets };
    const updated: AgentRecord = {
      ...agent,
      name: patch.name ?? agent.name,
      description: patch.description === undefined ? agent.description : patch.description,
      status: patch.status ?? agent.status,
      config,
      secrets,
      metadata: patch.metadata ?? agent.metadata,
      updatedAt: Date.now(),
    };
    await this.store.update(scope, updated);
    return updated;
  }

  /** Deleted agents answer 404; their versions and conversations stay, for audit. */
  async delete(scope: ProjectScope, key: string): Promise<void> {
    if (!(await this.store.softDelete(scope, key, Date.now()))) throw ERRORS.notFound('Agent', key);
  }

  /** Interface 9.4: an immutable snapshot of the current configuration, numbered one after the last. */
  async publish(scope: ProjectScope, key: string, changelog: string | null): Promise<{ agent: AgentRecord; version: VersionRecord }> {
    const agent = await this.get(scope, key);
    return { agent, version: await this.store.publish(agent, changelog, Date.now()) };
  }

  /** A pinned published version (404 when there is none with that number), or the newest (400 when never published). */
  async versionToRun(agent: AgentRecord, number?: number): Promise<VersionRecord> {
    const version = await this.store.version(agent.id, number);
    if (version) return version;
    if (number !== undefined) throw ERRORS.notFound('Version', `${agent.key}@${number}`);
    throw ERRORS.validation(`Agent "${agent.key}" has no published version; publish it first (POST /agents/${agent.key}/publish)`);
  }

  /** The latest published version number, or null. */
  async publishedVersion(agent: AgentRecord): Promise<number | null> {
    return (await this.store.version(agent.id))?.number ?? null;
  }

  /** The decrypted secrets of a version's connection. */
  secretsOf(version: VersionRecord): ConnectionSecrets {
    return version.secrets ? (JSON.parse(this.secrets.decrypt(version.secrets)) as ConnectionSecrets) : {};
  }

  /** Merges an input into a configuration and checks it against the project; seals the connection's secrets. */
  private async applyConfig(scope: ProjectScope, current: AgentConfig, stored: ConnectionSecrets, input: AgentConfigInput): Promise<{ config: AgentConfig; secrets: string | null }> {
    const config: AgentConfig = { ...current };
    for (const field of NATIVE_FIELDS) if (input[field] !== undefined) (config as unknown as Record<string, unknown>)[field] = input[field];
    let secrets = stored;
    if (input.connection === null) {
      config.connection = null;
      secrets = {};
    } else if (input.connection) {
      const c = input.connection;
      checkConnection(c);
      secrets = {
        apiKey: c.apiKey === undefined ? stored.apiKey : (c.apiKey ?? undefined),
        headers: c.headers === undefined ? stored.headers : (c.headers ?? undefined),
      };
      config.connection = { protocol: c.protocol, url: c.url, model: c.model ?? null, headerNames: Object.keys(secrets.headers ?? {}), hasApiKey: secrets.apiKey !== undefined };
    }
    // A connection makes an agent external; only an explicit kind turns a connected agent back into a native one.
    config.kind = input.kind ?? (input.connection ? 'external' : current.kind);
    if (config.kind === 'external' && !config.connection) throw ERRORS.validation('config.connection is required for an external agent');
    if (config.kind === 'external' && config.connection!.protocol !== 'a2a' && !config.connection!.model) {
      throw ERRORS.validation(`config.connection.model is required for ${config.connection!.protocol} (the model the connected service runs)`);
    }
    await this.checkReferences(scope, config);
    const hasSecrets = secrets.apiKey !== undefined || Object.keys(secrets.headers ?? {}).length > 0;
    return { config, secrets: hasSecrets ? this.secrets.encrypt(JSON.stringify(secrets)) : null };
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
      const guardrail = await this.guardrails.get(scope, key).catch(() => null);
      if (!guardrail) throw ERRORS.validation(`config.${field}: guardrail "${key}" does not exist in this project`);
      if (guardrail.target !== 'both' && guardrail.target !== stage) throw ERRORS.validation(`config.${field}: guardrail "${key}" targets ${guardrail.target} only`);
    }
  }
}

function checkConnection(connection: ConnectionInput): void {
  let url: URL;
  try {
    url = new URL(connection.url);
  } catch {
    throw ERRORS.validation('config.connection.url must be an absolute http:// or https:// URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw ERRORS.validation('config.connection.url must be an absolute http:// or https:// URL');
  if (typeof connection.apiKey === 'string' && !HEADER_VALUE.test(connection.apiKey)) throw ERRORS.validation('config.connection.apiKey may only hold printable characters');
  for (const [name, value] of Object.entries(connection.headers ?? {})) {
    if (!HEADER_NAME.test(name)) throw ERRORS.validation(`config.connection.headers has an invalid header name: ${name}`);
    if (!HEADER_VALUE.test(value)) throw ERRORS.validation(`config.connection.headers.${name} may only hold printable characters (no line breaks)`);
    if (RESERVED_HEADERS.has(name.toLowerCase())) throw ERRORS.validation(`config.connection.headers may not set ${name}; Waygate sets it (use apiKey for keys)`);
  }
}

/** Interface 2.4: a list entry, with the model configuration the agent runs with. */
export function agentSummary(agent: AgentRecord) {
  return {
    key: agent.key,
    name: agent.name,
    description: agent.description,
    status: agent.status,
    createdAt: new Date(agent.createdAt).toISOString(),
    modelKey: agent.config.modelKey,
    temperature: agent.config.temperature,
    topP: agent.config.topP,
    maxTokens: agent.config.maxTokens,
  };
}

/** The full view: never the connection's API key or header values (`hasApiKey`, `headerNames`). */
export function agentView(agent: AgentRecord, publishedVersion: number | null) {
  return {
    ...agentSummary(agent),
    updatedAt: new Date(agent.updatedAt).toISOString(),
    kind: agent.config.kind,
    hasApiKey: agent.config.connection?.hasApiKey ?? false,
    config: agent.config,
    metadata: agent.metadata,
    publishedVersion,
  };
}

export function versionView(agent: AgentRecord, version: VersionRecord) {
  return {
    agentKey: agent.key,
    number: version.number,
    name: version.name,
    description: version.description,
    changelog: version.changelog,
    config: version.config,
    createdAt: new Date(version.createdAt).toISOString(),
  };
}
