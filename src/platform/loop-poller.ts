import diagnosticsChannel from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';

/**
 * A gap this long between two polling ticks means other callbacks ran in between: the loop was busy, and the window
 * starts again from the end of that work, as a reactor polls for its idle time after its last task. The process being
 * preempted (or the VM's CPU stolen) for that long looks the same and extends the window too, for at most
 * MAX_EXTENSION_MS. A bare tick takes about 1 µs (7 µs at the 99.9th percentile) on the benchmark
 * machine.
 */
const BUSY_GAP_MS = 0.02;

/**
 * Gaps extend polling for at most this long after the last signal on ACTIVITY_CHANNELS. Some VMs stall a vCPU for
 * about 40 µs every 0.6 ms or so (the benchmark's Firecracker VM, bench/README), which looks like work:
 * without a limit a window longer than the time between two stalls would never end, and the process would spin at
 * idle after its last request.
 */
const MAX_EXTENSION_MS = 10;

/** The smallest window is this fraction of the largest: sparse traffic still polls a little and can grow back. */
const MIN_WINDOW_SHARE = 1 / 8;

/**
 * The moments after which more traffic is likely soon: Node publishes the first two for every HTTP server of the
 * process, undici the third when an upstream's response headers arrive (also for Waygate's own dispatch handler).
 */
const ACTIVITY_CHANNELS = ['http.server.request.start', 'http.server.response.finish', 'undici:request:headers'];

/**
 * Keeps the event loop polling for a short window after activity instead of letting it sleep in epoll, as
 * Seastar's reactor does (`--idle-poll-time-us`, 200 µs by default). Activity is what ACTIVITY_CHANNELS report, and
 * any work the loop starts while polling within MAX_EXTENSION_MS of the last report (a gap between two ticks): the
 * window runs from the end of the work, so the time a request takes to handle does not eat into the wait for its
 * upstream's answer. A saturated loop keeps polling while reports keep coming, which costs it one immediate per turn
 * of the loop. On a virtual machine a sleeping vCPU takes tens
 * of microseconds to wake when the next packet arrives, and a proxied call can wait three times (the client's
 * request, the upstream's answer, the client's next request): about 0.1 ms of a call at concurrency 1 against an
 * upstream that answers within the window (bench/README). Polling is a chain of setImmediate callbacks, so libuv
 * polls for I/O without a timeout between them; I/O and timers run as usual.
 *
 * The window adapts as the kernel's haltpoll governor does. When polling has to start again, the time since the last
 * activity (the poll and the sleep after it) says whether a longer poll would have caught this event: if that time
 * was no longer than the largest window, the window doubles (up to it); if longer, polling was wasted and the window
 * halves (down to an eighth of the largest). Traffic with seconds between events, such as LLM calls, therefore costs
 * an eighth of the window per activity, and back-to-back traffic keeps the whole window.
 */
export class LoopPoller {
  private readonly minWindowUs: number;
  private currentWindowUs: number;
  private polling = false;
  private stopped = false;
  private lastActivityMs: number | null = null;
  private lastSignalMs = -Infinity;
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

  /** How many times polling started (after a sleep); for tests and diagnostics. */
  get starts(): number {
    return this.startCount;
  }

  get isPolling(): boolean {
    return this.polling;
  }

  /** Something happened (a request, an answer sent or received): poll from now (and from any work after) for the window. */
  readonly activity = (): void => {
    const now = this.now();
    const start = !this.polling && !this.stopped;
    if (start && this.lastActivityMs !== null) this.adapt((now - this.lastActivityMs) * 1000);
    this.lastActivityMs = now;
    this.lastSignalMs = now;
    if (start) {
      this.polling = true;
      this.startCount++;
      this.lastTickMs = now;
      this.schedule(this.tick);
    }
  };

  stop(): void {
    this.stopped = true;
  }

  private adapt(idleUs: number): void {
    const windowUs = this.currentWindowUs;
    this.currentWindowUs = idleUs <= this.maxWindowUs ? Math.min(this.maxWindowUs, windowUs * 2) : Math.max(this.minWindowUs, windowUs / 2);
  }

  private readonly tick = (): void => {
    const now = this.now();
    // Work counts if it began within MAX_EXTENSION_MS of the last report, however long it ran.
    if (now - this.lastTickMs > BUSY_GAP_MS && this.lastTickMs - this.lastSignalMs < MAX_EXTENSION_MS) this.lastActivityMs = now;
    this.lastTickMs = now;
    if (!this.stopped && (now - this.lastActivityMs!) * 1000 < this.currentWindowUs) this.schedule(this.tick);
    else this.polling = false;
  };
}

/**
 * Starts polling after the process's HTTP traffic (see ACTIVITY_CHANNELS; one server per process in production).
 * Returns the poller and a function that stops it for shutdown; a window of 0 starts nothing.
 */
export function startLoopPoller(maxWindowUs: number): { poller: LoopPoller | null; stop: () => void } {
  if (maxWindowUs === 0) return { poller: null, stop: () => {} };
  const poller = new LoopPoller(maxWindowUs);
  for (const channel of ACTIVITY_CHANNELS) diagnosticsChannel.subscribe(channel, poller.activity);
  return {
    poller,
    stop: () => {
      poller.stop();
      for (const channel of ACTIVITY_CHANNELS) diagnosticsChannel.unsubscribe(channel, poller.activity);
    },
  };
}
