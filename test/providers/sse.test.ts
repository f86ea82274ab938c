import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { UpstreamError } from '../../src/providers/errors.js';
import { sseBatches, type SseEvent } from '../../src/providers/sse.js';

/** Unit tests of the SSE parser every streaming provider reads upstream bodies with. */

async function* bytes(...parts: (string | Buffer)[]): AsyncGenerator<Buffer> {
  for (const part of parts) yield typeof part === 'string' ? Buffer.from(part, 'utf8') : part;
}

async function collect(...parts: (string | Buffer)[]): Promise<SseEvent[]> {
  const events: SseEvent[] = [];
  for await (const batch of sseBatches(bytes(...parts))) events.push(...batch);
  return events;
}

/** The stream cut into pieces of `size` bytes (cuts may fall inside a multi-byte character). */
function pieces(text: string, size: number): Buffer[] {
  const all = Buffer.from(text, 'utf8');
  const out: Buffer[] = [];
  for (let i = 0; i < all.length; i += size) out.push(all.subarray(i, i + size));
  return out;
}

describe('sseBatches', () => {
  it('reads events separated by blank lines with \\n line ends', async () => {
    expect(await collect('data: one\n\ndata: two\n\n')).toEqual([
      { event: null, data: 'one' },
      { event: null, data: 'two' },
    ]);
  });

  it('hands out the events each read completes as one batch, and no empty batch', async () => {
    const batches: SseEvent[][] = [];
    for await (const batch of sseBatches(bytes('data: a\n\ndata: b\n\ndata: c', '\n', '\n', ': comment\n\n', 'data: d\n\ndata: e'))) batches.push(batch);
    expect(batches.map((batch) => batch.map((e) => e.data))).toEqual([['a', 'b'], ['c'], ['d'], ['e']]);
  });

  it('hands out the events before a fault in the same read, then fails', async () => {
    const seen: string[] = [];
    const consume = async () => {
      for await (const batch of sseBatches(bytes(`data: ok\n\ndata: ${'e'.repeat(5 * 1024 * 1024)}\n\n`))) seen.push(...batch.map((e) => e.data));
    };
    await expect(consume()).rejects.toMatchObject({ failure: 'malformed' });
    expect(seen).toEqual(['ok']);
  });

  it('reads empty data lines as the SSE grammar does: an empty value, and a line break between two', async () => {
    expect(await collect('data:\n\ndata\n\ndata: \n\ndata:\ndata:\n\nevent: only\n\n')).toEqual([
      { event: null, data: '' },
      { event: null, data: '' },
      { event: null, data: '' },
      { event: null, data: '\n' },
    ]);
  });

  // Regression (review): the line breaks between data lines were not counted, so endless empty data lines grew an
  // event without bound.
  it('rejects an event made of endless empty data lines', async () => {
    const lines = Buffer.from('data:\n'.repeat(64 * 1024));
    async function* endless(): AsyncGenerator<Buffer> {
      for (let i = 0; i < 70; i++) yield lines; // 4.5 M empty data lines, never a blank one
    }
    const consume = async () => {
      for await (const batch of sseBatches(endless())) void batch;
    };
    await expect(consume()).rejects.toMatchObject({ failure: 'malformed' });
  });

  it('reads \\r\\n line ends the same way', async () => {
    expect(await collect('event: ping\r\ndata: {"a":1}\r\n\r\ndata: two\r\n\r\n')).toEqual([
      { event: 'ping', data: '{"a":1}' },
      { event: null, data: 'two' },
    ]);
  });

  it('handles a \\r\\n pair split across two chunks', async () => {
    expect(await collect('data: a\r', '\n\r', '\ndata: b\r\n\r\n')).toEqual([
      { event: null, data: 'a' },
      { event: null, data: 'b' },
    ]);
  });

  it('joins multi-line data with \\n', async () => {
    expect(await collect('data: line 1\ndata: line 2\ndata:line 3\n\n')).toEqual([{ event: null, data: 'line 1\nline 2\nline 3' }]);
  });

  it('removes only one space after the colon', async () => {
    expect(await collect('data:  two spaces\n\n')).toEqual([{ event: null, data: ' two spaces' }]);
  });

  it('skips comments, ids, retry and unknown fields', async () => {
    const events = await collect(': keep-alive\n\nid: 7\nretry: 1000\nfoo: bar\ndata: x\n: another comment\n\n: trailing\n\n');
    expect(events).toEqual([{ event: null, data: 'x' }]);
  });

  it('dispatches nothing for a blank line without data, and resets the event name after each event', async () => {
    const events = await collect('event: lonely\n\n\n\ndata: a\n\nevent: named\ndata: b\n\ndata: c\n\n');
    expect(events).toEqual([
      { event: null, data: 'a' },
      { event: 'named', data: 'b' },
      { event: null, data: 'c' },
    ]);
  });

  it('gives the same events whatever the chunk boundaries', async () => {
    const stream = 'event: message_start\ndata: {"type":"message_start"}\n\n: ping\n\ndata: {"text":"a"}\r\n\r\ndata: [DONE]\n\n';
    const expected = await collect(stream);
    expect(expected).toHaveLength(3);
    for (const size of [1, 2, 3, 5, 7, 13, 64]) expect(await collect(...pieces(stream, size)), `chunk size ${size}`).toEqual(expected);
  });

  it('decodes multi-byte UTF-8 split at every byte position', async () => {
    const text = 'data: héllo wörld 😀 你好 — ok\n\n';
    const whole = Buffer.from(text, 'utf8');
    for (let cut = 1; cut < whole.length; cut++) {
      const events = await collect(whole.subarray(0, cut), whole.subarray(cut));
      expect(events, `cut at byte ${cut}`).toEqual([{ event: null, data: 'héllo wörld 😀 你好 — ok' }]);
    }
    // One byte at a time splits every character.
    expect(await collect(...pieces(text, 1))).toEqual([{ event: null, data: 'héllo wörld 😀 你好 — ok' }]);
  });

  it('dispatches a trailing event that has no blank line after it', async () => {
    expect(await collect('data: first\n\ndata: last')).toEqual([
      { event: null, data: 'first' },
      { event: null, data: 'last' },
    ]);
    expect(await collect('event: x\ndata: complete line\n')).toEqual([{ event: 'x', data: 'complete line' }]);
    expect(await collect('data: a\ndata: b')).toEqual([{ event: null, data: 'a\nb' }]);
  });

  it('yields nothing for an empty body or only whitespace and comments', async () => {
    expect(await collect()).toEqual([]);
    expect(await collect('\n\n\r\n')).toEqual([]);
    expect(await collect(': only a comment\n\n')).toEqual([]);
  });

  // Regression: an unterminated last line was taken as data whatever field it was.
  it('treats an unterminated trailing comment as a comment, not as data', async () => {
    expect(await collect('data: a\n\n: keep-alive')).toEqual([{ event: null, data: 'a' }]);
  });

  it('rejects an event line longer than 4 MiB as malformed', async () => {
    const huge = `data: ${'a'.repeat(4 * 1024 * 1024 + 16)}`;
    const err = await collect(huge).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err).toMatchObject({ failure: 'malformed' });
    expect((err as UpstreamError).retryable).toBe(false);
  });

  it('rejects an over-long line that arrives in many small chunks', async () => {
    const chunk = Buffer.from('b'.repeat(64 * 1024));
    async function* endless(): AsyncGenerator<Buffer> {
      yield Buffer.from('data: ');
      for (let i = 0; i < 100; i++) yield chunk; // 6.4 MiB, never a newline
    }
    const consume = async () => {
      for await (const batch of sseBatches(endless())) void batch;
    };
    await expect(consume()).rejects.toMatchObject({ failure: 'malformed' });
  });

  // Regression: only the unterminated line was measured, so endless short `data:` lines grew without bound.
  it('rejects an event made of many short data lines that together exceed 4 MiB', async () => {
    const line = Buffer.from(`data: ${'c'.repeat(1000)}\n`);
    async function* manyLines(): AsyncGenerator<Buffer> {
      for (let i = 0; i < 5000; i++) yield line; // ~5 MB in one event
      yield Buffer.from('\n');
    }
    const consume = async () => {
      for await (const batch of sseBatches(manyLines())) void batch;
    };
    await expect(consume()).rejects.toMatchObject({ failure: 'malformed' });
  });

  it('accepts a large event that stays under the limit', async () => {
    const data = 'd'.repeat(1024 * 1024);
    const events = await collect(...pieces(`data: ${data}\n\n`, 60_000));
    expect(events).toHaveLength(1);
    expect(events[0]!.data.length).toBe(data.length);
  });
  it('reads lone \r line ends, also when the stream ends on one', async () => {
    expect(await collect('data: a\r\rdata: b\r\r', 'data: c\r')).toEqual([
      { event: null, data: 'a' },
      { event: null, data: 'b' },
      { event: null, data: 'c' },
    ]);
  });

  it('rejects an over-long event that arrives in one chunk', async () => {
    const consume = async () => {
      for await (const batch of sseBatches(bytes(`data: ${'e'.repeat(5 * 1024 * 1024)}\n\n`))) void batch;
    };
    await expect(consume()).rejects.toMatchObject({ failure: 'malformed' });
  });

  it('reads the same events however the stream is cut and whichever line ends it uses', async () => {
    const text = fc.stringMatching(/^[a-z{}":, 0-9]{0,12}$/);
    const event = fc.record({ name: fc.option(fc.constantFrom('ping', 'delta'), { nil: null }), lines: fc.array(text, { minLength: 1, maxLength: 3 }) });
    await fc.assert(
      fc.asyncProperty(fc.array(event, { minLength: 1, maxLength: 5 }), fc.constantFrom('\n', '\r\n', '\r'), fc.integer({ min: 1, max: 7 }), async (events, eol, size) => {
        const wire = events.map((e) => `${e.name ? `event: ${e.name}${eol}` : ''}${e.lines.map((l) => `data: ${l}${eol}`).join('')}${eol}`).join('');
        expect(await collect(...pieces(wire, size))).toEqual(events.map((e) => ({ event: e.name, data: e.lines.join('\n') })));
      }),
      { numRuns: 300 },
    );
  });
});
