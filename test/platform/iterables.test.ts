import { describe, expect, it } from 'vitest';
import { withFirst } from '../../src/platform/iterables.js';

/** Unit tests of withFirst: a stream handed on after its first result was read. */

/** A generator of `items` that records whether its finally ran (the underlying stream was released). */
function source(items: number[]) {
  const state = { released: false };
  const iterator = (async function* () {
    try {
      for (const item of items) yield item;
    } finally {
      state.released = true;
    }
  })();
  return { iterator, state };
}

describe('withFirst', () => {
  it('hands out the result already read, then the rest, once', async () => {
    const { iterator } = source([1, 2, 3]);
    const stream = withFirst(await iterator.next(), iterator);
    const seen: number[] = [];
    for await (const item of stream) seen.push(item);
    expect(seen).toEqual([1, 2, 3]);
  });

  it('hands out an end already read as the end, without reading on', async () => {
    const { iterator, state } = source([1]);
    const seen: number[] = [];
    for await (const item of withFirst<number>({ done: true, value: undefined }, iterator)) seen.push(item);
    expect(seen).toEqual([]);
    // The rest was never read: its generator has not even started.
    expect(state.released).toBe(false);
  });

  it('reads the rest only once the first result is taken, and passes its failure on', async () => {
    let reads = 0;
    const failing: AsyncIterator<number> = {
      next: async () => {
        reads++;
        throw new Error('reset');
      },
    };
    const iterator = withFirst({ done: false, value: 1 }, failing)[Symbol.asyncIterator]();
    expect(await iterator.next()).toEqual({ done: false, value: 1 });
    expect(reads).toBe(0);
    await expect(iterator.next()).rejects.toThrow('reset');
    // Without a return() of its own, closing still ends the stream.
    expect(await iterator.return?.()).toEqual({ done: true, value: undefined });
  });

  it('releases the stream when the reader stops early, also before reading anything', async () => {
    const early = source([1, 2, 3]);
    for await (const item of withFirst(await early.iterator.next(), early.iterator)) if (item === 1) break;
    expect(early.state.released).toBe(true);

    const unread = source([1, 2, 3]);
    const stream = withFirst(await unread.iterator.next(), unread.iterator);
    const reader = stream[Symbol.asyncIterator]();
    await reader.return?.();
    expect(unread.state.released).toBe(true);
    // Closed is closed: the first result is not handed out afterwards.
    expect(await reader.next()).toEqual({ done: true, value: undefined });
  });
});
