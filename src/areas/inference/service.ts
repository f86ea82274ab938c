import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { AppError, ERRORS } from '../../http/errors.js';
import type { ProjectScope } from '../../http/principal.js';
import { DependencyUnavailableError } from '../../platform/errors.js';
import { unixSeconds } from '../../platform/time.js';
import { withFirst } from '../../platform/iterables.js';
import { lazy } from '../../platform/lazy.js';
import { asText } from '../../platform/text.js';
import { UpstreamError } from '../../providers/errors.js';
import { choiceCount, estimateChatInput, estimateChatOutput, estimateEmbeddingInput, openAiUsage, TokenCounter, usageOf, writtenText } from '../../providers/tokens.js';
import { outputLimitField } from '../../providers/openai-compatible.js';
import type { Capability, ChatChunk, JsonObject, JsonResult, ModelTarget, Provider, ProviderType, Usage } from '../../providers/types.js';
import type { Judge } from '../guardrails/engines.js';
import type { EvaluationContext, GuardrailEvaluator } from '../guardrails/evaluator.js';
import { hasGuardrails, usesJudge, type GuardrailService } from '../guardrails/service.js';
import type { GuardrailRecord } from '../guardrails/store.js';
import { guardStream, type StreamGuardMode } from '../guardrails/stream.js';
import { hasLimits, unreserved, type Budget, type Estimate, type LimitService, type LimitSubject, type RateLimit, type Reservation } from '../limits/service.js';
import type { ResolvedModel, ModelService } from '../models/service.js';
import type { ModelRecord, Pricing } from '../models/store.js';
import type { ProjectService } from '../projects/service.js';
import type { ProjectRecord } from '../projects/store.js';
import type { UsageService } from '../usage/service.js';
import { chatInputTexts, chatOutputTexts, embeddingInputTexts, type TextSlots } from './texts.js';

/** Who is calling and about what; built by the route from the token and the request. */
export interface Caller {
  scope: ProjectScope;
  tokenId: string | null;
  userId: string | null;
  budget: Budget | null;
  rateLimit: RateLimit | null;
  requestId: string;
  sessionId: string | null;
  /** Aborted when the client goes away: the upstream call is abandoned. */
  signal: AbortSignal;
  /** performance.now() when the request arrived. */
  startedAt: number;
  /**
   * Where the time this caller's request spends waiting on upstreams is added up, by every model call made for it
   * (judges and agent turns included): the request's x-waygate-overhead-ms is its time minus this.
   */
  timing: { upstreamMs: number };
  /** What the usage event names as the service (`chat`, `embeddings`, ... or `batches`, `agents`). */
  service?: string;
}

/** A finished JSON answer: the body (raw text when forwarded unchanged) and the usage metered. */
export interface JsonAnswer {
  body: JsonObject;
  raw?: string;
  usage: Usage;
}

/** Output tokens reserved (and the cap) for a budgeted chat call that names no max_tokens. */
export const DEFAULT_OUTPUT_RESERVE = 4096;

const NO_PRICE: Pricing = { inputPer1M: 0, outputPer1M: 0, currency: 'USD' };
const NO_GUARDS: { input: GuardrailRecord[]; output: GuardrailRecord[] } = { input: [], output: [] };

/** Where guardrails read and write a call's texts: its request and its answer. */
interface GuardedTexts {
  input: (body: JsonObject) => TextSlots;
  output?: (answer: JsonObject) => TextSlots;
}
const CHAT_TEXTS: GuardedTexts = { input: chatInputTexts, output: chatOutputTexts };
const EMBEDDING_TEXTS: GuardedTexts = { input: embeddingInputTexts };
const STATUS_CLIENT_CLOSED = 499;

function costOf(pricing: Pricing | null, input: number, output: number): number {
  const price = pricing ?? NO_PRICE;
  return (input * price.inputPer1M + output * price.outputPer1M) / 1e6;
}

const OUTPUT_LIMIT_FIELDS = ['max_tokens', 'max_completion_tokens'] as const;

/** The output limit a request names: with both fields, the larger (an upstream may obey either one). */
function requestedMaxTokens(body: JsonObject): number | undefined {
  let limit: number | undefined;
  for (const field of OUTPUT_LIMIT_FIELDS) {
    const value = body[field];
    if (typeof value === 'number') limit = Math.max(limit ?? value, value);
  }
  return limit;
}

/** Output tokens a chat call may use in all: its max_tokens (or the default reserve) for every choice. */
function desiredChatOutput(body: JsonObject): number {
  return (requestedMaxTokens(body) ?? DEFAULT_OUTPUT_RESERVE) * choiceCount(body);
}

/** A chunk that carries usage and no choices (null, missing or empty): OpenAI's usage chunk, last in a stream. */
function isUsageChunk(data: JsonObject): boolean {
  return data.usage !== undefined && !(Array.isArray(data.choices) && data.choices.length > 0);
}

/** A chunk as the client's SSE frame; a usage chunk without a choices list (or with null) gets OpenAI's empty one. */
function frameOf(chunk: ChatChunk, usageChunk: boolean): string {
  if (usageChunk && !Array.isArray(chunk.data.choices)) return `data: ${JSON.stringify({ ...chunk.data, choices: [] })}\n\n`;
  return `data: ${chunk.raw ?? JSON.stringify(chunk.data)}\n\n`;
}

/**
 * The error event of a stream the upstream failed. Type and code stay Waygate's (the client can tell a failure
 * mid-stream from one before it); the message carries what the upstream said, and its code, when it said something.
 */
function streamFailure(err: UpstreamError): Record<string, unknown> {
  const said = err.body?.error;
  const code = asText(said?.code);
  const reason = said ? `${asText(said.message, err.message)}${code ? ` (${code})` : ''}` : err.message;
  return { message: `Upstream stream failed: ${reason}`, type: 'upstream_error', code: 'upstream_stream_failed' };
}

/** A project as a limit subject: its limits, and their version (a budget that began counting anew has another). */
function projectSubject(scope: LimitSubject['scope'], project: { limitsUpdatedAt: number; budget: Budget | null; rateLimit: RateLimit | null }): LimitSubject {
  return { kind: 'project', scope, version: project.limitsUpdatedAt, budget: project.budget, rateLimit: project.rateLimit };
}

/** The project a reservation was admitted under, as its subject (none for a call without a project). */
function projectSubjectOf(reservation: Reservation): LimitSubject | undefined {
  return reservation.subjects.find((subject) => subject.kind === 'project');
}

/**
 * The request with its output capped at the reservation's allowance (shared by its choices), when a budget or tpm
 * limit set one. Every limit field the request names is capped, and the upstream's own field is set too: a server
 * that reads only `max_tokens` must not get its cap in `max_completion_tokens` alone. OpenAI's and Azure's field
 * (`max_completion_tokens`) is added only to a request that names neither: sending both fields is theirs to refuse.
 */
function capped(body: JsonObject, reservation: Reservation | null, target: ModelTarget): JsonObject {
  if (!reservation?.capped) return body;
  const perChoice = Math.floor(reservation.allowance / choiceCount(body));
  const requested = requestedMaxTokens(body);
  if (requested !== undefined && requested <= perChoice) return body;
  const own = outputLimitField(target);
  const out: JsonObject = own === 'max_tokens' || requested === undefined ? { ...body, [own]: perChoice } : { ...body };
  for (const field of OUTPUT_LIMIT_FIELDS) {
    const value = body[field];
    if (value !== undefined && value !== null) out[field] = typeof value === 'number' ? Math.min(value, perChoice) : perChoice;
  }
  return out;
}

/** A model as an entry of OpenAI's model list, with the capabilities that decide which endpoints take it. */
function openAiModel(m: ModelRecord) {
  return { id: m.key, object: 'model' as const, created: unixSeconds(m.createdAt), owned_by: m.provider.type, capabilities: m.capabilities };
}

/**
 * What the upstream attempts of one call did (firstAnswer fills it in, whatever the outcome): the last model tried
 * (a failed call is metered and priced as that one), whether a failed attempt's request had reached its upstream
 * (abandonedUsage), and the time spent on them all, retries, backoff and fallbacks included.
 */
interface Attempts {
  model: ResolvedModel;
  reachedUpstream: boolean;
  ms: number;
}

/**
 * What a call with no answer is billed: its input estimate when the client left (499) or the upstream timed out
 * (504) after the request had reached the upstream, which then worked on it; calls abandoned on purpose must not
 * cost a budget nothing. Nothing otherwise (refused, or never sent).
 */
export function abandonedUsage(attempts: Pick<Attempts, 'reachedUpstream'>, status: number, estimateInput: () => number): Usage | null {
  if (!attempts.reachedUpstream || (status !== STATUS_CLIENT_CLOSED && status !== 504)) return null;
  return { inputTokens: estimateInput(), outputTokens: 0, estimated: true };
}

/**
 * A stream whose first chunk has been read. Until then nothing reached the client, so a failure there (Anthropic's
 * `overloaded_error` as the first event, a reset, an empty body) hands over to the next fallback model like a failure
 * before the response headers. The chunk is handed out again as the stream's first.
 */
async function withFirstRead<T>(chunks: AsyncIterable<T>): Promise<AsyncIterable<T>> {
  const rest = chunks[Symbol.asyncIterator]();
  return withFirst(await rest.next(), rest);
}

/** The highest prices among the models a call may be answered by: a fallback then never costs more than was reserved. */
function dearestPricing(candidates: ResolvedModel[]): { input: number; output: number } {
  let input = 0;
  let output = 0;
  for (const model of candidates) {
    const pricing = model.record.pricing ?? NO_PRICE;
    input = Math.max(input, pricing.inputPer1M);
    output = Math.max(output, pricing.outputPer1M);
  }
  return { input, output };
}

/** The client-facing error for a failed upstream call (interface section 7, OpenAI's error shape). */
function clientError(err: UpstreamError): AppError {
  switch (err.failure) {
    case 'http': {
      const status = err.status ?? 502;
      if (status >= 500) return ERRORS.upstreamFailed(`Upstream model failed with status ${status}: ${asText(err.body?.error.message)}`.trim());
      // Not the client's doing: a redirect Waygate does not follow, or the model's own key or account refused. Passed
      // through, a 401 or 403 would blame the caller's token, and the upstream's text can quote part of the key.
      if (status < 400) return ERRORS.upstreamFailed(`Upstream model answered with status ${status}, which Waygate does not follow`);
      // 499 is Waygate's own "the client went away": an upstream's (nginx's name for its own client leaving) is a
      // failed upstream, not this client's doing.
      if (status === STATUS_CLIENT_CLOSED) return ERRORS.upstreamFailed(`Upstream model answered with status ${status}`);
      if (status === 401 || status === 403 || status === 407) {
        return ERRORS.upstreamFailed(`Upstream model refused the credentials or account configured for it (status ${status}); check the model's provider apiKey`);
      }
      return ERRORS.upstreamRejected(status, err.body ?? { error: { message: err.message, type: 'upstream_error', code: null } }, err.retryAfterMs);
    }
    case 'timeout':
      return ERRORS.upstreamTimeout(err.message);
    case 'aborted':
      return ERRORS.clientClosed();
    default:
      return ERRORS.upstreamFailed(err.message);
  }
}

/** The status the client is answered for a failed call (as the error handler maps it), for its usage event. */
export function statusOf(err: unknown): number {
  if (err instanceof AppError) return err.statusCode;
  return err instanceof DependencyUnavailableError ? 503 : 500;
}

/**
 * The generator's frames, with `onUnread` run when it is closed before its first read: a generator that never
 * started skips its `finally`, where a stream is metered.
 */
function meteredEvenUnread<T>(generator: AsyncGenerator<T>, onUnread: () => Promise<void>): AsyncIterableIterator<T> {
  let started = false;
  const closing = async () => {
    if (started) return;
    started = true;
    await onUnread();
  };
  return {
    next: () => {
      started = true;
      return generator.next();
    },
    return: async (value?: unknown) => {
      await closing();
      return generator.return(value as T);
    },
    throw: async (err?: unknown) => {
      await closing();
      return generator.throw(err);
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

/**
 * Runs model calls: resolves the model, admits the call against budgets and rate limits, calls the provider
 * with fallbacks, and meters one usage event per call (failed and cut-off calls included).
 */
export class InferenceService {
  constructor(
    private readonly models: ModelService,
    private readonly providers: Record<ProviderType, Provider>,
    private readonly limits: LimitService,
    private readonly projects: ProjectService,
    private readonly usage: UsageService,
    private readonly guardrails: GuardrailService,
    private readonly evaluator: GuardrailEvaluator,
    private readonly log: Logger,
  ) {}

  /**
   * Model calls for guardrails that ask a model: metered under service `guardrails`, never guarded themselves (a
   * judge's guardrails would judge the judge). Unless `admit` is set, they are part of a call the caller's limits
   * already admitted, so they are not admitted again (an output judge would find the budget taken by its own call);
   * what they use is charged.
   */
  judge(caller: Caller, options: { admit: boolean } = { admit: false }): Judge {
    // Each judge call's latency runs from its own start, not from the request's.
    const judgeCaller = (): Caller => ({ ...caller, service: 'guardrails', startedAt: performance.now() });
    // `admit`: nothing admitted the caller yet (an agent's own guardrails run before its model call), so each judge
    // call is admitted on its own: a caller over its limits gets its 429 before any judge model is called.
    const charged = !options.admit;
    const callOptions = { signal: caller.signal, requestId: caller.requestId };
    return {
      chat: async (modelKey, body) => {
        const request = { ...body, model: modelKey };
        const call = {
          capability: 'chat' as const,
          service: 'guardrails',
          endpoint: '/chat/completions',
          estimateInput: lazy(() => estimateChatInput(request)),
          // A verdict without usage is counted, as any chat answer is: not billed as no output.
          estimateOutput: estimateChatOutput,
          desiredOutput: requestedMaxTokens(request) ?? DEFAULT_OUTPUT_RESERVE,
          charged,
        };
        return (await this.jsonCall(judgeCaller(), request, call, null, (provider, model, upstreamBody) => provider.chat(model.target, upstreamBody, callOptions))).body;
      },
      moderate: async (modelKey, input) => {
        const request = { model: modelKey, input };
        const call = { capability: 'moderation' as const, service: 'guardrails', endpoint: '/moderations', estimateInput: lazy(() => estimateEmbeddingInput(input)), desiredOutput: 0, charged };
        return (await this.jsonCall(judgeCaller(), request, call, null, (provider, model, upstreamBody) => provider.moderations(model.target, upstreamBody, callOptions))).body;
      },
    };
  }

  /**
   * A call made for the caller that no Waygate model answers (a connected agent): admitted against the caller's
   * budgets and rate limits like a model call, so a caller over them gets its 429 before anything is sent. Such a
   * call cannot be capped or priced: it reserves its input and up to DEFAULT_OUTPUT_RESERVE output tokens, and is
   * then charged the tokens it reports (settleUnpriced).
   */
  admitUnpriced(caller: Caller, estimateInput: () => number): Promise<Reservation> {
    return this.admit(caller, [], estimateInput, DEFAULT_OUTPUT_RESERVE);
  }

  /** Replaces an admitUnpriced reservation with the tokens the call used (none when it failed). */
  settleUnpriced(reservation: Reservation, usage: { inputTokens: number; outputTokens: number } | null): Promise<void> {
    return this.settle(reservation, null, usage);
  }

  private evaluationContext(caller: Caller, model: ResolvedModel, stage: 'input' | 'output'): EvaluationContext & { stage: 'input' | 'output' } {
    return { scope: caller.scope, requestId: caller.requestId, stage, model: model.record.key, judge: this.judge(caller) };
  }

  /** Input guardrails of the model over the request's texts: the body to send (redacted), or a guardrail_block error. */
  private async guardInput(caller: Caller, model: ResolvedModel, guardrails: GuardrailRecord[], body: JsonObject, slots: (body: JsonObject) => TextSlots): Promise<JsonObject> {
    if (guardrails.length === 0) return body;
    const texts = slots(body);
    return texts.write((await this.evaluator.enforce(this.evaluationContext(caller, model, 'input'), guardrails, texts.texts)).texts);
  }

  /** The model and its fallbacks that offer the capability, in the order to try them. */
  private async candidates(scope: ProjectScope, key: unknown, capability: Capability): Promise<ResolvedModel[]> {
    if (typeof key !== 'string' || key === '') throw ERRORS.validation('model is required');
    const primary = this.models.held(scope, key) ?? (await this.models.resolve(scope, key));
    if (!primary.record.capabilities.includes(capability)) {
      throw ERRORS.validation(`Model "${key}" does not offer ${capability} (it offers ${primary.record.capabilities.join(', ')})`);
    }
    const candidates = [primary];
    for (const fallbackKey of primary.record.fallbacks) {
      const fallback = this.models.held(scope, fallbackKey) ?? (await this.models.find(scope, fallbackKey));
      if (fallback && fallback.record.capabilities.includes(capability)) candidates.push(fallback);
    }
    return candidates;
  }

  /** Whose limits a call counts against: its token's, when it has any, and its project's (kept without limits too). */
  private subjects(caller: Caller, project: ProjectRecord | null): LimitSubject[] {
    const subjects: LimitSubject[] = [];
    if (caller.tokenId && (caller.budget || caller.rateLimit)) {
      // A token's limits never change after creation.
      subjects.push({ kind: 'token', scope: { ...caller.scope, tokenId: caller.tokenId }, version: 0, budget: caller.budget, rateLimit: caller.rateLimit });
    }
    if (project) subjects.push(projectSubject(caller.scope, project));
    return subjects;
  }

  /**
   * The reservation's subjects, with its project as it is now when the project's budget began counting anew since
   * admission (a PATCH): the same array when nothing changed.
   */
  private async subjectsNow(reservation: Reservation): Promise<LimitSubject[]> {
    const admitted = projectSubjectOf(reservation);
    if (!admitted) return reservation.subjects;
    const project = await this.projects.cached(admitted.scope.tenantId, admitted.scope.projectId);
    if (project?.limitsUpdatedAt === admitted.version) return reservation.subjects;
    const others = reservation.subjects.filter((subject) => subject !== admitted);
    return project ? [...others, projectSubject(admitted.scope, project)] : others;
  }

  /** The reservation's project is in memory with the limits it was admitted under (or it was admitted without one). */
  private heldUnchanged(reservation: Reservation): boolean {
    const admitted = projectSubjectOf(reservation);
    return !admitted || this.projects.held(admitted.scope.tenantId, admitted.scope.projectId)?.limitsUpdatedAt === admitted.version;
  }

  /** `choices`: a chat call's n, each of which needs at least one output token. */
  private async admit(caller: Caller, candidates: ResolvedModel[], estimateInput: () => number, desiredOutput: number, choices = 1): Promise<Reservation> {
    const { tenantId, projectId } = caller.scope;
    const subjects = this.subjects(caller, this.projects.held(tenantId, projectId) ?? (await this.projects.cached(tenantId, projectId)));
    // No estimate (token counting) without a limit that needs one.
    if (!hasLimits(subjects)) return unreserved(subjects);
    const pricing = dearestPricing(candidates);
    const estimate: Estimate = {
      inputTokens: estimateInput(),
      desiredOutput,
      minimumOutput: desiredOutput > 0 ? choices : 0,
      inputPricePerToken: pricing.input / 1e6,
      outputPricePerToken: pricing.output / 1e6,
    };
    return this.limits.admit(subjects, estimate);
  }

  /**
   * Tries each candidate in turn; a failure that is not the caller's fault hands over to the next one. `attempts`
   * records what the attempts did; their time is added to the caller's upstream time.
   */
  private async firstAnswer<T>(caller: Caller, candidates: ResolvedModel[], attempts: Attempts, call: (model: ResolvedModel) => Promise<T>): Promise<T> {
    const startedAt = performance.now();
    let last: unknown;
    try {
      for (const model of candidates) {
        if (model.unreadable) {
          last = ERRORS.unavailable(`Model "${model.record.key}" cannot be called: its stored provider credentials cannot be decrypted (the secret key changed); set provider.apiKey and provider.headers again with PATCH /api/models/${model.record.key}`);
          continue;
        }
        attempts.model = model;
        try {
          return await call(model);
        } catch (err) {
          last = err;
          if (err instanceof UpstreamError && err.reachedUpstream) attempts.reachedUpstream = true;
          const handOver = err instanceof UpstreamError && (err.retryable || err.failure === 'malformed');
          if (!handOver) break;
          this.log.warn({ model: model.record.key, failure: err.failure, status: err.status }, 'upstream call failed; trying the next fallback');
        }
      }
    } finally {
      attempts.ms = performance.now() - startedAt;
      caller.timing.upstreamMs += attempts.ms;
    }
    throw last instanceof UpstreamError ? clientError(last) : last;
  }

  private meter(caller: Caller, model: ResolvedModel, endpoint: string, service: string, usage: Usage | null, status: number, upstreamMs: number, streamed: boolean): void {
    const input = usage?.inputTokens ?? 0;
    const output = usage?.outputTokens ?? 0;
    this.usage.recordCall(caller, {
      model: model.record.key,
      provider: model.record.provider.type,
      service: caller.service ?? service,
      endpoint,
      inputTokens: input,
      outputTokens: output,
      cost: costOf(model.record.pricing, input, output),
      currency: model.record.pricing?.currency ?? 'USD',
      upstreamLatencyMs: upstreamMs,
      status,
      streamed,
    });
  }

  /**
   * Replaces the reservation with the real usage at the answering model's pricing (null: unpriced); `chargeTo`: a
   * call made without one (a judge's) adds its usage.
   */
  private async settle(reservation: Reservation | null, pricing: Pricing | null, usage: Pick<Usage, 'inputTokens' | 'outputTokens'> | null, chargeTo: Caller | null = null): Promise<void> {
    const input = usage?.inputTokens ?? 0;
    const output = usage?.outputTokens ?? 0;
    const amounts = { tokens: input + output, cost: costOf(pricing, input, output) };
    try {
      if (reservation) {
        // A call that reserved nothing (no limits) has nothing to settle, unless its project's limits changed while
        // it ran: the common call returns here without an await.
        if (reservation.counters.length === 0 && this.heldUnchanged(reservation)) return;
        await this.limits.settle(reservation, amounts, await this.subjectsNow(reservation));
      } else if (chargeTo) {
        await this.limits.charge(this.subjects(chargeTo, await this.projects.cached(chargeTo.scope.tenantId, chargeTo.scope.projectId)), amounts);
      }
    } catch (err) {
      this.log.error({ err }, 'settling a budget reservation failed; the estimate stays counted');
    }
  }

  /**
   * One non-streamed call of any JSON operation, metered and settled whatever happens. With `guarded`, the primary
   * model's guardrails run on the request before admission (a block makes no upstream call) and on the answer.
   */
  private async jsonCall(
    caller: Caller,
    body: JsonObject,
    options: {
      capability: Capability;
      service: string;
      endpoint: string;
      estimateInput: () => number;
      /** Output tokens of an answer whose upstream reported no usage (none when unset: embeddings, moderations). */
      estimateOutput?: (answer: JsonObject) => number;
      desiredOutput: number;
      choices?: number;
      charged?: boolean;
    },
    guarded: GuardedTexts | null,
    run: (provider: Provider, model: ResolvedModel, body: JsonObject) => Promise<JsonResult>,
  ): Promise<JsonAnswer> {
    const candidates = await this.candidates(caller.scope, body.model, options.capability);
    const primary = candidates[0]!;
    const guards = guarded && hasGuardrails(primary.record) ? await this.guardrails.forModel(caller.scope, primary.record) : NO_GUARDS;
    // Admission first: a caller over its limits gets its 429 before any guardrail (or judge model) runs.
    const reservation = options.charged ? null : await this.admit(caller, candidates, options.estimateInput, options.desiredOutput, options.choices);
    const attempts: Attempts = { model: primary, reachedUpstream: false, ms: 0 };
    let usage: Usage | null = null;
    let result: JsonResult;
    let answer: JsonObject;
    this.usage.expect();
    try {
      const sent = guarded && guards.input.length > 0 ? await this.guardInput(caller, primary, guards.input, body, guarded.input) : body;
      // Capped per candidate: the output limit's field name depends on the provider a fallback goes to.
      result = await this.firstAnswer(caller, candidates, attempts, (m) => run(this.providers[m.record.provider.type], m, capped(sent, reservation, m.target)));
      usage = result.usage ?? { inputTokens: options.estimateInput(), outputTokens: options.estimateOutput?.(result.body) ?? 0, estimated: true };
      answer = result.body;
      if (guarded?.output && guards.output.length > 0) {
        const texts = guarded.output(answer);
        answer = texts.write((await this.evaluator.enforce(this.evaluationContext(caller, primary, 'output'), guards.output, texts.texts)).texts);
      }
    } catch (err) {
      // An answer refused by an output guardrail was still made and is billed; so is the input of a call abandoned.
      const status = statusOf(err);
      usage ??= abandonedUsage(attempts, status, options.estimateInput);
      await this.settle(reservation, attempts.model.record.pricing, usage, options.charged ? caller : null);
      this.meter(caller, attempts.model, options.endpoint, options.service, usage, status, attempts.ms, false);
      throw err;
    }
    await this.settle(reservation, attempts.model.record.pricing, usage, options.charged ? caller : null);
    this.meter(caller, attempts.model, options.endpoint, options.service, usage, 200, attempts.ms, false);
    // The upstream's own bytes, unless a guardrail changed the answer.
    return { body: answer, raw: answer === result.body ? result.raw : undefined, usage };
  }

  // Token estimates are needed only under a limit or when an upstream reports no usage: computed on first use.
  chat(caller: Caller, body: JsonObject): Promise<JsonAnswer> {
    const estimateInput = lazy(() => estimateChatInput(body));
    const chatOutput = { desiredOutput: desiredChatOutput(body), choices: choiceCount(body) };
    return this.jsonCall(caller, body, { capability: 'chat', service: 'chat', endpoint: '/chat/completions', estimateInput, estimateOutput: estimateChatOutput, ...chatOutput }, CHAT_TEXTS, (provider, model, upstreamBody) =>
      provider.chat(model.target, upstreamBody, { signal: caller.signal, requestId: caller.requestId }),
    );
  }

  embeddings(caller: Caller, body: JsonObject): Promise<JsonAnswer> {
    const estimateInput = lazy(() => estimateEmbeddingInput(body.input));
    return this.jsonCall(caller, body, { capability: 'embeddings', service: 'embeddings', endpoint: '/embeddings', estimateInput, desiredOutput: 0 }, EMBEDDING_TEXTS, (provider, model, upstreamBody) =>
      provider.embeddings(model.target, upstreamBody, { signal: caller.signal, requestId: caller.requestId }),
    );
  }

  async moderations(caller: Caller, body: JsonObject): Promise<JsonAnswer> {
    // OpenAI's SDKs may leave `model` out (OpenAI then answers with its default model): the project's moderation model.
    const request = body.model === undefined ? { ...body, model: await this.defaultModerationModel(caller.scope) } : body;
    const estimateInput = lazy(() => estimateEmbeddingInput(request.input));
    return this.jsonCall(caller, request, { capability: 'moderation', service: 'moderations', endpoint: '/moderations', estimateInput, desiredOutput: 0 }, null, (provider, model, upstreamBody) =>
      provider.moderations(model.target, upstreamBody, { signal: caller.signal, requestId: caller.requestId }),
    );
  }

  /** The key of the project's one model with the moderation capability; 400 when it has none or several. */
  private async defaultModerationModel(scope: ProjectScope): Promise<string> {
    const keys = (await this.models.list(scope)).filter((model) => model.capabilities.includes('moderation')).map((model) => model.key);
    if (keys.length === 1) return keys[0]!;
    throw ERRORS.validation(
      keys.length === 0
        ? 'body.model is required: the project has no model with the moderation capability'
        : `body.model is required: the project has several moderation models (${keys.join(', ')})`,
    );
  }

  /**
   * A streamed chat call. Retries and fallbacks happen before the first byte; after it, a failure ends the stream
   * with an error event and `[DONE]`. Usage is taken from the upstream's usage chunk (always requested) or counted.
   */
  async chatStream(caller: Caller, body: JsonObject): Promise<AsyncIterableIterator<string>> {
    const candidates = await this.candidates(caller.scope, body.model, 'chat');
    const primary = candidates[0]!;
    const guards = hasGuardrails(primary.record) ? await this.guardrails.forModel(caller.scope, primary.record) : NO_GUARDS;
    const estimateInput = lazy(() => estimateChatInput(body));
    const reservation = await this.admit(caller, candidates, estimateInput, desiredChatOutput(body), choiceCount(body));
    const attempts: Attempts = { model: primary, reachedUpstream: false, ms: 0 };
    let chunks: AsyncIterable<ChatChunk>;
    this.usage.expect();
    try {
      const sent = await this.guardInput(caller, primary, guards.input, body, chatInputTexts);
      // Up to the first chunk: the upstream's time to its first token is upstream time, not Waygate's.
      chunks = await this.firstAnswer(caller, candidates, attempts, async (m) => {
        const upstream = await this.providers[m.record.provider.type].chatStream(m.target, capped(sent, reservation, m.target), { signal: caller.signal, requestId: caller.requestId });
        return withFirstRead(upstream);
      });
    } catch (err) {
      const status = statusOf(err);
      const usage = abandonedUsage(attempts, status, estimateInput);
      await this.settle(reservation, attempts.model.record.pricing, usage);
      this.meter(caller, attempts.model, '/chat/completions', 'chat', usage, status, attempts.ms, true);
      throw err;
    }
    const { model } = attempts;
    const includeUsage = (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
    let guard: ((chunks: AsyncIterable<ChatChunk>) => AsyncIterable<ChatChunk>) | undefined;
    if (guards.output.length > 0) {
      const context = this.evaluationContext(caller, primary, 'output');
      const mode: StreamGuardMode = guards.output.every((g) => g.action === 'flag') ? 'observe' : guards.output.some(usesJudge) ? 'whole' : 'window';
      const texts = (all: string[]) => all.map((text) => ({ text, trusted: false }));
      guard = (chunks) => guardStream(chunks, (all, final) => this.evaluator.enforce(context, guards.output, texts(all), final), mode);
    }
    const upstreamStartedAt = performance.now() - attempts.ms;
    const options = { reservation, estimateInput, includeUsage, upstreamStartedAt, guard };
    const frames = this.frames(caller, model, chunks, options);
    // Closed before its first read (the client left, or the reply failed, right after the stream was handed over):
    // the call is still settled and metered, as a cut-off stream with nothing sent, and its upstream request ends
    // (its first chunk was read, so the upstream's reader is under way and holds the connection).
    const closedUnread = async () => {
      await chunks[Symbol.asyncIterator]().return?.();
      await this.endStream(caller, model, options, { inputTokens: estimateInput(), outputTokens: 0, estimated: true }, STATUS_CLIENT_CLOSED);
    };
    return meteredEvenUnread(frames, closedUnread);
  }

  /** What every stream ends with, however it ends: the reservation settled and one usage event. */
  private async endStream(caller: Caller, model: ResolvedModel, options: { reservation: Reservation; upstreamStartedAt: number }, usage: Usage, status: number): Promise<void> {
    await this.settle(options.reservation, model.record.pricing, usage);
    this.meter(caller, model, '/chat/completions', 'chat', usage, status, performance.now() - options.upstreamStartedAt, true);
  }

  /**
   * The client's SSE frames. Usage and text are counted on the upstream's chunks, before output guardrails hold
   * anything back, so that a stream a guardrail stops is billed for what the upstream made.
   */
  private async *frames(
    caller: Caller,
    model: ResolvedModel,
    upstream: AsyncIterable<ChatChunk>,
    options: { reservation: Reservation; estimateInput: () => number; includeUsage: boolean; upstreamStartedAt: number; guard?: (chunks: AsyncIterable<ChatChunk>) => AsyncIterable<ChatChunk> },
  ): AsyncGenerator<string> {
    let usage: Usage | null = null;
    const written = new TokenCounter();
    let status = 200;
    let last: ChatChunk | null = null;
    let usageSent = false;
    /** Usage from a usage chunk (no choices): the first such is final, as it is the one the client is shown. */
    let usageFinal = false;
    const count = (chunk: ChatChunk) => {
      // Usage inside content chunks (vLLM's continuous usage) runs on: the latest stands until a usage chunk.
      const reported = chunk.data.usage && !usageFinal ? usageOf(chunk.data, true) : null;
      if (reported) {
        usage = reported;
        usageFinal = isUsageChunk(chunk.data);
      }
      const choices = chunk.data.choices as { delta?: unknown }[] | undefined;
      if (Array.isArray(choices)) for (const choice of choices) written.add(writtenText(choice?.delta));
    };
    const { guard } = options;
    const counted = async function* (): AsyncGenerator<ChatChunk> {
      for await (const chunk of upstream) {
        count(chunk);
        yield chunk;
      }
    };
    try {
      // Unguarded (most streams): the upstream's chunks are read directly, without a generator in between.
      for await (const chunk of guard ? guard(counted()) : upstream) {
        if (!guard) count(chunk);
        last = chunk;
        // The usage chunk is Waygate's request; the client sees one, only when it asked, and only in OpenAI's form
        // (otherwise Waygate sends its own count at the end).
        const usageChunk = isUsageChunk(chunk.data);
        if (usageChunk) {
          if (!options.includeUsage || usageSent || !usageOf(chunk.data, true)) continue;
          usageSent = true;
        }
        yield frameOf(chunk, usageChunk);
      }
      if (!usage) {
        usage = { inputTokens: options.estimateInput(), outputTokens: written.total, estimated: true };
        if (options.includeUsage) {
          const base = last?.data ?? {};
          const head = { id: base.id ?? `chatcmpl-${randomUUID()}`, object: 'chat.completion.chunk', created: base.created ?? unixSeconds(Date.now()), model: base.model ?? model.record.key };
          yield `data: ${JSON.stringify({ ...head, choices: [], usage: openAiUsage(usage) })}\n\n`;
        }
      }
      yield 'data: [DONE]\n\n';
    } catch (err) {
      if (caller.signal.aborted) {
        status = STATUS_CLIENT_CLOSED;
      } else if (err instanceof AppError) {
        // An output guardrail stopped the stream (what it held back is never sent), or its judge model failed: the
        // error a non-streamed call would get.
        status = err.statusCode;
        yield `data: ${JSON.stringify(err.errorBody())}\n\n`;
        yield 'data: [DONE]\n\n';
      } else {
        status = err instanceof UpstreamError ? 502 : 500;
        const error = err instanceof UpstreamError ? streamFailure(err) : { message: 'Internal server error', type: 'server_error', code: 'internal_error' };
        if (!(err instanceof UpstreamError)) this.log.error({ err }, 'stream failed');
        yield `data: ${JSON.stringify({ error })}\n\n`;
        yield 'data: [DONE]\n\n';
      }
    } finally {
      // Also reached when the client disconnects mid-stream (the generator is closed): what was streamed is billed.
      if (caller.signal.aborted && status === 200) status = STATUS_CLIENT_CLOSED;
      usage ??= { inputTokens: options.estimateInput(), outputTokens: written.total, estimated: true };
      await this.endStream(caller, model, options, usage, status);
    }
  }

  /** OpenAI's model list for the project. */
  async listModels(scope: ProjectScope) {
    const models = await this.models.list(scope);
    return { object: 'list' as const, data: models.map(openAiModel) };
  }

  /** One model of the project as OpenAI's model object (GET /models/{model}); 404 when there is none. */
  async getModel(scope: ProjectScope, key: string) {
    return openAiModel((await this.models.resolve(scope, key)).record);
  }
}
