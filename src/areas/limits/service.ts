import { ERRORS, type AppError } from '../../http/errors.js';
import type { CounterChange, CounterReservation, Counters } from '../../platform/counters.js';
import { ExpiringMap } from '../../platform/expiring-map.js';
import type { UsageService } from '../usage/service.js';
import type { UsageScope } from '../usage/store.js';
import { DAY_MS, utcDay } from '../../platform/time.js';

/** A spending cap over a period (UTC days and months). */
export interface Budget {
  maxTokens?: number;
  maxCostUsd?: number;
  period: 'day' | 'month' | 'total';
}

/** Requests and tokens per minute. */
export interface RateLimit {
  rpm?: number;
  tpm?: number;
}

/** The rules the schemas cannot say: a budget caps something, a rate limit limits something. */
export function checkLimits(budget: Budget | null | undefined, rateLimit: RateLimit | null | undefined): void {
  if (budget && budget.maxTokens === undefined && budget.maxCostUsd === undefined) {
    throw ERRORS.validation('budget needs maxTokens or maxCostUsd (or both) besides period');
  }
  if (rateLimit && rateLimit.rpm === undefined && rateLimit.tpm === undefined) {
    throw ERRORS.validation('rateLimit needs rpm or tpm (or both)');
  }
}

/** Someone whose limits apply to a call: the calling token, and its project. */
export interface LimitSubject {
  kind: 'token' | 'project';
  scope: UsageScope;
  /** Changes when a budget begins counting something anew, so its counters start again from stored usage. */
  version: number;
  budget: Budget | null;
  rateLimit: RateLimit | null;
}

/** Costs are counted in nano-dollars so that counters stay integers (in Redis too). */
export const NANO = 1e9;

/** What a call is expected to take: its input, how much output it would like, and the prices per token. */
export interface Estimate {
  inputTokens: number;
  /** Output tokens wanted (the request's max_tokens, or a default); 0 for embeddings and moderation. */
  desiredOutput: number;
  /** Fewest output tokens worth calling for. */
  minimumOutput: number;
  inputPricePerToken: number;
  outputPricePerToken: number;
}

export interface Amounts {
  tokens: number;
  /** Cost in dollars. */
  cost: number;
}

type CounterKind = 'requests' | 'tokens' | 'cost';

interface PlannedCounter extends CounterReservation {
  kind: CounterKind;
  /** Why a refusal happened, for the error message. */
  describe: string;
  /** Milliseconds until this counter's window or period ends; null for a total budget. */
  retryAfterMs: number | null;
  /** Budget counters: where the stored usage to seed them from starts. */
  since: number;
  /** Budget counters: when the counter's period ends (a day, a month, or one day of a total budget's counters). */
  periodEnd: number | null;
  subject: LimitSubject;
}

/** What a subject's rate-limit window or budget period gives each of its counters. */
type CounterTerms = Pick<PlannedCounter, 'subject' | 'seeded' | 'since' | 'periodEnd' | 'ttlMs' | 'retryAfterMs'>;

/**
 * One planned counter, made in one literal. Spreading the shared terms and adding the counter's own fields gave each
 * object a shape of its own (V8 map migrations on every call), which cost more instructions than the rest of a
 * limited call (bench/README, "instructions").
 */
function plannedCounter(terms: CounterTerms, own: Pick<PlannedCounter, 'key' | 'kind' | 'base' | 'perUnit' | 'limit' | 'describe'>): PlannedCounter {
  return {
    key: own.key,
    kind: own.kind,
    base: own.base,
    perUnit: own.perUnit,
    limit: own.limit,
    // A call's request is counted when it is admitted, whatever it then does: settle and charge leave request
    // windows alone, so they need no generation.
    settles: own.kind !== 'requests',
    describe: own.describe,
    subject: terms.subject,
    seeded: terms.seeded,
    since: terms.since,
    periodEnd: terms.periodEnd,
    ttlMs: terms.ttlMs,
    retryAfterMs: terms.retryAfterMs,
  };
}

/**
 * Admission of a call no limit applies to: nothing reserved, but its subjects kept, so that a budget set on its
 * project while it runs counts what it used (settle).
 */
export function unreserved(subjects: LimitSubject[]): Reservation {
  return { counters: [], subjects, allowance: 0, capped: false };
}

/** What admission reserved, to be settled with the real amounts. */
export interface Reservation {
  /** `generation`: the counter's when reserved on ('' for a request window); one started again since never held `amount`. */
  counters: { key: string; kind: CounterKind; amount: number; periodEnd: number | null; generation: string }[];
  /** Whose limits it was reserved against: settlement finds their counters of its own moment from them. */
  subjects: LimitSubject[];
  /** Output tokens the call may use. */
  allowance: number;
  /** True when a token or cost limit set the allowance: the upstream call must then be capped at it. */
  capped: boolean;
}

const MINUTE_MS = 60_000;
/** The estimate of a call that adds nothing: for planning which counters a moment has. */
const NOTHING_MORE: Estimate = { inputTokens: 0, desiredOutput: 0, minimumOutput: 0, inputPricePerToken: 0, outputPricePerToken: 0 };
/**
 * How long one counter of a total budget lasts: the next is started from stored usage at its first use, as a new
 * period's is, so that the counters of deleted tokens and of a project's earlier budget versions do not stay forever.
 * Calls running across the change are settled into the new counter, as across a period's end.
 */
const TOTAL_COUNTER_MS = DAY_MS;
/** A client may ask for any max_tokens; counters (Redis scripts compute in doubles) take no more than this. */
const MAX_ALLOWANCE = 2 ** 50;

/**
 * What a call used, in a counter's units. Capped at the largest exact integer, which is past every limit: a cost of
 * 10^12 USD (10^21 nano-dollars) would reach Redis as "1e+21", which INCRBY refuses, and the whole settle would fail.
 */
function counted(kind: CounterKind, actual: Amounts): number {
  return Math.min(Number.MAX_SAFE_INTEGER, unitsOf(kind, actual));
}

/** Tokens, or a cost in nano-dollars: a budget counter's units. */
function unitsOf(kind: CounterKind, amounts: Amounts): number {
  return kind === 'tokens' ? amounts.tokens : Math.ceil(amounts.cost * NANO);
}

/** Whether any of the subjects has a budget or a rate limit. */
export function hasLimits(subjects: LimitSubject[]): boolean {
  return subjects.some((subject) => subject.budget || subject.rateLimit);
}

/**
 * A reserved counter's change: its reservation replaced by what the call used, or, when the counter was started
 * again meanwhile (a Redis that lost it, say, and a new seed from stored usage), only what the call used.
 */
function settlement(counter: Reservation['counters'][number], used: number): CounterChange {
  return { key: counter.key, amount: used - counter.amount, generation: counter.generation, otherwise: used };
}

function periodBounds(period: Budget['period'], now: number): { start: number; end: number | null } {
  const date = new Date(now);
  if (period === 'day') {
    const start = utcDay(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate());
    return { start, end: start + DAY_MS };
  }
  if (period === 'month') {
    return { start: utcDay(date.getUTCFullYear(), date.getUTCMonth(), 1), end: utcDay(date.getUTCFullYear(), date.getUTCMonth() + 1, 1) };
  }
  return { start: 0, end: null };
}

/** Whom a rate-limit window counts. A project PATCH does not start a new window: the minute is the minute. */
function subjectId(subject: LimitSubject): string {
  return subject.kind === 'token' ? `t:${subject.scope.tokenId}` : `p:${subject.scope.projectId}`;
}

/** Whom a budget counter counts: a project's budget counters start again (from stored usage) with each version. */
function budgetSubjectId(subject: LimitSubject): string {
  return subject.kind === 'token' ? subjectId(subject) : `${subjectId(subject)}:${subject.version}`;
}

/**
 * Budgets and rate limits. Admission reserves on every counter at once (all or nothing): the input estimate plus
 * the largest output allowance every token and cost limit still has room for, and the upstream call is capped at
 * that allowance. Settlement replaces the reservation with the real amounts. So concurrent calls never pass a
 * limit together, except by what the input estimate falls short of the upstream's count. Budget counters start
 * from stored usage after a restart.
 */
export class LimitService {
  /**
   * Stored spending by budget subject (for the period it was read for), for a second: refusals of a used-up budget
   * share one query. A settled call changes it, so settling forgets the subject's reading.
   */
  private readonly recentSpending = new ExpiringMap<{ since: number; reading: Promise<{ tokens: number; cost: number }> }>();

  constructor(private readonly counters: Counters, private readonly usage: UsageService) {}

  private plan(subjects: LimitSubject[], estimate: Estimate, now: number): PlannedCounter[] {
    const planned: PlannedCounter[] = [];
    const minute = Math.floor(now / MINUTE_MS) * MINUTE_MS;
    const windowLeft = minute + MINUTE_MS - now;
    const costBase = Math.ceil(estimate.inputTokens * estimate.inputPricePerToken * NANO);
    const costPerUnit = Math.ceil(estimate.outputPricePerToken * NANO);
    for (const subject of subjects) {
      const id = subjectId(subject);
      const window: CounterTerms = { subject, seeded: false, since: 0, periodEnd: null, ttlMs: windowLeft + 1_000, retryAfterMs: windowLeft };
      const { rpm, tpm } = subject.rateLimit ?? {};
      if (rpm !== undefined) {
        planned.push(plannedCounter(window, { key: `rl:${id}:rpm:${minute}`, kind: 'requests', base: 1, perUnit: 0, limit: rpm, describe: `rate limit of ${rpm} requests per minute` }));
      }
      if (tpm !== undefined) {
        planned.push(plannedCounter(window, { key: `rl:${id}:tpm:${minute}`, kind: 'tokens', base: estimate.inputTokens, perUnit: 1, limit: tpm, describe: `rate limit of ${tpm} tokens per minute` }));
      }
      const budget = subject.budget;
      if (!budget) continue;
      const { start, end } = periodBounds(budget.period, now);
      // A total budget never ends, but its counter does, each UTC day: the next one starts from stored usage.
      const counterStart = end === null ? Math.floor(now / TOTAL_COUNTER_MS) * TOTAL_COUNTER_MS : start;
      const counterEnd = end ?? counterStart + TOTAL_COUNTER_MS;
      const period: CounterTerms = { subject, seeded: true, since: start, periodEnd: counterEnd, ttlMs: counterEnd - now + MINUTE_MS, retryAfterMs: end === null ? null : end - now };
      const name = budget.period === 'total' ? 'total' : budget.period === 'day' ? 'daily' : 'monthly';
      const budgetId = budgetSubjectId(subject);
      if (budget.maxTokens !== undefined) {
        planned.push(plannedCounter(period, { key: `bg:${budgetId}:${budget.period}:${counterStart}:tokens`, kind: 'tokens', base: estimate.inputTokens, perUnit: 1, limit: budget.maxTokens, describe: `${name} budget of ${budget.maxTokens} tokens` }));
      }
      if (budget.maxCostUsd !== undefined) {
        planned.push(plannedCounter(period, { key: `bg:${budgetId}:${budget.period}:${counterStart}:cost`, kind: 'cost', base: costBase, perUnit: costPerUnit, limit: Math.floor(budget.maxCostUsd * NANO), describe: `${name} budget of ${budget.maxCostUsd} USD` }));
      }
    }
    return planned;
  }

  /** Reserves against every limit of the subjects, or throws 429 without reserving anything. */
  async admit(subjects: LimitSubject[], estimate: Estimate): Promise<Reservation> {
    const planned = this.plan(subjects, estimate, Date.now());
    if (planned.length === 0) return unreserved(subjects);
    // Each attempt that finds an unseeded counter seeds it, so every budget counter may need one attempt of its own
    // (a token and a project budget on tokens and cost: four, after a restart or at a new period).
    const attempts = planned.filter((c) => c.seeded).length + 1;
    for (let attempt = 0; attempt < attempts; attempt++) {
      const outcome = await this.counters.reserve(planned, { desired: Math.min(estimate.desiredOutput, MAX_ALLOWANCE), minimum: estimate.minimumOutput });
      if (outcome.ok) {
        return {
          counters: planned.map(({ key, kind, base, perUnit, periodEnd }, i) => ({
            key,
            kind,
            amount: base + perUnit * outcome.allowance,
            periodEnd,
            generation: outcome.generations[i]!,
          })),
          subjects,
          allowance: outcome.allowance,
          // Only calls with output (chat) are capped; embeddings and moderation have no max_tokens to set.
          capped: estimate.desiredOutput > 0 && planned.some((c) => c.perUnit > 0),
        };
      }
      const counter = planned[outcome.index]!;
      if (outcome.reason === 'limit') throw await this.refusal(counter, estimate.minimumOutput);
      await this.seed(counter);
    }
    throw new Error('Budget counters could not be seeded');
  }

  /**
   * Replaces the reservation with what the call really used (zero for a failed call). `current`: the subjects as
   * they are now, when a project's budget began counting anew while the call ran (its counters started again from
   * stored usage, which does not have this call yet). What it used goes to the budget counters of the moment it
   * ended: those of the current version, and of the new period for a call admitted in one budget period that ends in
   * the next (its usage event is stamped when it ends). Counters it no longer belongs to only give back their share.
   */
  async settle(reservation: Reservation, actual: Amounts, current: LimitSubject[] = reservation.subjects): Promise<void> {
    // Nothing reserved and nobody's limits changed: the common call without limits.
    if (reservation.counters.length === 0 && current === reservation.subjects) return;
    const now = Date.now();
    const used = (kind: CounterKind) => counted(kind, actual);
    const spent = reservation.counters.filter((c) => c.kind !== 'requests');
    const moved = current !== reservation.subjects || spent.some((c) => c.periodEnd !== null && now >= c.periodEnd);
    if (!moved) {
      if (spent.length > 0) await this.counters.adjust(spent.map((c) => settlement(c, used(c.kind))));
      this.forgetSpending(reservation.subjects);
      return;
    }
    // Rate-limit windows stay the minute the call was admitted in; only budget counters follow the call.
    const budgetsNow = new Map(
      this.plan(current, NOTHING_MORE, now)
        .filter((c) => c.seeded)
        .map((c) => [c.key, c.kind]),
    );
    const changes: CounterChange[] = spent.map((c) => {
      const stays = !c.key.startsWith('bg:') || budgetsNow.delete(c.key);
      return stays ? settlement(c, used(c.kind)) : { key: c.key, amount: -c.amount, generation: c.generation };
    });
    // Budget counters the call did not reserve on: it counts there only by what it used.
    for (const [key, kind] of budgetsNow) changes.push({ key, amount: used(kind) });
    await this.counters.adjust(changes);
    this.forgetSpending(current);
  }

  /**
   * Adds what a call used to the token and cost counters of the subjects without admitting it first: a guardrail's
   * judge, part of a call that was admitted. Counters not started yet are seeded from stored usage later, which has it.
   */
  async charge(subjects: LimitSubject[], actual: Amounts): Promise<void> {
    if (!hasLimits(subjects)) return;
    const changes = this.plan(subjects, NOTHING_MORE, Date.now())
      .filter((c) => c.kind !== 'requests')
      .map((c) => ({ key: c.key, amount: counted(c.kind, actual) }));
    await this.counters.adjust(changes);
    this.forgetSpending(subjects);
  }

  private async seed(counter: PlannedCounter): Promise<void> {
    await this.counters.seed(counter.key, await this.spent(counter), counter.ttlMs);
  }

  /** What a budget counter's subject has spent in its period, by stored usage (in the counter's units). */
  private async spent(counter: PlannedCounter): Promise<number> {
    return unitsOf(counter.kind, await this.usage.totalsSince(counter.subject.scope, counter.since));
  }

  /**
   * A budget counter's stored spending, read at most once a second per subject and period (its token and its cost
   * counter share the read): a client hammering a used-up budget costs one query a second, not one a request.
   */
  private async recentlySpent(counter: PlannedCounter): Promise<number> {
    const key = budgetSubjectId(counter.subject);
    const cached = this.recentSpending.get(key)?.value;
    let read = cached?.since === counter.since ? cached.reading : undefined;
    if (!read) {
      const reading = this.usage.totalsSince(counter.subject.scope, counter.since);
      this.recentSpending.set(key, { since: counter.since, reading }, Date.now() + 1_000);
      reading.catch(() => this.recentSpending.delete(key));
      read = reading;
    }
    return unitsOf(counter.kind, await read);
  }

  /**
   * Drops the cached stored spending of subjects a call was just settled on: a refusal read while it ran, kept, would
   * still call a budget that call used up "taken by calls in progress". (The call's usage event is recorded right
   * after its settlement, before any later refusal reads.)
   */
  private forgetSpending(subjects: LimitSubject[]): void {
    for (const subject of subjects) if (subject.budget) this.recentSpending.delete(budgetSubjectId(subject));
  }

  /**
   * The 429 for a counter with no room. A budget counter holds what was spent and what running calls reserved: when
   * the spent part leaves room for this call, the budget is only taken by calls in progress, which give back what
   * they do not use within moments, so the caller is told to retry shortly rather than at the end of the period.
   */
  private async refusal(counter: PlannedCounter, minimumOutput: number): Promise<AppError> {
    const who = counter.subject.kind === 'token' ? "This token's" : "This project's";
    const retryAfter = counter.retryAfterMs === null ? null : Math.max(1, Math.ceil(counter.retryAfterMs / 1000));
    const needed = counter.base + counter.perUnit * minimumOutput;
    if (needed > counter.limit) {
      const amount = counter.kind === 'cost' ? `${(needed / NANO).toLocaleString('en-US', { maximumFractionDigits: 9 })} USD` : `${needed} ${counter.kind}`;
      const message = `${who} ${counter.describe} is smaller than this call needs (at least ${amount}): it can never be admitted`;
      return ERRORS.neverAdmitted(message, counter.seeded ? 'budget_exceeded' : 'rate_limit_exceeded');
    }
    if (!counter.seeded) return ERRORS.rateLimited(`${who} ${counter.describe} is reached; retry later`, retryAfter!);
    if ((await this.recentlySpent(counter)) + needed > counter.limit) {
      return ERRORS.budgetExceeded(`${who} ${counter.describe} is used up`, retryAfter);
    }
    return ERRORS.budgetInUse(`${who} ${counter.describe} is taken by the reservations of calls in progress; retry shortly`);
  }
}
