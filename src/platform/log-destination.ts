import fs from 'node:fs';

/** How long to wait before writing again to a pipe that is full (EAGAIN on a non-blocking stdout). */
const FULL_PIPE_RETRY_MS = 10;
/** How long to wait before writing again after another failure (a full disk, an I/O error): it may pass. */
const FAILED_WRITE_RETRY_MS = 1_000;
/** Failures after which nothing can ever be written: the reader of stdout went away, or there is no descriptor. */
const GONE = new Set(['EPIPE', 'EBADF']);
/** Lines held while nothing can be written; past this the oldest are dropped (a log reader that stopped reading). */
const MAX_HELD_CHARS = 16 * 1024 * 1024;

/**
 * Where pino writes the log: lines are collected and written to a file descriptor in batches of `batchChars`
 * characters (or every `flushMs`), asynchronously, so that a line never blocks the event loop nor costs a system call
 * of its own. What is left is written synchronously when the process exits; a kill -9 loses at most `flushMs` of lines.
 *
 * It stands in for pino.destination (sonic-boom), which measures the UTF-8 length of all it holds on every line: with
 * 4 KB batches that was about 2 % of a model call's instructions.
 */
export class LogDestination {
  private lines: string[] = [];
  private chars = 0;
  /** Lines dropped past MAX_HELD_CHARS and not yet reported in the log itself. */
  private dropped = 0;
  /** Bytes of the write under way (null when none): flushSync writes them again, as exit does not wait for it. */
  private inFlight: Buffer | null = null;
  private broken = false;
  /** Batches started so far and written (or dropped) so far: they are written one after the other. */
  private started = 0;
  private finished = 0;
  /** flush() callers, each waiting for a batch to be written: the one that holds the lines held at its call. */
  private waiters: { batch: number; done: () => void }[] = [];
  private readonly timer: NodeJS.Timeout;

  /** `maxHeldChars`: what is held while nothing can be written, before the oldest lines are dropped. */
  constructor(
    private readonly fd: number,
    private readonly batchChars: number,
    flushMs: number,
    private readonly maxHeldChars = MAX_HELD_CHARS,
  ) {
    this.timer = setInterval(() => this.startWrite(), flushMs);
    this.timer.unref();
    process.once('exit', () => this.flushSync());
  }

  /** pino's stream interface: one serialized line, newline included. */
  write(line: string): boolean {
    if (this.broken) return true;
    this.lines.push(line);
    this.chars += line.length;
    if (this.chars > this.maxHeldChars) this.dropOldest();
    if (!this.inFlight && this.chars >= this.batchChars) this.startWrite();
    return true;
  }

  /** pino's logger.flush(): writes what is held now, and calls back once all of it is written (or dropped). */
  flush(done?: () => void): void {
    // Lines held behind a write under way go in the batch after it.
    const batch = this.lines.length > 0 && !this.broken ? this.started + 1 : this.started;
    this.startWrite();
    if (!done) return;
    if (batch > this.finished) this.waiters.push({ batch, done });
    else done();
  }

  /** Starts writing what is held, unless a write is under way (its end writes the rest). */
  private startWrite(): void {
    if (this.inFlight || this.broken || this.lines.length === 0) return;
    this.started++;
    this.writeOut(Buffer.from(this.take()));
  }

  private take(): string {
    if (this.dropped > 0) {
      const notice = { level: 40, time: Date.now(), dropped: this.dropped, msg: 'log lines dropped: the log could not be written for a while' };
      this.lines.unshift(`${JSON.stringify(notice)}\n`);
      this.dropped = 0;
    }
    const text = this.lines.join('');
    this.lines = [];
    this.chars = 0;
    return text;
  }

  private writeOut(bytes: Buffer): void {
    this.inFlight = bytes;
    fs.write(this.fd, bytes, (err, written) => {
      if (err) {
        const code = (err as NodeJS.ErrnoException).code ?? '';
        if (!GONE.has(code)) {
          // A full pipe, a full disk, an I/O error: the same bytes again later, lines held meanwhile (bounded).
          setTimeout(() => this.writeOut(bytes), code === 'EAGAIN' ? FULL_PIPE_RETRY_MS : FAILED_WRITE_RETRY_MS).unref();
          return;
        }
        // Nowhere left to log to (the reader of stdout went away): lines are dropped from now on, the gateway goes on.
        this.broken = true;
        this.lines = [];
        this.chars = 0;
        this.inFlight = null;
        this.batchEnded(Infinity);
        return;
      }
      if (written < bytes.length) return this.writeOut(bytes.subarray(written));
      this.inFlight = null;
      this.batchEnded(this.finished + 1);
      // Lines that came meanwhile go at once when enough of them, or when a flush() waits for them.
      if (this.chars >= this.batchChars || this.waiters.length > 0) this.startWrite();
    });
  }

  /** Batches up to `batch` are written (or dropped): their flush() callers are called back. */
  private batchEnded(batch: number): void {
    this.finished = batch;
    const due = this.waiters.filter((w) => w.batch <= batch);
    if (due.length === 0) return;
    this.waiters = this.waiters.filter((w) => w.batch > batch);
    for (const waiter of due) waiter.done();
  }

  private dropOldest(): void {
    while (this.chars > this.maxHeldChars / 2 && this.lines.length > 0) {
      this.chars -= this.lines.shift()!.length;
      this.dropped++;
    }
  }

  /**
   * Writes everything held, blocking: at exit. The bytes of a write under way are written again (exit does not wait
   * for the thread pool, which may or may not have written them): a line twice rather than none. Should that write
   * be stuck on a full pipe at that moment, the two can interleave; sonic-boom instead leaves it to the thread pool,
   * and loses it when the process ends first.
   */
  flushSync(): void {
    clearInterval(this.timer);
    if (this.broken) return;
    const held = this.lines.length > 0 ? Buffer.from(this.take()) : null;
    for (const bytes of [this.inFlight, held]) if (bytes) writeAllSync(this.fd, bytes);
    this.inFlight = null;
  }
}

/**
 * Milliseconds in a row that a full pipe may refuse every byte at exit: a log reader that stopped reading must not
 * hold the process's exit for long, while one that reads slowly gets everything.
 */
const EXIT_STALL_MS = 2_000;
const pause = new Int32Array(new SharedArrayBuffer(4));

function writeAllSync(fd: number, bytes: Buffer): void {
  let rest = bytes;
  for (let stalled = 0; rest.length > 0 && stalled < EXIT_STALL_MS; ) {
    try {
      rest = rest.subarray(fs.writeSync(fd, rest));
      stalled = 0;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EAGAIN' && code !== 'EBUSY') return;
      Atomics.wait(pause, 0, 0, 1);
      stalled++;
    }
  }
}
