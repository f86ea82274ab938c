import { setImmediate as nextMacrotask } from 'node:timers/promises';

/**
 * A joined batch is handed over once it reaches this many characters, whatever else is ready. It also bounds what a
 * stream holds while its client reads slowly: Readable.from buffers whole items, so one batch is what it keeps back
 * (about a response's 16 KB high-water mark, as when each frame was one item).
 */
const MAX_BATCH_CHARS = 16 * 1024;

/**
 * A stream's frames joined per tick: the frames that are ready together (an upstream read often holds dozens of
 * events) go out as one string, so the response makes one chunked write for them instead of one each. Nothing waits
 * for more: a batch ends when the frames at hand are used up (the tick's microtasks have run) and the frame that is
 * still on its way opens the next one.
 *
 * The first frame goes out alone, and the second batch is begun a macrotask later (time to first byte): Node holds
 * a response's writes until the tick ends, and with more upstream events already received that tick would last until
 * all of them were framed.
 *
 * `return` and `throw` go straight to `frames`, so a stream closed before its first read is still closed as it was
 * before. A `return` while the next frame is on its way waits for it, as a generator's does; when a client leaves,
 * its connection's signal has already ended the upstream request.
 */
export function framesPerTick(frames: AsyncIterableIterator<string>): AsyncIterableIterator<string> {
  /** The next frame, asked for in the last batch but not joined to it: on its way, the end, or a failure. */
  let pending: Promise<IteratorResult<string>> | null = null;
  let batches = 0;
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      if (batches === 1) await nextMacrotask();
      const waiting = pending ?? frames.next();
      pending = null;
      const first = await waiting;
      if (first.done) return first;
      if (batches++ === 0) return first;
      let batch = first.value;
      // Resolved by a tick callback, which runs only once the microtasks in progress (the frames at hand) are done.
      const tickEnd = new Promise<null>((resolve) => process.nextTick(resolve, null));
      while (batch.length < MAX_BATCH_CHARS) {
        const more = frames.next();
        // A failure, like the end, reaches the reader with its next call, after this batch (the race's handlers keep
        // the rejection from counting as unhandled meanwhile).
        const next = await Promise.race([more, tickEnd]).catch(() => null);
        if (next === null || next.done) {
          pending = more;
          break;
        }
        batch += next.value;
      }
      return { done: false, value: batch };
    },
    return: (value?: unknown) => frames.return?.(value) ?? Promise.resolve({ done: true, value: undefined }),
    throw: (err?: unknown) => frames.throw?.(err) ?? Promise.reject(err),
  };
}
