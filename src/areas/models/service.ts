import type { Logger } from 'pino';
import { isForeignKeyViolation, isUniqueViolation } from '../../db/errors.js';
import type { Transactor } from '../../db/index.js';
import type { Db } from '../../db/types.js';
import { ERRORS } from '../../http/errors.js';
import type { ProjectScope } from '../../http/principal.js';
import type { Bus } from '../../platform/bus.js';
import { changedAt, untilWritten } from '../../platform/compare-and-set.js';
import { newId } from '../../platform/ids.js';
import type { SecretBox } from '../../platform/secrets.js';
import { ANTHROPIC_BASE_URL } from '../../providers/anthropic.js';
import { LOCAL_CHAT_MODEL, LOCAL_EMBED_MODEL } from '../../providers/local.js';
import { OPENAI_BASE_URL } from '../../providers/openai-compatible.js';
import { CAPABILITIES, type Capability, type MockOptions, type ModelTarget, type ProviderType } from '../../providers/types.js';
import { namedGuardrails, TYPE_FIELDS, type ModelGuardrails, type ModelRecord, type ModelStore, type Pricing, type ProviderSettings } from './store.js';
import { ProjectCache } from '../../platform/project-cache.js';

export const MODEL_KEY_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$';
const MODEL_KEY = new RegExp(MODEL_KEY_PATTERN);
const CHANGED_TOPIC = 'models.changed';
/** Tries of a PATCH that other changes keep overtaking, before it answers 409. */
const UPDATE_ATTEMPTS = 5;

export interface ProviderInput {
  type: ProviderType;
  baseUrl?: string | null;
  /** Omitted keeps the stored key, null removes it. */
  apiKey?: string | null;
  apiVersion?: string | null;
  deployment?: string | null;
  /** Omitted keeps the stored headers, null removes them, an object replaces them. */
  headers?: Record<string, string> | null;
  mock?: MockOptions | null;
}

export interface ModelInput {
  key: string;
  name?: string;
  provider: ProviderInput;
  upstreamModel?: string;
  capabilities: Capability[];
  pricing?: Pricing | null;
  guardrails?: Partial<ModelGuardrails>;
  fallbacks?: string[];
}

export type ModelPatch = Partial<Omit<ModelInput, 'key' | 'provider'>> & { provider?: Partial<ProviderInput> };

/**
 * A model ready to call: its record and the decrypted target the provider needs. `unreadable`: its stored
 * credentials could not be decrypted (the secret key changed), so it must not be called; the target has none.
 */
export interface ResolvedModel {
  record: ModelRecord;
  target: ModelTarget;
  unreadable?: true;
}

const DEFAULT_BASE_URLS: Partial<Record<ProviderType, string>> = { 'openai-compatible': OPENAI_BASE_URL, anthropic: ANTHROPIC_BASE_URL };

/** Where a model's calls (and so its credentials) go: the provider type and the origin of its base URL. */
function destinationOf(provider: Pick<ProviderSettings, 'type' | 'baseUrl'>): string {
  const url = provider.baseUrl ?? DEFAULT_BASE_URLS[provider.type];
  return `${provider.type} ${url ? new URL(url).origin : ''}`;
}

interface Secrets {
  apiKey?: string;
  headers?: Record<string, string>;
}

const FREE: Pricing = { inputPer1M: 0, outputPer1M: 0, currency: 'USD' };

function builtIn(scope: ProjectScope, key: string, capability: Capability): ModelRecord {
  return {
    id: `builtin_${key}`,
    tenantId: scope.tenantId,
    projectId: scope.projectId,
    key,
    name: key === LOCAL_CHAT_MODEL ? 'Built-in local chat (echo)' : 'Built-in local embeddings (feature hashing, 384 dimensions)',
    provider: { type: 'local', baseUrl: null, apiVersion: null, deployment: null, mock: null, headerNames: [], hasApiKey: false },
    secrets: null,
    upstreamModel: key,
    capabilities: [capability],
    pricing: FREE,
    guardrails: { input: [], output: [] },
    fallbacks: [],
    builtIn: true,
    createdAt: 0,
    updatedAt: 0,
  };
}

const BUILT_IN_KEYS = new Set([LOCAL_CHAT_MODEL, LOCAL_EMBED_MODEL]);
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/;
/** What an HTTP header value may hold (RFC 9110 field-value): no control characters, nothing past U+00FF. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/**
 * Set by Waygate itself on upstream requests, or about the connection and its encoding, which Waygate's client
 * manages (undici refuses `expect`, `keep-alive` and `upgrade`, and answers compressed by request would never be
 * decompressed): a model may not set them.
 */
const RESERVED_HEADERS = new Set([
  'host', 'content-length', 'content-type', 'connection', 'transfer-encoding', 'authorization', 'api-key', 'x-api-key',
  'expect', 'keep-alive', 'upgrade', 'accept-encoding', 'te', 'trailer', 'proxy-connection',
  // Set per call: the request id, a stream's Accept, and the Anthropic API version its translation is written for.
  'x-request-id', 'accept', 'anthropic-version',
]);

function checkBaseUrl(type: ProviderType, baseUrl: string | null): void {
  if (baseUrl === null) {
    if (type === 'azure-openai') throw ERRORS.validation('provider.baseUrl is required for azure-openai (https://<resource>.openai.azure.com)');
    return;
  }
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    // Not echoed: a key pasted into the wrong field would come back in the answer.
    throw ERRORS.validation('provider.baseUrl is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw ERRORS.validation('provider.baseUrl must be an http:// or https:// URL');
  if (url.username || url.password) throw ERRORS.validation('provider.baseUrl must not carry credentials; use provider.apiKey');
  // Paths are appended to it (`/chat/completions`, `/openai/deployments/...`): after a query or fragment they would
  // land in the query, or be dropped. The text is checked, not the parsed URL: a bare `?` or `#` parses as none.
  if (/[?#]/.test(baseUrl)) throw ERRORS.validation('provider.baseUrl must not have a query (?...) or a fragment (#...)');
  // The stored text is what calls are sent to, and the parser drops the ASCII white space and control characters it
  // is given (other spaces it percent-encodes, so they stay what they were).
  if ([...baseUrl].some((c) => c <= ' ' || c === '\u007f')) throw ERRORS.validation('provider.baseUrl must not contain white space or control characters');
}

/**
 * What each provider type can answer. Anthropic has chat only, Azure OpenAI no moderation endpoint, and each
 * built-in local model one capability; the mock answers chat, embeddings and moderation.
 */
function offeredCapabilities(type: ProviderType, upstreamModel: string): readonly Capability[] {
  switch (type) {
    case 'anthropic':
      return ['chat'];
    case 'azure-openai':
      return ['chat', 'embeddings', 'tts', 'stt'];
    case 'local':
      return upstreamModel === LOCAL_EMBED_MODEL ? ['embeddings'] : ['chat'];
    case 'mock':
      return ['chat', 'embeddings', 'moderation'];
    default:
      return CAPABILITIES;
  }
}

/**
 * A write refused by the guardrail links' foreign key: a guardrail the model names was deleted between the check and
 * the write. The check holds them on PostgreSQL, and one Waygate's SQLite connection runs one transaction at a time,
 * so only another process writing the same SQLite file gets here. Anything else is passed on.
 */
function deletedGuardrail(err: unknown, model: ModelRecord): unknown {
  if (!isForeignKeyViolation(err)) return err;
  const keys = namedGuardrails(model).map((key) => `"${key}"`).join(', ');
  return ERRORS.validation(`guardrails: one of the guardrails named (${keys}) does not exist in this project any more; it was deleted meanwhile`);
}

function sameMembers<T>(a: readonly T[], b: readonly T[]): boolean {
  return a.length === b.length && a.every((item) => b.includes(item));
}

function checkCapabilities(type: ProviderType, upstreamModel: string, capabilities: Capability[]): void {
  const offered = offeredCapabilities(type, upstreamModel);
  const missing = capabilities.filter((capability) => !offered.includes(capability));
  if (missing.length > 0) {
    const which = type === 'local' ? `${type} model ${upstreamModel}` : `${type} provider`;
    throw ERRORS.validation(`capabilities ${missing.join(', ')} are not offered by the ${which} (it offers ${offered.join(', ')})`);
  }
}

/**
 * A provider field as it is after the input: sent, kept, or none when the type does not read it. A stored model
 * holds only its own type's settings (the store drops the others), so a new type never inherits the old one's.
 * Sending one to a type that does not read it is a 400.
 */
function typeField<F extends keyof typeof TYPE_FIELDS>(field: F, type: ProviderType, sent: ProviderSettings[F] | undefined, stored: ProviderSettings[F]): ProviderSettings[F] | null {
  if (type !== TYPE_FIELDS[field]) {
    if (sent !== undefined && sent !== null) throw ERRORS.validation(`provider.${field} is only for ${TYPE_FIELDS[field]} models`);
    return null;
  }
  return sent === undefined ? stored : sent;
}

function checkHeaders(headers: Record<string, string> | undefined): void {
  const names = new Set<string>();
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (!HEADER_NAME.test(name)) throw ERRORS.validation(`provider.headers has an invalid header name: ${name}`);
    if (!HEADER_VALUE.test(value)) throw ERRORS.validation(`provider.headers.${name} may only hold printable characters (no line breaks)`);
    const lower = name.toLowerCase();
    if (RESERVED_HEADERS.has(lower)) throw ERRORS.validation(`provider.headers may not set ${name}; Waygate sets it (use provider.apiKey for keys)`);
    // Header names ignore case: both would be sent, joined into one value.
    if (names.has(lower)) throw ERRORS.validation(`provider.headers names ${name} twice (header names ignore case)`);
    names.add(lower);
  }
}

/**
 * A model's headers with lower-case names, as Waygate writes its own: a name in other letters would not replace
 * Waygate's header of that name but be sent beside it (headers stored before these names were reserved).
 */
function lowerCaseNames(headers: Record<string, string>): Record<string, string> {
  const lowered: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) lowered[name.toLowerCase()] = value;
  return lowered;
}

/**
 * What the guardrails area checks when models change: models and guardrails name each other. Both checks read
 * through `trx`, the transaction that writes the model and holds its row.
 */
export interface GuardrailLinks {
  /** The guardrails a model names exist and allow the stage they are named for; they are held until `trx` ends. */
  checkAttached(scope: ProjectScope, modelKey: string, guardrails: Partial<ModelGuardrails>, trx: Db): Promise<void>;
  /**
   * No enabled guardrail loses its judge (`change` null: the model is deleted) through the change, or has it answer
   * through an endpoint the change adds that cannot judge what the guardrail asks.
   */
  checkJudgeChange(scope: ProjectScope, modelKey: string, change: CapabilityChange | null, trx: Db): Promise<void>;
}

/** A model's capabilities before and after a change (none before: it is new). */
export interface CapabilityChange {
  before: readonly Capability[];
  after: readonly Capability[];
}

/** The model registry of each project, plus the built-in local models; cached for the request path. */
export class ModelService {
  private readonly cache: ProjectCache<Map<string, ResolvedModel>>;

  constructor(
    private readonly store: ModelStore,
    private readonly transaction: Transactor,
    private readonly secrets: SecretBox,
    bus: Bus,
    private readonly localModels: boolean,
    private readonly guardrails: GuardrailLinks,
    private readonly log: Logger,
  ) {
    this.cache = new ProjectCache(bus, CHANGED_TOPIC, (scope) => this.loadModels(scope), log);
  }

  async start(): Promise<void> {
    await this.cache.start();
  }

  private builtIns(scope: ProjectScope): ModelRecord[] {
    return this.localModels ? [builtIn(scope, LOCAL_CHAT_MODEL, 'chat'), builtIn(scope, LOCAL_EMBED_MODEL, 'embeddings')] : [];
  }

  /** Every model of the project: the built-in ones first, then the registered ones by key. */
  async list(scope: ProjectScope): Promise<ModelRecord[]> {
    return [...(await this.projectModels(scope)).values()].map((model) => model.record);
  }

  /** The model, decrypted for a call; 404 when it does not exist in the project. */
  async resolve(scope: ProjectScope, key: string): Promise<ResolvedModel> {
    const model = (await this.projectModels(scope)).get(key);
    if (!model) throw ERRORS.notFound('Model', key);
    return model;
  }

  /**
   * The model when the project's models are in memory and it is one of them, without an await; undefined otherwise
   * (`resolve` then loads them, or answers 404).
   */
  held(scope: ProjectScope, key: string): ResolvedModel | undefined {
    return this.cache.held(scope)?.get(key);
  }

  /** The model when it exists (fallbacks that were deleted since are skipped). */
  async find(scope: ProjectScope, key: string): Promise<ResolvedModel | null> {
    return (await this.projectModels(scope)).get(key) ?? null;
  }

  async create(scope: ProjectScope, input: ModelInput): Promise<ModelRecord> {
    if (!MODEL_KEY.test(input.key)) throw ERRORS.validation('key must be 1-100 letters, digits, dots, dashes, underscores or colons, starting with a letter or digit');
    if (this.localModels && BUILT_IN_KEYS.has(input.key)) throw ERRORS.conflict(`"${input.key}" is a built-in model key`);
    const now = Date.now();
    const model: ModelRecord = {
      id: newId('mdl'),
      tenantId: scope.tenantId,
      projectId: scope.projectId,
      key: input.key,
      name: input.name ?? input.key,
      provider: { type: input.provider.type, baseUrl: null, apiVersion: null, deployment: null, mock: null, headerNames: [], hasApiKey: false },
      secrets: null,
      upstreamModel: input.upstreamModel ?? input.key,
      capabilities: [],
      pricing: null,
      guardrails: { input: [], output: [] },
      fallbacks: [],
      builtIn: false,
      createdAt: now,
      updatedAt: now,
    };
    const ready = await this.apply(scope, model, input);
    try {
      await this.transaction(async (trx) => {
        // A new model breaks no working link: a guardrail can only name a key without a model behind it already broken.
        await this.checkLinks(scope, ready, input.guardrails !== undefined, [], trx);
        await this.store.insert(trx, ready);
      });
    } catch (err) {
      throw isUniqueViolation(err) ? ERRORS.conflict(`A model with key "${input.key}" already exists`) : deletedGuardrail(err, ready);
    }
    await this.changed(scope);
    return ready;
  }

  /**
   * Applies the patch to the model as stored and checks the result as a whole. A change that lands between the read
   * and the write (another PATCH) makes it start again from the new state, so neither change is lost. The links to
   * the guardrails are checked in the transaction that writes, once the row is held, so a guardrail change that
   * relies on the model as it was waits for this one and then sees it.
   */
  async update(scope: ProjectScope, key: string, patch: ModelPatch): Promise<ModelRecord> {
    const updated = await untilWritten(UPDATE_ATTEMPTS, async () => {
      const current = await this.store.find(scope, key);
      if (!current) throw this.missingOrBuiltIn(key);
      // Provider fields the patch omits keep their stored values in apply(); a new type starts without the old baseUrl.
      const provider: ProviderInput = { ...patch.provider, type: patch.provider?.type ?? current.provider.type };
      const next = await this.apply(scope, { ...current, updatedAt: changedAt(current.updatedAt) }, { ...patch, key, provider, capabilities: patch.capabilities ?? current.capabilities });
      // Links are written again whenever guardrails are sent (the only way they change), so a model whose links are
      // behind its list (stored before they existed, or by an older instance) catches up.
      const relink = patch.guardrails !== undefined;
      try {
        return await this.transaction(async (trx) => {
          if ((await this.store.hold(trx, scope, key)) !== current.updatedAt) return null;
          await this.checkLinks(scope, next, relink, current.capabilities, trx);
          return (await this.store.update(trx, next, relink)) ? next : null;
        });
      } catch (err) {
        throw deletedGuardrail(err, next);
      }
    });
    if (!updated) throw ERRORS.conflict(`Model "${key}" kept changing while this change was applied; try again`);
    await this.changed(scope);
    return updated;
  }

  async delete(scope: ProjectScope, key: string): Promise<void> {
    const deleted = await this.transaction(async (trx) => {
      if ((await this.store.hold(trx, scope, key)) === null) return false;
      await this.guardrails.checkJudgeChange(scope, key, null, trx);
      return this.store.delete(trx, scope, key);
    });
    if (!deleted) throw this.missingOrBuiltIn(key);
    await this.changed(scope);
  }

  /**
   * The model as stored, held until `trx` ends (see ModelStore.findShared), or a built-in model: the judge a guardrail
   * change is checked against. A registered model wins over a built-in one of the same key, as in the project's list.
   */
  async findShared(scope: ProjectScope, key: string, trx: Db): Promise<ModelRecord | null> {
    return (await this.store.findShared(trx, scope, key)) ?? this.builtIns(scope).find((model) => model.key === key) ?? null;
  }

  /** The keys and guardrail lists of the project's models that name the guardrail, as `trx` reads them. */
  async namingGuardrail(scope: ProjectScope, guardrailKey: string, trx: Db): Promise<Pick<ModelRecord, 'key' | 'guardrails'>[]> {
    return (await this.store.guardrailLists(trx, scope)).filter((model) => namedGuardrails(model).includes(guardrailKey));
  }

  /**
   * The rules between the model and the guardrails, run inside the transaction that writes the model.
   * `attaching`: its guardrails were sent, so they are checked too. `before`: the capabilities it had (none when new).
   */
  private async checkLinks(scope: ProjectScope, model: ModelRecord, attaching: boolean, before: readonly Capability[], trx: Db): Promise<void> {
    if (attaching) await this.guardrails.checkAttached(scope, model.key, model.guardrails, trx);
    await this.guardrails.checkJudgeChange(scope, model.key, { before, after: model.capabilities }, trx);
  }

  private missingOrBuiltIn(key: string) {
    return this.localModels && BUILT_IN_KEYS.has(key) ? ERRORS.validation(`"${key}" is a built-in model and cannot be changed`) : ERRORS.notFound('Model', key);
  }

  /** Validates an input against the project and writes it onto the record (sealing secrets). */
  private async apply(scope: ProjectScope, model: ModelRecord, input: Omit<ModelInput, 'provider'> & { provider: ProviderInput }): Promise<ModelRecord> {
    const p = input.provider;
    const type = p.type;
    const baseUrl = p.baseUrl === undefined ? (type === model.provider.type ? model.provider.baseUrl : null) : p.baseUrl;
    checkBaseUrl(type, baseUrl);
    checkHeaders(p.headers ?? undefined);
    if (typeof p.apiKey === 'string' && !HEADER_VALUE.test(p.apiKey)) throw ERRORS.validation('provider.apiKey may only hold printable characters');
    const upstreamModel = input.upstreamModel ?? model.upstreamModel;
    if (type === 'local' && !BUILT_IN_KEYS.has(upstreamModel)) {
      throw ERRORS.validation(`upstreamModel of a local model must be ${LOCAL_CHAT_MODEL} or ${LOCAL_EMBED_MODEL}`);
    }
    const capabilities = [...new Set(input.capabilities)];
    if (capabilities.length === 0) throw ERRORS.validation('capabilities must name at least one of chat, embeddings, moderation, tts, stt');
    // Checked when the capabilities or what offers them change, not on every PATCH: a model stored before this check
    // must stay editable (its pricing, its key) without first giving up a capability.
    if (!sameMembers(capabilities, model.capabilities) || type !== model.provider.type || upstreamModel !== model.upstreamModel) {
      checkCapabilities(type, upstreamModel, capabilities);
    }
    // Only fallbacks being set are checked: a stored one may name a model deleted since (calls skip it).
    if (input.fallbacks) await this.checkFallbacks(scope, model.key, input.fallbacks);
    const fallbacks = input.fallbacks ?? model.fallbacks;
    const sealed = this.sealSecrets(model, { type, baseUrl }, p);
    const provider: ProviderSettings = {
      type,
      baseUrl,
      apiVersion: typeField('apiVersion', type, p.apiVersion, model.provider.apiVersion),
      deployment: typeField('deployment', type, p.deployment, model.provider.deployment),
      mock: typeField('mock', type, p.mock, model.provider.mock),
      headerNames: sealed.headerNames,
      hasApiKey: sealed.hasApiKey,
    };
    return {
      ...model,
      name: input.name ?? model.name,
      provider,
      secrets: sealed.secrets,
      upstreamModel,
      capabilities,
      pricing: input.pricing === undefined ? model.pricing : input.pricing,
      guardrails: { input: input.guardrails?.input ?? model.guardrails.input, output: input.guardrails?.output ?? model.guardrails.output },
      fallbacks,
    };
  }

  /**
   * The model's sealed key and headers after an input. Stored ones are kept only while the model stays where it was:
   * moving it to another provider type or origin must say again which key and headers go there (or null), or the old
   * ones would follow it to a host of the editor's choosing. Untouched secrets stay sealed as they were.
   */
  private sealSecrets(model: ModelRecord, destination: Pick<ProviderSettings, 'type' | 'baseUrl'>, p: ProviderInput): { secrets: string | null; hasApiKey: boolean; headerNames: string[] } {
    const keepsKey = p.apiKey === undefined && model.provider.hasApiKey;
    const keepsHeaders = p.headers === undefined && model.provider.headerNames.length > 0;
    if ((keepsKey || keepsHeaders) && destinationOf(destination) !== destinationOf(model.provider)) {
      throw ERRORS.validation('provider.apiKey and provider.headers must be sent again (or null) when the provider type or the origin of baseUrl changes: stored credentials do not follow a model elsewhere');
    }
    if (p.apiKey === undefined && p.headers === undefined) return { secrets: model.secrets, hasApiKey: model.provider.hasApiKey, headerNames: model.provider.headerNames };
    let stored: Secrets = {};
    if (keepsKey || keepsHeaders) {
      const opened = this.secrets.openJson<Secrets>(model.secrets);
      if (!opened) throw ERRORS.validation('The stored provider credentials cannot be decrypted (the secret key changed): send provider.apiKey and provider.headers together (null to remove)');
      stored = opened;
    }
    const secrets: Secrets = {
      apiKey: p.apiKey === undefined ? stored.apiKey : (p.apiKey ?? undefined),
      headers: p.headers === undefined ? stored.headers : (p.headers ?? undefined),
    };
    const headerNames = Object.keys(secrets.headers ?? {});
    const hasApiKey = secrets.apiKey !== undefined;
    return { secrets: hasApiKey || headerNames.length > 0 ? this.secrets.encrypt(JSON.stringify(secrets)) : null, hasApiKey, headerNames };
  }

  private async checkFallbacks(scope: ProjectScope, key: string, fallbacks: string[]): Promise<void> {
    if (new Set(fallbacks).size !== fallbacks.length) throw ERRORS.validation('fallbacks must not repeat a model');
    const models = await this.projectModels(scope);
    for (const fallback of fallbacks) {
      if (fallback === key) throw ERRORS.validation('A model cannot be its own fallback');
      if (!models.has(fallback)) throw ERRORS.validation(`Fallback model "${fallback}" does not exist in this project`);
    }
  }

  private resolved(record: ModelRecord): ResolvedModel {
    const secrets = this.secrets.openJson<Secrets>(record.secrets);
    if (secrets) return { record, target: this.targetOf(record, secrets) };
    this.log.error({ model: record.key, projectId: record.projectId }, 'stored provider credentials of a model cannot be decrypted; it is not called until they are set again');
    return { record, target: this.targetOf(record, {}), unreadable: true };
  }

  private targetOf(record: ModelRecord, secrets: Secrets): ModelTarget {
    return {
      key: record.key,
      type: record.provider.type,
      baseUrl: record.provider.baseUrl,
      apiKey: secrets.apiKey ?? null,
      apiVersion: record.provider.apiVersion,
      deployment: record.provider.deployment,
      headers: lowerCaseNames(secrets.headers ?? {}),
      upstreamModel: record.upstreamModel,
      mock: record.provider.mock,
    };
  }

  /** The project's models, decrypted once per load rather than on every call. */
  private async loadModels(scope: ProjectScope): Promise<Map<string, ResolvedModel>> {
    const models = new Map<string, ResolvedModel>();
    for (const record of [...this.builtIns(scope), ...(await this.store.list(scope))]) models.set(record.key, this.resolved(record));
    return models;
  }

  private projectModels(scope: ProjectScope): Promise<Map<string, ResolvedModel>> {
    return this.cache.get(scope);
  }

  private changed(scope: ProjectScope): Promise<void> {
    return this.cache.changed(scope);
  }
}

/** The dashboard view: never the API key or header values. */
export function modelView(model: ModelRecord) {
  const { type, baseUrl, apiVersion, deployment, mock, headerNames, hasApiKey } = model.provider;
  return {
    key: model.key,
    name: model.name,
    provider: { type, baseUrl, apiVersion, deployment, mock, headerNames, hasApiKey },
    upstreamModel: model.upstreamModel,
    capabilities: model.capabilities,
    pricing: model.pricing,
    guardrails: model.guardrails,
    fallbacks: model.fallbacks,
    builtIn: model.builtIn,
    createdAt: new Date(model.createdAt).toISOString(),
    updatedAt: new Date(model.updatedAt).toISOString(),
  };
}
