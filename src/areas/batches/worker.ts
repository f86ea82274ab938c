import { setMaxListeners } from 'node:events';
import os from 'node:os';
import type { Logger } from 'pino';
import { AppError, UpstreamRejection } from '../../http/errors.js';
import type { ProjectScope } from '../../http/principal.js';
import type { Bus } from '../../platform/bus.js';
import { DependencyUnavailableError, isConnectionFailure } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import { settledWithin } from '../../platform/time.js';
import type { JsonObject } from '../../providers/types.js';
import type { Caller, InferenceService, JsonAnswer } from '../inference/service.js';
import type { Budget, RateLimit } from '../limits/service.js';
import type { TokenService } from '../tokens/service.js';
import { OutcomeWriter } from './outcomes.js';
import type { BatchChange, BatchService } from './service.js';
import type { BatchStore, ClaimedItem } from './store.js';

/** Bus topic of BatchChange messages (JSON). */
export const BATCH_CHANGES_TOPIC = 'batches.changes';

export interface WorkerSettings {
  /** Items run at once on this instance, across every batch. */
  concurrency: number;
  /** A claimed item stays this worker's for this long without a heartbeat. */
  leaseMs: number;
  /** Wait before attempt 2 after a transient failure; attempt 3 waits five times as long. */
  retryDelayMs: number;
}

/** Attempts of one item: transient upstream failures and interrupted runs are retried up to this many times in all. */
export const MAX_ATTEMPTS = 3;
/** How often the worker looks for new batches, expired leases and finished batches without being woken. */
const POLL_MS = 1_000;
/** A token revoked while its batch runs stops the batch's items within this long. */
const BATCH_CONTEXT_TTL_MS = 10_000;
/** On stop, running items get this long to finish before they are aborted and handed back. */
const STOP_GRACE_MS = 10_000;
/** While Redis or the database is unreachable, a batch's items wait this long between tries, attempts not spent. */
const OUTAGE_WAIT_MS = 5_000;

/** What every item of a batch runs with: its project, endpoint and the submitting token's limits. */
interface BatchContext {
  scope: ProjectScope;
  endpoint: string;
  tokenId: string | null;
  userId: string | null;
  budget: Budget | null;
  rateLimit: RateLimit | null;
  /** Why items may no longer run (the token was revoked or has expired), or null. */
  refusal: string | null;
}

/**
 * A provider answer as one JSONL-safe line. JSON text holds line breaks only as white space between tokens (inside
 * strings they are escaped), so each becomes a space: no parsing, and the upstream's bytes otherwise kept.
 */
function oneLine(answer: JsonAnswer): string {
  const text = answer.raw ?? JSON.stringify(answer.body);
  return text.includes('\n') || text.includes('\r') ? text.replace(/[\r\n]/g, ' ') : text;
}

/** Failures worth another attempt: the upstream was down, slow or overloaded, or something unexpected happened. */
function transient(err: unknown): boolean {
  if (err instanceof UpstreamRejection) return err.statusCode === 429;
  if (err instanceof AppError) return err.statusCode === 502 || err.statusCode === 503 || err.statusCode === 504;
  return true;
}

/**
 * Waygate's own rpm/tpm limit, or a budget whose rest running calls (this batch's, often) have reserved: the item
 * waits, as told. An upstream's 429 may carry the same code, and is a transient failure instead; an item larger than
 * the whole limit (a final refusal) would wait for ever, and fails.
 */
function ownRateLimit(err: unknown): err is AppError {
  return (
    err instanceof AppError &&
    !(err instanceof UpstreamRejection) &&
    (err.code === 'rate_limit_exceeded' || err.code === 'budget_in_use') &&
    !err.final
  );
}

/** Redis or the database could not be reached: nothing is wrong with the item. */
function outage(err: unknown): boolean {
  return err instanceof DependencyUnavailableError || isConnectionFailure(err);
}

/** One item of each list in turn, so that the items of every batch claimed together take turns. */
function interleave<T>(lists: T[][]): T[] {
  const out: T[] = [];
  const longest = Math.max(0, ...lists.map((list) => list.length));
  for (let i = 0; i < longest; i++) for (const list of lists) if (i < list.length) out.push(list[i]!);
  return out;
}

/**
 * Runs batch items (interface 3.1, 3.2). Claims pending items with leases, round robin across the batches in progress
 * (a huge batch never starves a small one), up to one claim ahead of its `concurrency` slots so that a freed slot
 * starts its next item without a database round trip. Runs each item through the inference core as a non-streaming
 * call on the submitting token's budget, records outcomes in group commits, and has finished batches finalized. Any
 * number of instances can run one: an item is held by one worker at a time, and an outcome only counts while its
 * worker still holds the item.
 */
export class BatchWorker {
  readonly id = newId('wrk');
  /** Claimed and not yet recorded or handed back: the items whose leases the heartbeat renews. */
  private readonly held = new Set<string>();
  /** Claimed ahead, waiting for a slot. */
  private ready: ClaimedItem[] = [];
  /** Items in a slot: calling the model, or being handed back. */
  private running = 0;
  /** Batches in progress that may have claimable items, in round-robin order. */
  private active: string[] = [];
  private cursor = 0;
  /** Batches that met their token's or project's rate limit: no claims until then. */
  private readonly pausedUntil = new Map<string, number>();
  private readonly contexts = new Map<string, { context: Promise<BatchContext>; until: number }>();
  private dispatching = false;
  private ticking = false;
  private tickAgain = false;
  private stopping = false;
  private readonly abort = new AbortController();
  private readonly idleWaiters: (() => void)[] = [];
  private timers: NodeJS.Timeout[] = [];
  /** Ticks, claims and finalizations under way: stop() waits for them before the database closes. */
  private readonly background = new Set<Promise<void>>();
  private readonly outcomes: OutcomeWriter;

  constructor(
    private readonly store: BatchStore,
    private readonly batches: BatchService,
    private readonly inference: InferenceService,
    private readonly tokens: TokenService,
    private readonly bus: Bus,
    private readonly settings: WorkerSettings,
    private readonly log: Logger,
  ) {
    const recorded = (ids: string[]) => {
      this.letGo(ids);
      this.fillSlots();
    };
    this.outcomes = new OutcomeWriter(store, this.id, { recorded, finished: (ids) => ids.forEach((id) => this.finalizeInBackground(id)) }, log);
    // Every call in flight listens to this one signal.
    setMaxListeners(settings.concurrency + 16, this.abort.signal);
  }

  async start(): Promise<void> {
    const now = Date.now();
    await this.store.registerWorker({ id: this.id, hostname: os.hostname(), pid: process.pid, concurrency: this.settings.concurrency, now, staleBefore: now - 100 * this.settings.leaseMs });
    await this.bus.subscribe(BATCH_CHANGES_TOPIC, (message) => this.changed(message));
    const poll = setInterval(() => this.wake(), POLL_MS);
    const heartbeat = setInterval(() => void this.heartbeat(), Math.max(250, Math.floor(this.settings.leaseMs / 3)));
    this.timers = [poll, heartbeat];
    for (const timer of this.timers) timer.unref();
    this.wake();
  }

  /**
   * A batch was created or cancelled somewhere. Items of a cancelled batch claimed ahead here must not start: they go
   * back at once (the next tick drains them with the rest), rather than whenever the tick comes.
   */
  private changed(message: string): void {
    let change: BatchChange | null = null;
    try {
      change = JSON.parse(message) as BatchChange;
    } catch {
      // Only a wake-up, then: the tick finds out what changed.
    }
    if (change?.kind === 'cancelled') {
      const waiting = this.ready.filter((item) => item.batchId === change.batchId);
      this.track(this.handBack(waiting, 0, true).catch((err: unknown) => this.log.warn({ err }, 'batch worker: handing back items of a cancelled batch failed; the next tick retries')));
    }
    this.wake();
  }

  /** Looks for work now: new batches, cancelled ones, expired leases, finished batches. */
  wake(): void {
    if (this.stopping) return;
    if (this.ticking) {
      this.tickAgain = true;
      return;
    }
    this.track(this.tick());
  }

  private track(work: Promise<void>): void {
    this.background.add(work);
    void work.finally(() => this.background.delete(work));
  }

  private async tick(): Promise<void> {
    this.ticking = true;
    try {
      do {
        this.tickAgain = false;
        const cancelling = await this.store.cancellingIds();
        // Items claimed ahead for a batch that has since been cancelled never start: back, to be drained with the rest.
        await this.handBack(this.ready.filter((item) => cancelling.includes(item.batchId)), 0, true);
        for (const batchId of cancelling) await this.store.drain(batchId);
        for (const batchId of await this.store.finalizable(Date.now())) this.finalizeInBackground(batchId);
        if (this.stopping) return;
        this.active = await this.store.inProgressIds();
        this.forgetStale();
        await this.reclaimExpired();
        this.dispatch();
      } while (this.tickAgain && !this.stopping);
    } catch (err) {
      this.log.warn({ err }, 'batch worker: looking for work failed; trying again shortly');
    } finally {
      this.ticking = false;
    }
  }

  private async heartbeat(): Promise<void> {
    const now = Date.now();
    try {
      // Only items still in hand: one lost track of (a failed hand-back) runs out and is taken over.
      await this.store.extendLeases(this.id, [...this.held], now + this.settings.leaseMs);
      await this.store.heartbeatWorker(this.id, now);
    } catch (err) {
      this.log.warn({ err }, 'batch worker: heartbeat failed; leases run out unless the next one succeeds');
    }
  }

  /** Cached batch look-ups and rate-limit pauses that have run out (their batch may be finished elsewhere). */
  private forgetStale(): void {
    const now = Date.now();
    for (const [batchId, cached] of this.contexts) if (cached.until <= now) this.contexts.delete(batchId);
    for (const [batchId, until] of this.pausedUntil) if (until <= now) this.pausedUntil.delete(batchId);
  }

  /**
   * Slots in use: items running, and items whose outcome is not yet written. When the database is slow (or refuses a
   * write) the worker then does not go on calling upstreams and spending budgets for results it cannot record.
   */
  private get slotsTaken(): number {
    return this.running + this.outcomes.pending;
  }

  /** How many more items to hold: one waiting for each slot. */
  private get wanted(): number {
    return 2 * this.settings.concurrency - this.slotsTaken - this.ready.length;
  }

  private claimed(items: ClaimedItem[]): void {
    for (const item of items) this.held.add(item.id);
    this.ready.push(...items);
  }

  private letGo(ids: string[]): void {
    for (const id of ids) this.held.delete(id);
  }

  /** Items whose worker died: run again here (an item interrupted too often fails instead). */
  private async reclaimExpired(): Promise<void> {
    if (this.wanted <= 0) return;
    const now = Date.now();
    const items = await this.store.claimExpired(this.id, this.wanted, now, now + this.settings.leaseMs, [...this.held]);
    if (items.length === 0) return;
    this.log.info({ items: items.length }, 'batch worker: took over items whose lease expired');
    this.claimed(items);
    this.fillSlots();
  }

  /** A claim pass, unless one is running: that one reads the active list and the wanted count afresh until done. */
  private dispatch(): void {
    if (this.dispatching || this.stopping) return;
    this.dispatching = true;
    this.track(
      this.claimFairly()
        .catch((err: unknown) => this.log.warn({ err }, 'batch worker: claiming items failed; trying again shortly'))
        .finally(() => {
          this.dispatching = false;
        }),
    );
  }

  /** What is wanted, shared out across the batches in progress, a batch at a time from a rotating start. */
  private async claimFairly(): Promise<void> {
    for (;;) {
      const now = Date.now();
      const batches = this.active.filter((id) => (this.pausedUntil.get(id) ?? 0) <= now);
      if (this.stopping || batches.length === 0 || this.wanted <= 0) return;
      let remaining = this.wanted;
      const share = Math.ceil(remaining / batches.length);
      const first = this.cursor++ % batches.length;
      const claims: ClaimedItem[][] = [];
      for (let i = 0; i < batches.length && remaining > 0 && !this.stopping; i++) {
        const batchId = batches[(first + i) % batches.length]!;
        const claimedAt = Date.now();
        const items = await this.store.claimPending(batchId, this.id, Math.min(share, remaining), claimedAt, claimedAt + this.settings.leaseMs);
        // Nothing left to claim now: the next tick looks again (retries become due, new batches arrive).
        if (items.length === 0) this.active = this.active.filter((id) => id !== batchId);
        remaining -= items.length;
        claims.push(items);
      }
      this.claimed(interleave(claims));
      this.fillSlots();
    }
  }

  /** Starts waiting items in free slots, and claims more once fewer than half a round of slots' worth wait. */
  private fillSlots(): void {
    while (!this.stopping && this.slotsTaken < this.settings.concurrency && this.ready.length > 0) this.runInBackground(this.ready.shift()!);
    if (this.ready.length < Math.ceil(this.settings.concurrency / 2)) this.dispatch();
  }

  private runInBackground(item: ClaimedItem): void {
    this.running++;
    void this.run(item)
      .catch((err: unknown) => {
        this.log.error({ err, itemId: item.id }, 'batch worker: running an item failed; its lease will run out and it runs again');
        this.letGo([item.id]);
      })
      .finally(() => {
        this.running--;
        if (this.running === 0) this.idleWaiters.splice(0).forEach((resolve) => resolve());
        this.fillSlots();
      });
  }

  /** Runs one item; returns once its outcome is queued for the next group commit (the slot is then free) or it is handed back. */
  private async run(item: ClaimedItem): Promise<void> {
    const startedAt = Date.now();
    let batch: BatchContext;
    try {
      batch = await this.contextOf(item);
    } catch (err) {
      return this.failed(item, err, startedAt);
    }
    if (item.attempts > MAX_ATTEMPTS) {
      return this.recordFailure(item, startedAt, 500, `The item was attempted ${MAX_ATTEMPTS} times, and its worker stopped during the last attempt`);
    }
    if (batch.refusal) return this.recordFailure(item, startedAt, 401, batch.refusal);
    const caller: Caller = {
      scope: batch.scope,
      tokenId: batch.tokenId,
      userId: batch.userId,
      budget: batch.budget,
      rateLimit: batch.rateLimit,
      requestId: `batch_req_${item.id}`,
      sessionId: null,
      signal: this.abort.signal,
      startedAt: performance.now(),
      timing: { upstreamMs: 0 },
      service: 'batches',
    };
    let answer: JsonAnswer;
    try {
      const body = JSON.parse(item.requestBody) as JsonObject;
      answer = batch.endpoint === '/v1/embeddings' ? await this.inference.embeddings(caller, body) : await this.inference.chat(caller, body);
    } catch (err) {
      return this.failed(item, err, startedAt);
    }
    this.outcomes.push({
      id: item.id,
      batchId: item.batchId,
      status: 'succeeded',
      statusCode: 200,
      responseBody: oneLine(answer),
      errorMessage: null,
      usage: { inputTokens: answer.usage.inputTokens, outputTokens: answer.usage.outputTokens },
      startedAt,
      endedAt: Date.now(),
    });
  }

  /** A failed call: handed back (stopping, rate limit), retried later (transient), or recorded as failed. */
  private async failed(item: ClaimedItem, err: unknown, startedAt: number): Promise<void> {
    if (this.abort.signal.aborted) return this.handBack([item], 0, true);
    if (outage(err)) {
      this.log.warn({ itemId: item.id, err }, 'batch item could not run: a dependency is unreachable; waiting');
      this.pausedUntil.set(item.batchId, Date.now() + OUTAGE_WAIT_MS);
      return this.handBack([item], Date.now() + OUTAGE_WAIT_MS, true);
    }
    if (ownRateLimit(err)) {
      // The token's or project's rpm/tpm: not the item's fault. The batch waits as told, without spending an attempt.
      const until = Date.now() + Number(err.headers['retry-after'] ?? 1) * 1000;
      this.pausedUntil.set(item.batchId, until);
      return this.handBack([item, ...this.ready.filter((waiting) => waiting.batchId === item.batchId)], until, true);
    }
    if (transient(err) && item.attempts < MAX_ATTEMPTS) {
      this.log.warn({ itemId: item.id, attempt: item.attempts, err: err instanceof AppError ? err.message : err }, 'batch item failed; retrying later');
      return this.handBack([item], Date.now() + this.settings.retryDelayMs * 5 ** (item.attempts - 1), false);
    }
    if (!(err instanceof AppError)) this.log.error({ err, itemId: item.id }, 'batch item failed unexpectedly');
    const statusCode = err instanceof AppError ? err.statusCode : 500;
    const message = err instanceof AppError ? err.message : 'Internal error while running the item';
    this.recordFailure(item, startedAt, statusCode, message);
  }

  /** Items back to pending from `runAfter` on; `refund`: the attempt does not count (they did not get to run, or were cut off). */
  private async handBack(items: ClaimedItem[], runAfter: number, refund: boolean): Promise<void> {
    if (items.length === 0) return;
    const ids = new Set(items.map((item) => item.id));
    this.ready = this.ready.filter((waiting) => !ids.has(waiting.id));
    try {
      await this.store.release(this.id, [...ids], runAfter, refund);
    } finally {
      // Handed back or not, they are no longer this worker's: if the release failed, their leases run out.
      this.letGo([...ids]);
    }
    if (runAfter > Date.now()) this.wakeAt(runAfter);
  }

  /** A look for work when a wait ends, not only at the next poll. */
  private wakeAt(when: number): void {
    setTimeout(() => this.wake(), Math.max(0, when - Date.now()) + 1).unref();
  }

  private recordFailure(item: ClaimedItem, startedAt: number, statusCode: number, message: string): void {
    this.outcomes.push({ id: item.id, batchId: item.batchId, status: 'failed', statusCode, responseBody: null, errorMessage: message, usage: null, startedAt, endedAt: Date.now() });
  }

  /**
   * The batch and its token, looked up once per batch (items starting together share the look-up) and again every
   * few seconds, so that a revoked token stops its batch.
   */
  private contextOf(item: ClaimedItem): Promise<BatchContext> {
    const cached = this.contexts.get(item.batchId);
    if (cached && cached.until > Date.now()) return cached.context;
    const context = this.loadContext(item);
    this.contexts.set(item.batchId, { context, until: Date.now() + BATCH_CONTEXT_TTL_MS });
    context.catch(() => this.contexts.delete(item.batchId));
    return context;
  }

  private async loadContext(item: ClaimedItem): Promise<BatchContext> {
    const scope = { tenantId: item.tenantId, projectId: item.projectId };
    const batch = await this.batches.get(scope, item.batchId);
    const token = batch.tokenId ? await this.tokens.find(scope.tenantId, batch.tokenId) : null;
    let refusal: string | null = null;
    if (batch.tokenId && (!token || token.revokedAt !== null)) refusal = 'The API token that submitted this batch has been revoked';
    else if (token?.expiresAt != null && token.expiresAt <= Date.now()) refusal = 'The API token that submitted this batch has expired';
    return { scope, endpoint: batch.endpoint, tokenId: batch.tokenId, userId: batch.userId, budget: token?.budget ?? null, rateLimit: token?.rateLimit ?? null, refusal };
  }

  private finalizeInBackground(batchId: string): void {
    // Once stopping, the database may close any moment: a tick here or elsewhere finalizes it.
    if (this.stopping) return;
    this.contexts.delete(batchId);
    this.pausedUntil.delete(batchId);
    this.track(
      this.batches.finalize(batchId, this.id, this.settings.leaseMs).catch((err: unknown) => this.log.error({ err, batchId }, 'batch worker: finalizing failed; a later tick retries')),
    );
  }

  /**
   * Stops claiming and hands back what never started; gives running items a grace period, then aborts the rest and
   * hands them back as pending (their attempt not counted), so another instance or the next start runs them at once.
   */
  async stop(graceMs = STOP_GRACE_MS): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    const [poll, heartbeat] = this.timers;
    clearInterval(poll);
    await Promise.all(this.background);
    await this.handBack(this.ready, 0, true).catch((err: unknown) => this.log.warn({ err }, 'batch worker: could not hand back waiting items; their leases run out'));
    if (!(await this.idleWithin(graceMs))) {
      this.abort.abort();
      await this.idleWithin(graceMs);
    }
    await this.outcomes.stop();
    // The heartbeat kept the leases of what was still running or being recorded until now.
    clearInterval(heartbeat);
    await this.store.removeWorker(this.id).catch((err: unknown) => this.log.warn({ err }, 'batch worker: could not deregister'));
  }

  private async idleWithin(ms: number): Promise<boolean> {
    if (this.running === 0) return true;
    return settledWithin(new Promise<void>((resolve) => this.idleWaiters.push(resolve)), ms);
  }
}
