import { setImmediate as nextMacrotask } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { ProjectScope } from '../../http/principal.js';
import { BufferedWriter, WRITE_SLICE } from '../../platform/buffered-writer.js';
import { timeOrderedId } from '../../platform/ids.js';
import { settledWithin } from '../../platform/time.js';
import type { UsageEvent, UsageScope, UsageStore } from './store.js';

/** Who made a call and when it started: what every usage event takes from the request. */
export interface MeteredCaller {
  scope: ProjectScope;
  tokenId: string | null;
  userId: string | null;
  requestId: string;
  sessionId: string | null;
  /** performance.now() when the request arrived: the event's latency runs from it. */
  startedAt: number;
}

/** What a call itself adds to its usage event. */
export type CallUsage = Pick<
  UsageEvent,
  'model' | 'provider' | 'service' | 'endpoint' | 'inputTokens' | 'outputTokens' | 'cost' | 'currency' | 'upstreamLatencyMs' | 'status' | 'streamed'
>;

/** How long close() waits for calls under way to be metered: those of requests cut at shutdown end within ticks. */
const CLOSE_WAIT_MS = 5_000;

/** Usage metering: one event per model call, buffered and written in batches off the request path. */
export class UsageService {
  private readonly writer: BufferedWriter<UsageEvent>;
  /** Calls started (`expect`) whose event is not recorded yet, and who waits for there to be none. */
  private expected = 0;
  private whenNoneExpected: (() => void) | null = null;

  constructor(private readonly store: UsageStore, log: Logger) {
    this.writer = new BufferedWriter({
      name: 'usage',
      write: (batch) => store.insertMany(batch, () => this.letRequestsIn()),
      describe: (event) => ({ usageId: event.id, requestId: event.requestId }),
      log,
    });
  }

  /**
   * Between the statements of a write: other work runs first while the writer keeps up. The usage write blocking a
   * request for its whole length was the largest share of the concurrency-1 tail (0.7 ms every 50 requests). Once
   * a slice's worth of events has arrived meanwhile (a loaded server) the write goes straight through: yielding on
   * every statement would let it fall behind, and the buffer grow.
   */
  private letRequestsIn(): Promise<void> | undefined {
    return this.writer.pending < WRITE_SLICE ? nextMacrotask() : undefined;
  }

  record(event: UsageEvent): void {
    this.writer.push(event);
  }

  /**
   * A model call has started and will end in exactly one recordCall, whatever happens. Shutdown waits for these: a
   * call cut at the deadline is metered as its handler unwinds, after the server has closed.
   */
  expect(): void {
    this.expected++;
  }

  /** One model call, ending now, of the caller's request. */
  recordCall(caller: MeteredCaller, call: CallUsage): void {
    const now = Date.now();
    this.record({
      id: timeOrderedId('use', now),
      tenantId: caller.scope.tenantId,
      projectId: caller.scope.projectId,
      tokenId: caller.tokenId,
      userId: caller.userId,
      // Field by field rather than spread: every event then has one shape, made without a property copy at run time.
      model: call.model,
      provider: call.provider,
      service: call.service,
      endpoint: call.endpoint,
      inputTokens: call.inputTokens,
      outputTokens: call.outputTokens,
      cost: call.cost,
      currency: call.currency,
      upstreamLatencyMs: call.upstreamLatencyMs,
      status: call.status,
      streamed: call.streamed,
      latencyMs: performance.now() - caller.startedAt,
      requestId: caller.requestId,
      sessionId: caller.sessionId,
      createdAt: now,
    });
    if (this.expected > 0 && --this.expected === 0) this.whenNoneExpected?.();
  }

  /** Events waiting to be written. */
  get pending(): number {
    return this.writer.pending;
  }

  flush(): Promise<void> {
    return this.writer.flush();
  }

  /**
   * Stored tokens and cost since a moment (hour-aligned): what a budget counter starts from (after a restart, at a
   * new period, when limits change). This instance's buffered events are written first, so that they count.
   */
  async totalsSince(scope: UsageScope, since: number): Promise<{ tokens: number; cost: number }> {
    await this.writer.flush();
    return this.store.totalsSince(scope, since);
  }

  /**
   * Waits (a bounded time) for the calls under way to be metered: calls cut at shutdown end within ticks, and what
   * they record (usage, guardrail evaluations, audit events) must reach the writers before those close.
   */
  async callsEnded(): Promise<void> {
    if (this.expected > 0) await settledWithin(new Promise<void>((resolve) => (this.whenNoneExpected = resolve)), CLOSE_WAIT_MS);
  }

  /** Writes everything buffered (after callsEnded). */
  close(): Promise<void> {
    return this.writer.close();
  }
}
