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

  it('hands out an end already read as the end', async () => {
    const { iterator } = source([]);
    const seen: number[] = [];
    for await (const item of withFirst(await iterator.next(), iterator)) seen.push(item);
    expect(seen).toEqual([]);
  });

  it('releases the stream when the reader stops early, also before reading anything', async () => {
    const early = source([1, 2, 3]);
    for await (const item of withFirst(await early.iterator.next(), early.iterator)) if (item === 1) break;
    expect(early.state.released).toBe(true);

    const unread = source([1, 2, 3]);
    const stream = withFirst(await unread.iterator.next(), unread.iterator);
    await stream[Symbol.asyncIterator]().return?.();
    expect(unread.state.released).toBe(true);
  });
});
