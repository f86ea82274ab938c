import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { AppError, UpstreamRejection } from '../../http/errors.js';
import type { ProjectScope } from '../../http/principal.js';
import type { Bus } from '../../platform/bus.js';
import { DependencyUnavailableError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { JsonObject } from '../../providers/types.js';
import type { FileService } from '../files/service.js';
import type { Caller, InferenceService, JsonAnswer } from '../inference/service.js';
import type { Budget, RateLimit } from '../limits/service.js';
import type { TokenService } from '../tokens/service.js';
import type { BatchService } from './service.js';
import type { BatchStore, ClaimedItem, ItemOutcome } from './store.js';

export const BATCH_WORK_TOPIC = 'batches.work';

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
const COMMIT_GROUP = 500;
const COMMIT_RETRY_MS = 1_000;

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

interface QueuedOutcome {
  outcome: ItemOutcome;
  done: () => void;
}

/** A provider answer as one JSONL-safe line: JSON text has newlines only between tokens, so they can go. */
function oneLine(answer: JsonAnswer): string {
  const text = answer.raw ?? JSON.stringify(answer.body);
  return text.includes('\n') || text.includes('\r') ? JSON.stringify(JSON.parse(text)) : text;
}

/** Failures worth another attempt: the upstream or a dependency was down, slow or overloaded. */
function transient(err: unknown): boolean {
  if (err instanceof UpstreamRejection) return err.statusCode === 429;
  if (err instanceof AppError) return err.statusCode === 502 || err.statusCode === 503 || err.statusCode === 504;
  return true;
}

/**
 * Runs batch items (interface 3.1, 3.2): claims pending items with leases, fairly across batches (round robin, so a
 * huge batch never starves a small one), runs each through the inference core as a non-streaming call on the
 * submitting token's budget, records the outcomes in group commits, and finalizes batches whose items are all done.
 * Any number of instances can run one: an item is held by one worker at a time, and an outcome only counts while its
 * worker still holds the item.
 */
export class BatchWorker {
  readonly id = newId('wrk');
  /** Items this worker holds (claimed, not yet recorded or handed back): the only ones its heartbeat renews. */
  private readonly held = new Set<string>();
  /** Batches in progress that may have claimable items, in round-robin order. */
  private active: string[] = [];
  private cursor = 0;
  /** Batches that met their token's or project's rate limit: no claims until then. */
  private readonly pausedUntil = new Map<string, number>();
  private readonly contexts = new Map<string, { context: Promise<BatchContext>; until: number }>();
  private dispatching = false;
  private ticking = false;
  private tickAgain = false;
  private outcomes: QueuedOutcome[] = [];
  private committing = false;
  private stopping = false;
  private readonly abort = new AbortController();
  private readonly idleWaiters: (() => void)[] = [];
  private timers: NodeJS.Timeout[] = [];
  /** Ticks, claims and finalizations under way: stop() waits for them before the database closes. */
  private readonly background = new Set<Promise<void>>();

  constructor(
    private readonly store: BatchStore,
    private readonly batches: BatchService,
    private readonly inference: InferenceService,
    private readonly files: FileService,
    private readonly tokens: TokenService,
    private readonly bus: Bus,
    private readonly settings: WorkerSettings,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    const now = Date.now();
    await this.store.registerWorker({ id: this.id, hostname: os.hostname(), pid: process.pid, concurrency: this.settings.concurrency, now, staleBefore: now - 100 * this.settings.leaseMs });
    await this.bus.subscribe(BATCH_WORK_TOPIC, () => this.wake());
    const poll = setInterval(() => this.wake(), POLL_MS);
    const heartbeat = setInterval(() => void this.heartbeat(), Math.max(250, Math.floor(this.settings.leaseMs / 3)));
    this.timers = [poll, heartbeat];
    for (const timer of this.timers) timer.unref();
    this.wake();
  }

  /** Looks for work now: new batches, expired leases, finished batches. */
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
        await this.store.drainCancelling();
        for (const batchId of await this.store.finalizable(Date.now())) this.finalizeInBackground(batchId);
        this.active = await this.store.inProgressIds();
        if (this.stopping) return;
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

  private get free(): number {
    return this.settings.concurrency - this.held.size;
  }

  /** Items whose worker died: run again here (an item interrupted too often fails instead). */
  private async reclaimExpired(): Promise<void> {
    if (this.free <= 0) return;
    const now = Date.now();
    const items = await this.store.claimExpired(this.id, this.free, now, now + this.settings.leaseMs, [...this.held]);
    if (items.length > 0) this.log.info({ items: items.length }, 'batch worker: took over items whose lease expired');
    for (const item of items) this.runInBackground(item);
  }

  /** A claim pass, unless one is running: that one reads the active list and the free slots afresh until done. */
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

  /** Free slots shared out across the batches in progress, a batch at a time from a rotating start. */
  private async claimFairly(): Promise<void> {
    for (;;) {
      const now = Date.now();
      const batches = this.active.filter((id) => (this.pausedUntil.get(id) ?? 0) <= now);
      if (this.stopping || batches.length === 0 || this.free <= 0) return;
      const share = Math.ceil(this.free / batches.length);
      const first = this.cursor++ % batches.length;
      for (let i = 0; i < batches.length && this.free > 0 && !this.stopping; i++) {
        const batchId = batches[(first + i) % batches.length]!;
        const claimedAt = Date.now();
        const items = await this.store.claimPending(batchId, this.id, Math.min(share, this.free), claimedAt, claimedAt + this.settings.leaseMs);
        // Nothing left to claim now: the next tick looks again (retries become due, new batches arrive).
        if (items.length === 0) this.active = this.active.filter((id) => id !== batchId);
        for (const item of items) this.runInBackground(item);
      }
    }
  }

  private runInBackground(item: ClaimedItem): void {
    this.held.add(item.id);
    void this.run(item)
      .catch((err: unknown) => this.log.error({ err, itemId: item.id }, 'batch worker: running an item failed; its lease will run out and it runs again'))
      .finally(() => {
        this.held.delete(item.id);
        if (this.held.size === 0) this.idleWaiters.splice(0).forEach((resolve) => resolve());
        // Claims are made for several free slots at once, not one query per finished item.
        if (this.free >= Math.max(1, Math.floor(this.settings.concurrency / 8)) || this.held.size === 0) this.dispatch();
      });
  }

  private async run(item: ClaimedItem): Promise<void> {
    let batch: BatchContext;
    try {
      batch = await this.contextOf(item);
    } catch (err) {
      return this.failed(item, err);
    }
    if (item.attempts > MAX_ATTEMPTS) {
      return this.record(item, { statusCode: 500, message: `The item was interrupted ${MAX_ATTEMPTS} times (its worker stopped while running it)` });
    }
    if (batch.refusal) return this.record(item, { statusCode: 401, message: batch.refusal });
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
      service: 'batches',
    };
    let answer: JsonAnswer;
    try {
      const body = JSON.parse(item.requestBody) as JsonObject;
      answer = batch.endpoint === '/v1/embeddings' ? await this.inference.embeddings(caller, body) : await this.inference.chat(caller, body);
    } catch (err) {
      return this.failed(item, err);
    }
    const usage = { inputTokens: answer.usage.inputTokens, outputTokens: answer.usage.outputTokens };
    await this.commit({ id: item.id, batchId: item.batchId, status: 'succeeded', statusCode: 200, responseBody: oneLine(answer), errorMessage: null, usage, endedAt: Date.now() });
  }

  /** A failed call: handed back (stopping, rate limit), retried later (transient), or recorded as failed. */
  private async failed(item: ClaimedItem, err: unknown): Promise<void> {
    if (this.abort.signal.aborted) return this.store.release(this.id, [item.id], 0, true);
    if (err instanceof AppError && err.code === 'rate_limit_exceeded') {
      // The token's or project's rpm/tpm: not the item's fault. Wait as told, without spending an attempt.
      const waitMs = Number(err.headers['retry-after'] ?? 1) * 1000;
      this.pausedUntil.set(item.batchId, Date.now() + waitMs);
      return this.retryLater(item, waitMs, true);
    }
    if (transient(err) && item.attempts < MAX_ATTEMPTS) {
      this.log.warn({ itemId: item.id, attempt: item.attempts, err: err instanceof AppError ? err.message : err }, 'batch item failed; retrying later');
      return this.retryLater(item, this.settings.retryDelayMs * 5 ** (item.attempts - 1), false);
    }
    if (!(err instanceof AppError) && !(err instanceof DependencyUnavailableError)) this.log.error({ err, itemId: item.id }, 'batch item failed unexpectedly');
    const statusCode = err instanceof AppError ? err.statusCode : err instanceof DependencyUnavailableError ? 503 : 500;
    const message = err instanceof AppError || err instanceof DependencyUnavailableError ? err.message : 'Internal error while running the item';
    await this.record(item, { statusCode, message });
  }

  /** Back to pending until `waitMs` from now, and a look for work then (not only at the next poll). */
  private async retryLater(item: ClaimedItem, waitMs: number, refund: boolean): Promise<void> {
    await this.store.release(this.id, [item.id], Date.now() + waitMs, refund);
    setTimeout(() => this.wake(), waitMs + 1).unref();
  }

  private record(item: ClaimedItem, failure: { statusCode: number; message: string }): Promise<void> {
    return this.commit({
      id: item.id,
      batchId: item.batchId,
      status: 'failed',
      statusCode: failure.statusCode,
      responseBody: null,
      errorMessage: failure.message,
      usage: null,
      endedAt: Date.now(),
    });
  }

  /** Resolves once the outcome is stored. Outcomes that arrive while a commit runs go together in the next one. */
  private commit(outcome: ItemOutcome): Promise<void> {
    return new Promise((done) => {
      this.outcomes.push({ outcome, done });
      if (!this.committing) void this.commitQueued();
    });
  }

  private async commitQueued(): Promise<void> {
    this.committing = true;
    try {
      while (this.outcomes.length > 0) {
        const group = this.outcomes.slice(0, COMMIT_GROUP);
        let finished: string[];
        try {
          finished = await this.store.complete(this.id, group.map((q) => q.outcome));
        } catch (err) {
          // Kept and tried again: the items stay this worker's while its heartbeat holds their leases.
          this.log.error({ err, items: group.length }, 'batch worker: recording item outcomes failed; retrying');
          if (this.abort.signal.aborted) {
            this.outcomes.splice(0).forEach((q) => q.done());
            return;
          }
          await sleep(COMMIT_RETRY_MS);
          continue;
        }
        this.outcomes.splice(0, group.length);
        group.forEach((q) => q.done());
        for (const batchId of finished) this.finalizeInBackground(batchId);
      }
    } finally {
      this.committing = false;
    }
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
    const now = Date.now();
    let refusal: string | null = null;
    if (batch.tokenId && (!token || token.revokedAt !== null)) refusal = 'The API token that submitted this batch has been revoked';
    else if (token?.expiresAt !== null && token?.expiresAt !== undefined && token.expiresAt <= now) refusal = 'The API token that submitted this batch has expired';
    return { scope, endpoint: batch.endpoint, tokenId: batch.tokenId, userId: batch.userId, budget: token?.budget ?? null, rateLimit: token?.rateLimit ?? null, refusal };
  }

  private finalizeInBackground(batchId: string): void {
    this.track(this.finalize(batchId).catch((err: unknown) => this.log.error({ err, batchId }, 'batch worker: finalizing failed; a later tick retries')));
  }

  /**
   * Interface 3.1's automatic finalization, by whichever worker claims it: a cancelling batch becomes cancelled; a
   * batch in progress writes its results to the output bucket (if one was named) and becomes completed, or failed
   * when they cannot be written. A worker that dies halfway is replaced once its finalizer lease runs out.
   */
  private async finalize(batchId: string): Promise<void> {
    const now = Date.now();
    const batch = await this.store.claimFinalization(batchId, this.id, now, now + this.settings.leaseMs);
    if (!batch) return;
    this.contexts.delete(batchId);
    this.pausedUntil.delete(batchId);
    if (batch.status === 'cancelling') {
      await this.store.finish(batchId, this.id, { status: 'cancelled', at: Date.now() });
      return;
    }
    if (!batch.outputBucketKey) {
      await this.store.finish(batchId, this.id, { status: 'completed', at: Date.now() });
      return;
    }
    const objectKey = `${batch.id}_output.jsonl`;
    try {
      const lines = this.batches.resultLines(batch.id, ['succeeded', 'failed']);
      await this.files.putObject({ tenantId: batch.tenantId, projectId: batch.projectId }, batch.outputBucketKey, objectKey, {
        contentType: 'application/jsonl',
        declaredLength: undefined,
        body: (async function* () {
          for await (const text of lines) yield Buffer.from(text);
        })(),
        maxBytes: Number.MAX_SAFE_INTEGER,
      });
    } catch (err) {
      // The bucket is gone or refuses the object: a batch-level failure; the results stay readable through the API.
      if (!(err instanceof AppError)) throw err;
      await this.store.finish(batchId, this.id, { status: 'failed', errorMessage: `The results could not be written to bucket "${batch.outputBucketKey}": ${err.message}`, at: Date.now() });
      return;
    }
    await this.store.finish(batchId, this.id, { status: 'completed', outputObjectKey: objectKey, at: Date.now() });
  }

  /**
   * Stops claiming, gives running items a grace period, then aborts the rest and hands them back as pending (their
   * attempt not counted), so another instance or the next start runs them at once.
   */
  async stop(graceMs = STOP_GRACE_MS): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    for (const timer of this.timers) clearInterval(timer);
    await Promise.all(this.background);
    if (!(await this.idleWithin(graceMs))) {
      this.abort.abort();
      await this.idleWithin(graceMs);
    }
    await this.store.removeWorker(this.id).catch((err: unknown) => this.log.warn({ err }, 'batch worker: could not deregister'));
  }

  private async idleWithin(ms: number): Promise<boolean> {
    if (this.held.size === 0) return true;
    const idle = new Promise<boolean>((resolve) => this.idleWaiters.push(() => resolve(true)));
    const timer = sleep(ms, false, { ref: false });
    return Promise.race([idle, timer]);
  }
}
