import type { Logger } from 'pino';
import { isForeignKeyViolation, isUniqueViolation } from '../../db/errors.js';
import type { Transactor } from '../../db/index.js';
import type { Db } from '../../db/types.js';
import { ERRORS } from '../../http/errors.js';
import type { ProjectScope } from '../../http/principal.js';
import { compileBodyValidator, formatValidationError } from '../../http/validation.js';
import type { Bus } from '../../platform/bus.js';
import { changedAt, untilWritten } from '../../platform/compare-and-set.js';
import { newId } from '../../platform/ids.js';
import type { Capability } from '../../providers/types.js';
import type { CapabilityChange, ModelService } from '../models/service.js';
import type { ModelGuardrails, ModelRecord } from '../models/store.js';
import { validateExtraCategories } from './moderation.js';
import { CONFIG_SCHEMAS, GUARDRAIL_KEY_PATTERN } from './schemas.js';
import type { FailMode, GuardrailAction, GuardrailRecord, GuardrailStore, GuardrailTarget, GuardrailType } from './store.js';
import { ProjectCache } from '../../platform/project-cache.js';

export interface GuardrailInput {
  key: string;
  type: GuardrailType;
  name?: string;
  action?: GuardrailAction;
  target?: GuardrailTarget;
  config?: Record<string, unknown>;
  modelKey?: string | null;
  failMode?: FailMode;
  enabled?: boolean;
}

export type GuardrailPatch = Partial<Omit<GuardrailInput, 'key' | 'type'>>;

const CHANGED_TOPIC = 'guardrails.changed';
/** Tries of a PATCH that other changes keep overtaking, before it answers 409. */
const UPDATE_ATTEMPTS = 5;
const configValidators = Object.fromEntries(Object.entries(CONFIG_SCHEMAS).map(([type, schema]) => [type, compileBodyValidator(schema)])) as Record<GuardrailType, ReturnType<typeof compileBodyValidator>>;
const GUARDRAIL_KEY = new RegExp(GUARDRAIL_KEY_PATTERN);

/** Which judge model a configuration needs, and what that model must offer (any one of the capabilities). */
function judgeNeeds(type: GuardrailType, config: Record<string, unknown>): { capabilities: Capability[]; why: string } | null {
  if (type === 'custom_prompt') return { capabilities: ['chat'], why: 'custom_prompt guardrails are judged by a chat model' };
  if (type === 'moderation' && config.engine === 'model') return { capabilities: ['moderation', 'chat'], why: 'the model moderation engine needs a moderation or chat model' };
  if (type === 'prompt_shield' && config.modelCheck === true) return { capabilities: ['chat'], why: 'modelCheck asks a chat model' };
  return null;
}

/** Whether a model with these capabilities can judge what a guardrail needs. */
function serves(needs: { capabilities: Capability[] }, capabilities: readonly Capability[]): boolean {
  return needs.capabilities.some((c) => capabilities.includes(c));
}

/** A moderation guardrail with categories of its own, which only the builtin engine or a chat judge can check. */
function hasExtraCategories(guardrail: GuardrailRecord): boolean {
  return guardrail.type === 'moderation' && Boolean(guardrail.config.extraCategories);
}

/** Whether a guardrail asks a model (so it cannot check a stream piece by piece). */
export function usesJudge(guardrail: GuardrailRecord): boolean {
  return judgeNeeds(guardrail.type, guardrail.config) !== null;
}

/** Whether a model names any guardrail (most do not: their calls skip the guardrail lookup). */
export function hasGuardrails(model: ModelRecord): boolean {
  return model.guardrails.input.length > 0 || model.guardrails.output.length > 0;
}

/**
 * Guardrail configurations (interface 2.6, 4.9; issue 5 part 1), cached per project for the request path, and their
 * links with models: the guardrails a model names, and the models guardrails ask as judges.
 */
export class GuardrailService {
  private readonly cache: ProjectCache<Map<string, GuardrailRecord>>;

  constructor(
    private readonly store: GuardrailStore,
    private readonly models: ModelService,
    private readonly transaction: Transactor,
    bus: Bus,
    log: Logger,
  ) {
    this.cache = new ProjectCache(bus, CHANGED_TOPIC, (scope) => this.loadGuardrails(scope), log);
  }

  async start(): Promise<void> {
    await this.cache.start();
  }

  list(scope: ProjectScope): Promise<GuardrailRecord[]> {
    return this.store.list(scope);
  }

  /** Another project's guardrail is a 404 like a missing one. */
  async get(scope: ProjectScope, key: string): Promise<GuardrailRecord> {
    const guardrail = await this.find(scope, key);
    if (!guardrail) throw ERRORS.notFound('Guardrail', key);
    return guardrail;
  }

  /** The project's guardrail, or null (another project's too). */
  async find(scope: ProjectScope, key: string): Promise<GuardrailRecord | null> {
    return (await this.projectGuardrails(scope)).get(key) ?? null;
  }

  async create(scope: ProjectScope, input: GuardrailInput): Promise<GuardrailRecord> {
    if (!GUARDRAIL_KEY.test(input.key)) throw ERRORS.validation('key must be 1-100 letters, digits, dots, dashes, underscores or colons, starting with a letter or digit');
    const now = Date.now();
    const record = this.checked({
      id: newId('grd'),
      ...scope,
      key: input.key,
      name: input.name ?? input.key,
      type: input.type,
      action: input.action ?? 'block',
      target: input.target ?? 'input',
      config: input.config ?? {},
      modelKey: input.modelKey ?? null,
      failMode: input.failMode ?? 'closed',
      enabled: input.enabled ?? true,
      createdAt: now,
      updatedAt: now,
    });
    try {
      await this.transaction(async (trx) => {
        await this.checkJudge(scope, record, trx);
        await this.store.insert(trx, record);
      });
    } catch (err) {
      throw isUniqueViolation(err) ? ERRORS.conflict(`A guardrail with key "${input.key}" already exists`) : err;
    }
    await this.changed(scope);
    return record;
  }

  /**
   * Applies the patch to the guardrail as stored and checks the result as a whole. A change that lands between the
   * read and the write (another PATCH) makes it start again from the new state, so neither change is lost. What it
   * relies on is checked in the transaction that writes it, once held: its judge model, then its own row (the order
   * the model registry takes them in, a model before the guardrails it names, so that the two cannot deadlock).
   */
  async update(scope: ProjectScope, key: string, patch: GuardrailPatch): Promise<GuardrailRecord> {
    const defined = Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined)) as GuardrailPatch;
    const updated = await untilWritten(UPDATE_ATTEMPTS, async () => {
      const current = await this.store.find(scope, key);
      if (!current) throw ERRORS.notFound('Guardrail', key);
      // Undefined fields keep the current value; null (modelKey) is kept as a change.
      const next = this.checked({ ...current, ...defined, updatedAt: changedAt(current.updatedAt) });
      return this.transaction(async (trx) => {
        await this.checkJudge(scope, next, trx);
        if ((await this.store.hold(trx, scope, next.id)) !== current.updatedAt) return null;
        // Models naming it for a stage its new target excludes would silently stop running it: refuse instead.
        for (const model of await this.models.namingGuardrail(scope, key, trx)) this.checkStages(next, model.key, model.guardrails);
        await this.store.update(trx, scope, next);
        return next;
      });
    });
    if (!updated) throw ERRORS.conflict(`Guardrail "${key}" kept changing while this change was applied; try again`);
    await this.changed(scope);
    return updated;
  }

  /**
   * A guardrail a model still names cannot go: the model would run without it. The database has the last word (the
   * links' foreign key), so a model that names it on another instance meanwhile keeps it too.
   */
  async delete(scope: ProjectScope, key: string): Promise<void> {
    const inUse = (models: string[]) =>
      ERRORS.conflict(`Guardrail "${key}" is used by ${models.length > 0 ? `model ${models.map((m) => `"${m}"`).join(', ')}` : 'a model'}; remove it from the model first`);
    const users = (await this.models.list(scope)).filter((m) => m.guardrails.input.includes(key) || m.guardrails.output.includes(key));
    if (users.length > 0) throw inUse(users.map((m) => m.key));
    try {
      if (!(await this.store.delete(scope, key))) throw ERRORS.notFound('Guardrail', key);
    } catch (err) {
      if (isForeignKeyViolation(err)) throw inUse(await this.store.namedBy(scope, key));
      throw err;
    }
    await this.changed(scope);
  }

  /** The rules the schema cannot say: the config of the type, redaction only for PII, a modelKey when one is needed. */
  private checked(record: GuardrailRecord): GuardrailRecord {
    const validate = configValidators[record.type];
    if (!validate(record.config)) throw ERRORS.validation(formatValidationError(validate.errors ?? [], 'config'));
    if (record.type === 'moderation' && record.config.extraCategories) {
      try {
        validateExtraCategories(record.config.extraCategories as Parameters<typeof validateExtraCategories>[0]);
      } catch (err) {
        throw ERRORS.validation(`config.extraCategories: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    if (record.action === 'redact' && record.type !== 'pii') throw ERRORS.validation('action redact is for pii guardrails only (use block or flag)');
    const needs = judgeNeeds(record.type, record.config);
    if (!needs) {
      if (record.modelKey !== null) throw ERRORS.validation(`modelKey is not used by this guardrail; remove it (${record.type} with this config runs offline)`);
      return record;
    }
    if (record.modelKey === null) throw ERRORS.validation(`modelKey is required: ${needs.why}`);
    return record;
  }

  /**
   * An enabled guardrail's judge model exists and can judge, as `trx` reads it; the model is held until `trx` ends,
   * so that it is not deleted or changed before the guardrail is written. A disabled guardrail's judge is not checked,
   * so a guardrail whose judge is broken can be switched off.
   */
  private async checkJudge(scope: ProjectScope, record: GuardrailRecord, trx: Db): Promise<void> {
    const needs = judgeNeeds(record.type, record.config);
    if (!needs || record.modelKey === null || !record.enabled) return;
    const model = await this.models.findShared(scope, record.modelKey, trx);
    if (!model) throw ERRORS.validation(`modelKey: model "${record.modelKey}" does not exist in this project`);
    const capabilities = model.capabilities;
    if (!needs.capabilities.some((c) => capabilities.includes(c))) throw ERRORS.validation(`modelKey: model "${record.modelKey}" cannot judge: ${needs.why}`);
    if (hasExtraCategories(record) && capabilities.includes('moderation')) {
      throw ERRORS.validation(`config.extraCategories cannot be judged by "${record.modelKey}": a moderation endpoint knows only its own categories (use the builtin engine or a chat model)`);
    }
  }

  private checkStages(guardrail: GuardrailRecord, modelKey: string, attached: Partial<ModelGuardrails>): void {
    if (attached.input?.includes(guardrail.key) && guardrail.target === 'output') throw ERRORS.validation(`Guardrail "${guardrail.key}" targets output only, but model "${modelKey}" runs it on input`);
    if (attached.output?.includes(guardrail.key) && guardrail.target === 'input') throw ERRORS.validation(`Guardrail "${guardrail.key}" targets input only, but model "${modelKey}" runs it on output`);
  }

  /**
   * For the model registry: every guardrail a model names must exist and allow the stage it is named for. They are
   * read through `trx`, the transaction that writes the model, and held until it ends: a change of their target waits
   * for the model's write and then sees it.
   */
  async checkModelGuardrails(scope: ProjectScope, modelKey: string, attached: Partial<ModelGuardrails>, trx: Db): Promise<void> {
    const named = [...(attached.input ?? []), ...(attached.output ?? [])];
    const guardrails = new Map((await this.store.findShared(trx, scope, [...new Set(named)])).map((g) => [g.key, g]));
    for (const key of named) {
      const guardrail = guardrails.get(key);
      if (!guardrail) throw ERRORS.validation(`guardrails: guardrail "${key}" does not exist in this project`);
      this.checkStages(guardrail, modelKey, attached);
    }
  }

  /**
   * For the model registry: a model an enabled guardrail asks as its judge may not be deleted (`change` null) or lose
   * what the guardrail needs, or the guardrail would fail (closed) or pass everything (open); nor gain moderation,
   * whose endpoint would answer for it without the extra categories it asks. Only a change that breaks the link is
   * refused: a judge stored without what it needs (before these rules, or by an older instance) stays editable, so
   * that its key can be rotated while the guardrail is fixed. Read through `trx`, the transaction that writes the
   * model and holds its row: a guardrail that names it meanwhile has either committed (and is read here) or waits for
   * this write.
   */
  async checkJudgeChange(scope: ProjectScope, modelKey: string, change: CapabilityChange | null, trx: Db): Promise<void> {
    for (const guardrail of await this.store.judgedBy(trx, scope, modelKey)) {
      if (!guardrail.enabled) continue;
      const needs = judgeNeeds(guardrail.type, guardrail.config);
      if (needs && (!change || (serves(needs, change.before) && !serves(needs, change.after)))) {
        throw ERRORS.conflict(`Model "${modelKey}" judges for guardrail "${guardrail.key}" (${needs.why}); change or disable the guardrail first`);
      }
      // A judge that gains moderation is asked through its moderation endpoint, which knows none of the extra
      // categories.
      if (change && hasExtraCategories(guardrail) && change.after.includes('moderation') && !change.before.includes('moderation')) {
        throw ERRORS.conflict(`Model "${modelKey}" judges for guardrail "${guardrail.key}", whose config.extraCategories a moderation endpoint cannot judge; change or disable the guardrail first`);
      }
    }
  }

  /** The enabled guardrails a model runs on its input and on its output, in the order it names them. */
  async forModel(scope: ProjectScope, model: ModelRecord): Promise<{ input: GuardrailRecord[]; output: GuardrailRecord[] }> {
    if (!hasGuardrails(model)) return { input: [], output: [] };
    const guardrails = await this.projectGuardrails(scope);
    const pick = (keys: string[]) =>
      keys
        .map((key) => {
          // Deletion is refused while a model names it; a row removed behind Waygate's back must not switch checks off.
          const guardrail = guardrails.get(key);
          if (!guardrail) throw ERRORS.guardrailMissing(model.key, key);
          return guardrail;
        })
        .filter((g) => g.enabled);
    return { input: pick(model.guardrails.input), output: pick(model.guardrails.output) };
  }

  private async loadGuardrails(scope: ProjectScope): Promise<Map<string, GuardrailRecord>> {
    return new Map((await this.store.list(scope)).map((g) => [g.key, g]));
  }

  private projectGuardrails(scope: ProjectScope): Promise<Map<string, GuardrailRecord>> {
    return this.cache.get(scope);
  }

  private changed(scope: ProjectScope): Promise<void> {
    return this.cache.changed(scope);
  }
}

/** The dashboard view of a guardrail. */
export function guardrailView(guardrail: GuardrailRecord) {
  return {
    key: guardrail.key,
    name: guardrail.name,
    type: guardrail.type,
    action: guardrail.action,
    target: guardrail.target,
    config: guardrail.config,
    modelKey: guardrail.modelKey,
    failMode: guardrail.failMode,
    enabled: guardrail.enabled,
    createdAt: new Date(guardrail.createdAt).toISOString(),
    updatedAt: new Date(guardrail.updatedAt).toISOString(),
  };
}
