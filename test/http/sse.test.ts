import { setImmediate as nextMacrotask } from 'node:timers/promises';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { framesPerTick } from '../../src/http/sse.js';

/** A frame, and whether it is ready at once or only after the event loop turns (an upstream read still to come). */
type Planned = { text: string; later: boolean };

/** Frames from an async generator, as the chat service hands them over; `later` frames wait for a macrotask first. */
async function* planned(frames: Planned[], failAtEnd?: Error): AsyncGenerator<string> {
  for (const frame of frames) {
    if (frame.later) await nextMacrotask();
    yield frame.text;
  }
  if (failAtEnd) throw failAtEnd;
}

/** Two frames, the second held back until `release` is called. */
function secondWhenReleased(first: string, second: string): { frames: AsyncGenerator<string>; release: () => void } {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  async function* frames() {
    yield first;
    await held;
    yield second;
  }
  return { frames: frames(), release };
}

async function batchesOf(frames: AsyncIterableIterator<string>): Promise<string[]> {
  const batches: string[] = [];
  for await (const batch of framesPerTick(frames)) batches.push(batch);
  return batches;
}

describe('framesPerTick', () => {
  it('joins the frames that are ready together, and starts a new batch at each frame still on its way', async () => {
    const frames = [
      { text: 'a', later: false },
      { text: 'b', later: false },
      { text: 'c', later: true },
      { text: 'd', later: false },
      { text: 'e', later: true },
    ];
    expect(await batchesOf(planned(frames))).toEqual(['a', 'b', 'cd', 'e']);
  });

  it('sends the first frame alone and begins the second batch a macrotask later (time to first byte)', async () => {
    const batches = framesPerTick(planned(['a', 'b', 'c'].map((text) => ({ text, later: false }))));
    expect(await batches.next()).toEqual({ done: false, value: 'a' });
    // Queued once the first frame is handed over: it runs before the second batch is begun, as a response's write
    // of the first frame does.
    let turned = false;
    setImmediate(() => (turned = true));
    expect(await batches.next()).toEqual({ done: false, value: 'bc' });
    expect(turned).toBe(true);
  });

  it('hands over the frames at hand without waiting for the next one', async () => {
    const { frames, release } = secondWhenReleased('data: 1\n\n', 'data: 2\n\n');
    const batches = framesPerTick(frames);
    // Resolves although the second frame never comes until released.
    expect(await batches.next()).toEqual({ done: false, value: 'data: 1\n\n' });
    release();
    expect(await batches.next()).toEqual({ done: false, value: 'data: 2\n\n' });
    expect((await batches.next()).done).toBe(true);
  });

  it('cuts a batch once it holds 16 K characters, and loses nothing', async () => {
    const frame = `data: ${'x'.repeat(1_000)}\n\n`;
    const frames = Array.from({ length: 200 }, () => ({ text: frame, later: false }));
    const batches = await batchesOf(planned(frames));
    expect(batches.length).toBeGreaterThan(1);
    for (const batch of batches) expect(batch.length).toBeLessThan(16 * 1024 + frame.length);
    expect(batches.join('')).toBe(frame.repeat(200));
  });

  it('delivers the frames before a failure, then the failure', async () => {
    const failure = new Error('upstream broke');
    const batches = framesPerTick(planned(['a', 'b', 'c'].map((text) => ({ text, later: false })), failure));
    expect(await batches.next()).toEqual({ done: false, value: 'a' });
    expect(await batches.next()).toEqual({ done: false, value: 'bc' });
    await expect(batches.next()).rejects.toBe(failure);
  });

  it('delivers a batch, then a failure that comes after the next macrotask (a stream settled after [DONE] failing)', async () => {
    const failure = new Error('settling failed');
    async function* failsLater() {
      yield 'data: [DONE]\n\n';
      await nextMacrotask();
      throw failure;
    }
    const batches = framesPerTick(failsLater());
    expect(await batches.next()).toEqual({ done: false, value: 'data: [DONE]\n\n' });
    await expect(batches.next()).rejects.toBe(failure);
    // Then it is over, as a generator that threw is.
    expect(await batches.next()).toEqual({ done: true, value: undefined });
  });

  it('ends a batch with the tick: a frame released by a macrotask queued earlier is not joined to it', async () => {
    const { frames, release } = secondWhenReleased('a', 'b');
    const batches = framesPerTick(frames);
    setImmediate(release);
    expect(await batches.next()).toEqual({ done: false, value: 'a' });
    expect(await batches.next()).toEqual({ done: false, value: 'b' });
  });

  it('passes return straight on, also before the first read (a stream closed unread is still closed and metered)', async () => {
    const calls: string[] = [];
    const frames: AsyncIterableIterator<string> = {
      [Symbol.asyncIterator]() {
        return this;
      },
      next: async () => {
        calls.push('next');
        return { done: false, value: 'x' };
      },
      return: async () => {
        calls.push('return');
        return { done: true, value: undefined };
      },
    };
    await framesPerTick(frames).return!();
    expect(calls).toEqual(['return']);
  });

  it('closes its frames when the reader stops between batches (the client went away)', async () => {
    let closed = false;
    async function* endless() {
      try {
        for (let i = 0; i < 1_000; i++) {
          await nextMacrotask();
          yield `data: ${i}\n\n`;
        }
      } finally {
        closed = true;
      }
    }
    for await (const batch of framesPerTick(endless())) {
      expect(batch).toBe('data: 0\n\n');
      break;
    }
    expect(closed).toBe(true);
  });

  it('property: the batches join to the frames in order, and no batch spans a frame that was on its way', async () => {
    const frame = fc.record({ text: fc.string({ minLength: 1, maxLength: 40 }), later: fc.boolean() });
    await fc.assert(
      fc.asyncProperty(fc.array(frame, { maxLength: 40 }), async (frames) => {
        const batches = await batchesOf(planned(frames));
        expect(batches.join('')).toBe(frames.map((f) => f.text).join(''));
        // Frames ready at once join the batch before them; each frame that waited opens a batch, and so do the first
        // (it goes out alone) and the second.
        const opening = frames.filter((f, i) => i <= 1 || f.later).length;
        expect(batches.length).toBe(opening);
      }),
      { numRuns: 200 },
    );
  });
});
