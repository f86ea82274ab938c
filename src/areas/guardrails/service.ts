import type { Logger } from 'pino';
import { isUniqueViolation } from '../../db/errors.js';
import { AppError, ERRORS } from '../../http/errors.js';
import type { ProjectScope } from '../../http/principal.js';
import { compileBodyValidator, formatValidationError } from '../../http/validation.js';
import { BufferedWriter } from '../../platform/buffered-writer.js';
import type { Bus } from '../../platform/bus.js';
import { newId, timeOrderedId } from '../../platform/ids.js';
import type { ModelService } from '../models/service.js';
import type { ModelGuardrails, ModelRecord } from '../models/store.js';
import { EvaluationError, runGuardrail, type Judge } from './engines.js';
import { validateExtraCategories } from './moderation.js';
import { normalizeText } from './normalize.js';
import { redactPii, scanPii } from './pii.js';
import { CONFIG_SCHEMAS, GUARDRAIL_KEY_PATTERN } from './schemas.js';
import type { EvaluationRecord, FailMode, GuardrailAction, GuardrailRecord, GuardrailStore, GuardrailTarget, GuardrailType } from './store.js';
import type { Finding } from './types.js';

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

/** Interface 2.6: the outcome of one guardrail over one text. */
export interface EvaluationResult {
  passed: boolean;
  findings: Finding[];
  /** Why the text did not pass, for the client; null when it passed. */
  message: string | null;
  /** PII guardrails that redact: the normalised text with every finding replaced. */
  redactedText?: string;
}

/** Where an evaluation happens, for its record. */
export interface EvaluationContext {
  scope: ProjectScope;
  requestId: string;
  stage: EvaluationRecord['stage'];
  model: string | null;
  judge: Judge;
}

/** A guardrail with action block stopped a request (interface 4.9): 400 with the guardrail's key and findings. */
export class GuardrailBlock extends AppError {
  constructor(guardrail: GuardrailRecord, stage: 'input' | 'output', findings: Finding[]) {
    super(400, 'guardrail_block', `The ${stage} was blocked by guardrail "${guardrail.key}" (${[...new Set(findings.filter((f) => f.block).map((f) => f.category))].join(', ')})`, 'guardrail_block', {}, {
      guardrail_key: guardrail.key,
      action: 'block',
      findings,
    });
  }
}

const CHANGED_TOPIC = 'guardrails.changed';
const CACHE_TTL_MS = 30_000;
const CACHE_MAX_PROJECTS = 10_000;
/** Recorded text: at most this much of the start, PII redacted. */
const MASKED_PREVIEW_CHARS = 300;
const configValidators = Object.fromEntries(Object.entries(CONFIG_SCHEMAS).map(([type, schema]) => [type, compileBodyValidator(schema)])) as Record<GuardrailType, ReturnType<typeof compileBodyValidator>>;
const GUARDRAIL_KEY = new RegExp(GUARDRAIL_KEY_PATTERN);

/** The text kept in an evaluation record: never a raw value, only the start with every PII finding redacted. */
function masked(text: string): string {
  const start = text.slice(0, MASKED_PREVIEW_CHARS * 2);
  return redactPii(start, scanPii(start)).slice(0, MASKED_PREVIEW_CHARS);
}

/** Whether a guardrail asks a model (so it cannot check a stream piece by piece). */
export function usesJudge(guardrail: GuardrailRecord): boolean {
  return judgeNeeds(guardrail.type, guardrail.config) !== null;
}

/** Which judge model a configuration needs, and what that model must offer. */
function judgeNeeds(type: GuardrailType, config: Record<string, unknown>): { capabilities: string[]; why: string } | null {
  if (type === 'custom_prompt') return { capabilities: ['chat'], why: 'custom_prompt guardrails are judged by a chat model' };
  if (type === 'moderation' && config.engine === 'model') return { capabilities: ['moderation', 'chat'], why: 'the model moderation engine needs a moderation or chat model' };
  if (type === 'prompt_shield' && config.modelCheck === true) return { capabilities: ['chat'], why: 'modelCheck asks a chat model' };
  return null;
}

/**
 * Guardrails (interface 2.6, 4.9): the project's configurations, evaluation on demand, and enforcement on model calls
 * (the inference core calls enforce()). Every evaluation is recorded, with masked text only.
 */
export class GuardrailService {
  private readonly cache = new Map<string, { guardrails: Map<string, GuardrailRecord>; until: number }>();
  private readonly records: BufferedWriter<EvaluationRecord>;

  constructor(
    private readonly store: GuardrailStore,
    private readonly models: ModelService,
    private readonly bus: Bus,
    private readonly log: Logger,
  ) {
    this.records = new BufferedWriter({
      name: 'guardrail evaluations',
      write: (batch) => store.insertEvaluations(batch),
      ping: () => store.ping(),
      describe: (record) => ({ evaluationId: record.id, requestId: record.requestId }),
      log,
    });
  }

  async start(): Promise<void> {
    await this.bus.subscribe(CHANGED_TOPIC, (projectKey) => this.cache.delete(projectKey));
  }

  list(scope: ProjectScope): Promise<GuardrailRecord[]> {
    return this.store.list(scope);
  }

  /** Another project's guardrail is a 404 like a missing one. */
  async get(scope: ProjectScope, key: string): Promise<GuardrailRecord> {
    const guardrail = (await this.projectGuardrails(scope)).get(key);
    if (!guardrail) throw ERRORS.notFound('Guardrail', key);
    return guardrail;
  }

  async create(scope: ProjectScope, input: GuardrailInput): Promise<GuardrailRecord> {
    if (!GUARDRAIL_KEY.test(input.key)) throw ERRORS.validation('key must be 1-100 letters, digits, dots, dashes, underscores or colons, starting with a letter or digit');
    const now = Date.now();
    const record = await this.checked(scope, {
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
      await this.store.insert(record);
    } catch (err) {
      throw isUniqueViolation(err) ? ERRORS.conflict(`A guardrail with key "${input.key}" already exists`) : err;
    }
    await this.changed(scope);
    return record;
  }

  async update(scope: ProjectScope, key: string, patch: GuardrailPatch): Promise<GuardrailRecord> {
    const current = await this.store.find(scope, key);
    if (!current) throw ERRORS.notFound('Guardrail', key);
    const defined = Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined)) as GuardrailPatch;
    const updated = await this.checked(scope, { ...current, ...defined, modelKey: patch.modelKey === undefined ? current.modelKey : patch.modelKey, updatedAt: Date.now() });
    // Models naming it for a stage its new target excludes would silently stop running it: refuse instead.
    await this.checkAttachments(scope, updated);
    await this.store.update(updated);
    await this.changed(scope);
    return updated;
  }

  /** A guardrail a model still names cannot go: the model would run without it. */
  async delete(scope: ProjectScope, key: string): Promise<void> {
    const users = (await this.models.list(scope)).filter((m) => m.guardrails.input.includes(key) || m.guardrails.output.includes(key));
    if (users.length > 0) throw ERRORS.conflict(`Guardrail "${key}" is used by model ${users.map((m) => `"${m.key}"`).join(', ')}; remove it from the model first`);
    if (!(await this.store.delete(scope, key))) throw ERRORS.notFound('Guardrail', key);
    await this.changed(scope);
  }

  /** The rules the schema cannot say: the config of the type, redaction only for PII, a judge model when one is needed. */
  private async checked(scope: ProjectScope, record: GuardrailRecord): Promise<GuardrailRecord> {
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
    const model = await this.models.find(scope, record.modelKey);
    if (!model) throw ERRORS.validation(`modelKey: model "${record.modelKey}" does not exist in this project`);
    if (!needs.capabilities.some((c) => model.record.capabilities.includes(c as never))) throw ERRORS.validation(`modelKey: model "${record.modelKey}" cannot judge: ${needs.why}`);
    return record;
  }

  private async checkAttachments(scope: ProjectScope, guardrail: GuardrailRecord): Promise<void> {
    for (const model of await this.models.list(scope)) this.checkStages(guardrail, model.key, model.guardrails);
  }

  private checkStages(guardrail: GuardrailRecord, modelKey: string, attached: Partial<ModelGuardrails>): void {
    if (attached.input?.includes(guardrail.key) && guardrail.target === 'output') throw ERRORS.validation(`Guardrail "${guardrail.key}" targets output only, but model "${modelKey}" runs it on input`);
    if (attached.output?.includes(guardrail.key) && guardrail.target === 'input') throw ERRORS.validation(`Guardrail "${guardrail.key}" targets input only, but model "${modelKey}" runs it on output`);
  }

  /** For the model registry: every guardrail a model names must exist and allow the stage it is named for. */
  async checkModelGuardrails(scope: ProjectScope, modelKey: string, attached: Partial<ModelGuardrails>): Promise<void> {
    const guardrails = await this.projectGuardrails(scope);
    for (const key of [...(attached.input ?? []), ...(attached.output ?? [])]) {
      const guardrail = guardrails.get(key);
      if (!guardrail) throw ERRORS.validation(`guardrails: guardrail "${key}" does not exist in this project`);
      this.checkStages(guardrail, modelKey, attached);
    }
  }

  /** The enabled guardrails a model runs on its input and on its output, in the order it names them. */
  async forModel(scope: ProjectScope, model: ModelRecord): Promise<{ input: GuardrailRecord[]; output: GuardrailRecord[] }> {
    if (model.guardrails.input.length === 0 && model.guardrails.output.length === 0) return { input: [], output: [] };
    const guardrails = await this.projectGuardrails(scope);
    const pick = (keys: string[]) =>
      keys.map((key) => {
        const guardrail = guardrails.get(key);
        // Deletion is refused while a model names it; a row removed behind Waygate's back must not switch checks off.
        if (!guardrail) throw new AppError(400, 'invalid_request_error', `Model "${model.key}" names guardrail "${key}", which does not exist in this project`, 'guardrail_missing');
        return guardrail;
      }).filter((g) => g.enabled);
    return { input: pick(model.guardrails.input), output: pick(model.guardrails.output) };
  }

  /** POST /guardrails/evaluate: one guardrail, one text. */
  async evaluateByKey(context: EvaluationContext, key: string, text: string): Promise<{ guardrail: GuardrailRecord; result: EvaluationResult }> {
    const guardrail = await this.get(context.scope, key);
    return { guardrail, result: await this.evaluate(context, guardrail, text) };
  }

  /** Runs one guardrail over a text (normalised first), with failMode applied to judge failures, and records it. */
  async evaluate(
    context: EvaluationContext,
    guardrail: GuardrailRecord,
    text: string,
    options: { outcomeIfFailed?: EvaluationRecord['outcome']; recordPassed?: boolean } = {},
  ): Promise<EvaluationResult> {
    const started = performance.now();
    const normalised = normalizeText(text);
    let findings: Finding[];
    let redactedText: string | undefined;
    try {
      const judgeCapabilities = guardrail.modelKey ? ((await this.models.find(context.scope, guardrail.modelKey))?.record.capabilities ?? []) : [];
      ({ findings, redactedText } = await runGuardrail(guardrail, normalised, context.judge, judgeCapabilities));
    } catch (err) {
      if (!(err instanceof EvaluationError)) throw err;
      findings = [{ category: 'evaluation_error', message: err.message, block: guardrail.failMode === 'closed' }];
    }
    const passed = !findings.some((f) => f.block);
    const result: EvaluationResult = {
      passed,
      findings,
      message: passed ? null : `Blocked by guardrail "${guardrail.name}": ${[...new Set(findings.filter((f) => f.block).map((f) => f.category))].join(', ')}`,
      ...(guardrail.action === 'redact' && redactedText !== undefined ? { redactedText } : {}),
    };
    if (!passed || options.recordPassed !== false) this.record(context, guardrail, normalised, result, passed ? null : (options.outcomeIfFailed ?? null), performance.now() - started);
    return result;
  }

  private record(context: EvaluationContext, guardrail: GuardrailRecord, text: string, result: EvaluationResult, outcome: EvaluationRecord['outcome'], latencyMs: number): void {
    const now = Date.now();
    this.records.push({
      id: timeOrderedId('gev', now),
      ...context.scope,
      guardrailKey: guardrail.key,
      guardrailType: guardrail.type,
      stage: context.stage,
      model: context.model,
      requestId: context.requestId,
      passed: result.passed,
      action: guardrail.action,
      outcome,
      categories: [...new Set(result.findings.map((f) => f.category))],
      maskedText: masked(text),
      latencyMs,
      createdAt: now,
    });
  }

  /**
   * Enforcement on a model call (issue 5 part 7): each guardrail in turn over the texts. block throws GuardrailBlock;
   * redact returns the texts redacted (later guardrails see them so); flag lets them through, recorded.
   * PII runs per text so that each can be redacted in place; the others judge the texts joined.
   */
  async enforce(context: EvaluationContext & { stage: 'input' | 'output' }, guardrails: GuardrailRecord[], texts: string[], final = true): Promise<string[]> {
    let current = texts;
    for (const guardrail of guardrails) {
      const outcome: EvaluationRecord['outcome'] = guardrail.action === 'block' ? 'blocked' : guardrail.action === 'redact' ? 'redacted' : 'flagged';
      // A stream is checked several times on its way; only the final check (or a failing one) is recorded.
      const options = { outcomeIfFailed: outcome, recordPassed: final };
      const results = guardrail.type === 'pii'
        ? await Promise.all(current.map((text) => this.evaluate(context, guardrail, text, options)))
        : [await this.evaluate(context, guardrail, current.join('\n\n'), options)];
      const failed = results.filter((r) => !r.passed);
      if (failed.length === 0) continue;
      if (guardrail.action === 'block') throw new GuardrailBlock(guardrail, context.stage, failed.flatMap((r) => r.findings));
      if (guardrail.action === 'redact') current = current.map((text, i) => results[i]?.redactedText ?? text);
    }
    return current;
  }

  /** Recent evaluations and the fail rate over the last 24 hours. */
  async evaluations(scope: ProjectScope, key: string, limit: number) {
    await this.get(scope, key);
    await this.records.flush();
    const since = Date.now() - 86_400_000;
    const [recent, counts] = await Promise.all([this.store.recentEvaluations(scope, key, limit), this.store.counts(scope, key, since)]);
    return { since, ...counts, failRate: counts.evaluations === 0 ? 0 : counts.failed / counts.evaluations, recent };
  }

  flush(): Promise<void> {
    return this.records.flush();
  }

  close(): Promise<void> {
    return this.records.close();
  }

  private async projectGuardrails(scope: ProjectScope): Promise<Map<string, GuardrailRecord>> {
    const cacheKey = `${scope.tenantId}:${scope.projectId}`;
    const hit = this.cache.get(cacheKey);
    const now = Date.now();
    if (hit && hit.until > now) return hit.guardrails;
    const guardrails = new Map((await this.store.list(scope)).map((g) => [g.key, g]));
    if (!this.cache.has(cacheKey) && this.cache.size >= CACHE_MAX_PROJECTS) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(cacheKey, { guardrails, until: now + CACHE_TTL_MS });
    return guardrails;
  }

  private async changed(scope: ProjectScope): Promise<void> {
    const cacheKey = `${scope.tenantId}:${scope.projectId}`;
    this.cache.delete(cacheKey);
    // Best effort: without the notice other instances still reload when their cached copy expires.
    await this.bus.publish(CHANGED_TOPIC, cacheKey).catch((err: unknown) => this.log.warn({ err }, 'could not announce a guardrail change'));
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
