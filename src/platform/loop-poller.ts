import diagnosticsChannel from 'node:diagnostics_channel';
import type { Server } from 'node:http';
import { performance } from 'node:perf_hooks';

/**
 * A gap this long between two polling ticks means other callbacks ran in between: the loop was busy, not idle.
 * A bare tick takes about 1 µs (7 µs at the 99.9th percentile) on the benchmark machine.
 */
const BUSY_GAP_MS = 0.02;

/** The smallest window is this fraction of the largest: sparse traffic still polls a little and can grow back. */
const MIN_WINDOW_SHARE = 1 / 8;

/** Undici publishes here when an upstream's response headers arrive (also for Waygate's own dispatch handler). */
const UPSTREAM_HEADERS_CHANNEL = 'undici:request:headers';

/**
 * Keeps the event loop polling for a short window after activity instead of letting it sleep in epoll. On a
 * virtual machine a sleeping vCPU takes tens of microseconds to wake when the next packet arrives, and a proxied
 * call waits twice (the client's request, the upstream's answer): about 0.1 ms of a call at concurrency 1
 * (bench/README). Polling is a chain of setImmediate callbacks, so libuv polls for I/O without a timeout between
 * them; I/O and timers run as usual.
 *
 * The window adapts as the kernel's haltpoll governor does. Each time polling has to start again, the loop slept
 * after the last activity. When it slept no longer than the largest window, a longer window would have caught the
 * event, so the window doubles. When it slept longer, polling was wasted, so the window halves (down to an eighth of
 * the largest). Traffic that leaves seconds between events, such as LLM calls, therefore costs an eighth of the
 * window per event, and back-to-back traffic keeps the whole window.
 */
export class LoopPoller {
  private readonly minWindowUs: number;
  private currentWindowUs: number;
  private polling = false;
  private stopped = false;
  private lastActivityMs = Number.NEGATIVE_INFINITY;
  private lastTickMs = 0;
  private startCount = 0;

  constructor(
    private readonly maxWindowUs: number,
    private readonly now: () => number = () => performance.now(),
    private readonly schedule: (tick: () => void) => void = (tick) => setImmediate(tick),
  ) {
    this.minWindowUs = maxWindowUs * MIN_WINDOW_SHARE;
    this.currentWindowUs = maxWindowUs;
  }

  /** How long polling goes on after the last activity, as adapted so far. */
  get windowUs(): number {
    return this.currentWindowUs;
  }

  /** How many times polling started (after a silence); for tests and diagnostics. */
  get starts(): number {
    return this.startCount;
  }

  get isPolling(): boolean {
    return this.polling;
  }

  /** Something arrived (a request, an upstream's answer): poll from now for the window. */
  readonly activity = (): void => {
    const now = this.now();
    if (!this.polling && !this.stopped) {
      this.adapt(now - this.lastActivityMs);
      this.polling = true;
      this.startCount++;
      this.lastTickMs = now;
      this.schedule(this.tick);
    }
    this.lastActivityMs = now;
  };

  stop(): void {
    this.stopped = true;
  }

  private adapt(sleptMs: number): void {
    const windowUs = this.currentWindowUs;
    this.currentWindowUs = sleptMs * 1000 <= this.maxWindowUs ? Math.min(this.maxWindowUs, windowUs * 2) : Math.max(this.minWindowUs, windowUs / 2);
  }

  private readonly tick = (): void => {
    const now = this.now();
    if (now - this.lastTickMs > BUSY_GAP_MS) this.lastActivityMs = now;
    this.lastTickMs = now;
    if (!this.stopped && (now - this.lastActivityMs) * 1000 < this.currentWindowUs) this.schedule(this.tick);
    else this.polling = false;
  };
}

/**
 * Polls after every request the server receives and every upstream answer's headers. Returns the poller and a
 * detach function for shutdown; a window of 0 attaches nothing.
 */
export function attachLoopPoller(server: Server, maxWindowUs: number): { poller: LoopPoller | null; detach: () => void } {
  if (maxWindowUs === 0) return { poller: null, detach: () => {} };
  const poller = new LoopPoller(maxWindowUs);
  server.on('request', poller.activity);
  diagnosticsChannel.subscribe(UPSTREAM_HEADERS_CHANNEL, poller.activity);
  return {
    poller,
    detach: () => {
      poller.stop();
      server.off('request', poller.activity);
      diagnosticsChannel.unsubscribe(UPSTREAM_HEADERS_CHANNEL, poller.activity);
    },
  };
}
