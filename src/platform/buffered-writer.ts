import { setImmediate as nextMacrotask, setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { isRefusedRow } from '../db/errors.js';

export interface BufferedWriterOptions<T> {
  /** What is buffered, for log lines ("audit", "usage"). */
  name: string;
  /** Writes a batch; throws when it could not. */
  write(batch: T[]): Promise<void>;
  /** What to log about an item that was dropped. */
  describe(item: T): Record<string, unknown>;
  log: Logger;
}

const FLUSH_INTERVAL_MS = 1_000;
/** While the database cannot take writes the buffer keeps at most this many items, dropping (and reporting) the oldest. */
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
  private closed = false;
  /** Items dropped past MAX_BUFFERED since that was last logged (once per flush, not once per item). */
  private droppedUnreported = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly options: BufferedWriterOptions<T>) {
    this.timer = setInterval(() => void this.flush(), FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  push(item: T): void {
    if (this.closed) {
      // After close() nothing flushes again (a call cut at the shutdown deadline that ended later): say so.
      this.options.log.error(this.options.describe(item), `${this.options.name} event arrived after shutdown's last write; it is lost`);
      return;
    }
    this.buffer.push(item);
    if (this.buffer.length > MAX_BUFFERED) this.dropOldest();
    // One flush at a time: while one runs, pushes only buffer (it starts the next when it ends), so a slow database
    // does not gather a waiting flush call per pushed item.
    if (!this.flushing) this.flushIfFull();
  }

  private dropOldest(): void {
    const dropped = this.buffer.length - MAX_BUFFERED;
    this.buffer.splice(0, dropped);
    this.droppedUnreported += dropped;
  }

  private reportDrops(): void {
    if (this.droppedUnreported === 0) return;
    this.options.log.error({ dropped: this.droppedUnreported, kept: MAX_BUFFERED }, `${this.options.name} buffer is full while the database cannot take writes; the oldest events are dropped`);
    this.droppedUnreported = 0;
  }

  private flushIfFull(): void {
    if (this.buffer.length >= FLUSH_AT && Date.now() >= this.retryAt) void this.flush();
  }

  get pending(): number {
    return this.buffer.length;
  }

  /** Writes everything buffered so far; concurrent callers share one write. */
  async flush(): Promise<void> {
    this.reportDrops();
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
      const slice = batch.slice(start, start + WRITE_SLICE);
      const done = await this.write(slice);
      if (done < slice.length) {
        // What was not written goes back ahead of what arrived meanwhile, in order.
        this.buffer = batch.slice(start + done).concat(this.buffer);
        if (this.buffer.length > MAX_BUFFERED) this.dropOldest();
        return;
      }
    }
  }

  /**
   * Writes a slice; returns how many of its items are done with (written, or refused and dropped). A failed slice is
   * either rows the database refuses (written one by one then, and only the refused ones dropped and reported, so
   * that they do not block the rest) or the database's own state: unreachable, read-only after a failover, full,
   * locked. Then the items wait for the next attempt: a database that answers `select 1` can still refuse every
   * write, and dropping rows then would lose everything metered meanwhile.
   */
  private async write(batch: T[]): Promise<number> {
    try {
      await this.options.write(batch);
      return batch.length;
    } catch (err) {
      if (!isRefusedRow(err)) return this.waitForDatabase(err, 0);
    }
    let dropped = 0;
    for (const [index, item] of batch.entries()) {
      try {
        await this.options.write([item]);
      } catch (err) {
        if (!isRefusedRow(err)) return this.waitForDatabase(err, index);
        dropped++;
        this.options.log.error({ err, ...this.options.describe(item) }, `${this.options.name} event refused by the database; dropped`);
      }
    }
    if (dropped > 0) this.options.log.error({ dropped, written: batch.length - dropped }, `${this.options.name} flush wrote the batch row by row`);
    return batch.length;
  }

  /** Pauses flushing after a failure of the database itself; `done`: items of the slice dealt with before it. */
  private waitForDatabase(err: unknown, done: number): number {
    this.retryAt = Date.now() + RETRY_PAUSE_MS;
    this.options.log.error({ err }, `${this.options.name} flush failed; the database cannot take writes now, will retry`);
    return done;
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
    this.closed = true;
    this.reportDrops();
    if (this.buffer.length > 0) {
      this.options.log.error({ lost: this.buffer.length }, `${this.options.name} events could not be written before shutdown; they are lost`);
    }
  }
}
