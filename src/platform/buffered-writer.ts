import { setImmediate as nextMacrotask, setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';

export interface BufferedWriterOptions<T> {
  /** What is buffered, for log lines ("audit", "usage"). */
  name: string;
  /** Writes a batch; throws when it could not. */
  write(batch: T[]): Promise<void>;
  /** Resolves when the database answers: tells an outage apart from a refused row. */
  ping(): Promise<unknown>;
  /** What to log about an item that was dropped. */
  describe(item: T): Record<string, unknown>;
  log: Logger;
}

const FLUSH_INTERVAL_MS = 1_000;
/** When the database is unreachable the buffer keeps at most this many items, dropping the oldest. */
const MAX_BUFFERED = 100_000;
/**
 * Items per write (one transaction). With SQLite a statement blocks the event loop (about 6 µs an item), so a
 * backlog is written in slices with other work let in between; the usage store also yields between the statements
 * of one write.
 */
export const WRITE_SLICE = 50;
/**
 * A full slice is written at once rather than gathering several: items then leave memory while they are young, so
 * V8's young-generation collections do not copy a growing buffer (which made every collection slower under load).
 */
const FLUSH_AT = WRITE_SLICE;
/** After a failed flush, only the timer retries until this pause has passed. */
const RETRY_PAUSE_MS = 1_000;
/** How long close() goes on retrying an unreachable database (a failover during a deploy) before it gives up. */
const CLOSE_RETRY_MS = 10_000;

/**
 * Writes off the request path: `push` only appends to memory; a timer (and a full buffer) flushes in batches,
 * and `close` flushes what is left on shutdown. Used for audit and usage events.
 */
export class BufferedWriter<T> {
  private buffer: T[] = [];
  private flushing: Promise<void> | null = null;
  private retryAt = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly options: BufferedWriterOptions<T>) {
    this.timer = setInterval(() => void this.flush(), FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  push(item: T): void {
    this.buffer.push(item);
    if (this.buffer.length > MAX_BUFFERED) this.buffer.splice(0, this.buffer.length - MAX_BUFFERED);
    // One flush at a time: while one runs, pushes only buffer (it starts the next when it ends), so a slow database
    // does not gather a waiting flush call per pushed item.
    if (!this.flushing) this.flushIfFull();
  }

  private flushIfFull(): void {
    if (this.buffer.length >= FLUSH_AT && Date.now() >= this.retryAt) void this.flush();
  }

  get pending(): number {
    return this.buffer.length;
  }

  /** Writes everything buffered so far; concurrent callers share one write. */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.buffer.length === 0) return;
    const batch = this.buffer;
    this.buffer = [];
    this.flushing = this.writeSlices(batch).finally(() => {
      this.flushing = null;
      this.flushIfFull();
    });
    await this.flushing;
  }

  private async writeSlices(batch: T[]): Promise<void> {
    for (let start = 0; start < batch.length; start += WRITE_SLICE) {
      // Also before the first slice: a flush that waited for another must not write right behind it.
      await nextMacrotask();
      if (!(await this.write(batch.slice(start, start + WRITE_SLICE)))) {
        // What was not written goes back ahead of what arrived meanwhile, in order.
        this.buffer = batch.slice(start).concat(this.buffer).slice(-MAX_BUFFERED);
        return;
      }
    }
  }

  /**
   * A failed slice is either an unreachable database (false: keep it and the rest for the next attempt) or an item
   * the database refuses (write the rest one by one, drop and report only the refused ones), so nothing blocks the rest.
   */
  private async write(batch: T[]): Promise<boolean> {
    const { name, log } = this.options;
    try {
      await this.options.write(batch);
      return true;
    } catch (err) {
      if (!(await this.databaseReachable())) {
        this.retryAt = Date.now() + RETRY_PAUSE_MS;
        log.error({ err, events: batch.length }, `${name} flush failed; database unreachable, will retry`);
        return false;
      }
    }
    let dropped = 0;
    for (const item of batch) {
      try {
        await this.options.write([item]);
      } catch (err) {
        dropped++;
        log.error({ err, ...this.options.describe(item) }, `${name} event refused by the database; dropped`);
      }
    }
    if (dropped > 0) log.error({ dropped, written: batch.length - dropped }, `${name} flush wrote the batch row by row`);
    return true;
  }

  private async databaseReachable(): Promise<boolean> {
    try {
      await this.options.ping();
      return true;
    } catch {
      return false;
    }
  }

  /** Writes what is left, retrying for a while when the database is unreachable; what still fails is reported lost. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    const deadline = Date.now() + CLOSE_RETRY_MS;
    await this.flush();
    while (this.buffer.length > 0 && Date.now() < deadline) {
      await sleep(Math.min(RETRY_PAUSE_MS, deadline - Date.now()));
      await this.flush();
    }
    if (this.buffer.length > 0) {
      this.options.log.error({ lost: this.buffer.length }, `${this.options.name} events could not be written before shutdown; they are lost`);
    }
  }
}
