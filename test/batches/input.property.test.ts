import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { inlineLine, reusedCustomId, jsonlLines, type BatchLine } from '../../src/areas/batches/input.js';
import { AppError } from '../../src/http/errors.js';

const text = fc.string({ unit: 'grapheme', maxLength: 40 });
const body = fc.record({ model: fc.constantFrom('local-chat', 'gpt-4o', 'm-ü'), messages: fc.array(fc.record({ role: fc.constantFrom('user', 'system', 'assistant'), content: text }), { minLength: 1, maxLength: 3 }), temperature: fc.option(fc.double({ min: 0, max: 2, noNaN: true }), { nil: undefined }) }, { requiredKeys: ['model', 'messages'] });
const line = fc.record({ custom_id: fc.option(text, { nil: undefined }), body }, { requiredKeys: ['body'] });

/** Feeds bytes to the parser in pieces cut at the given offsets (anywhere, mid-character included). */
async function parse(bytes: Buffer, cuts: number[], maxLines = 10_000): Promise<BatchLine[]> {
  const offsets = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const pieces: Buffer[] = [];
  let start = 0;
  for (const offset of [...offsets, bytes.length]) {
    pieces.push(bytes.subarray(start, offset));
    start = offset;
  }
  const out: BatchLine[] = [];
  for await (const parsed of jsonlLines((async function* () { yield* pieces; })(), '/v1/chat/completions', maxLines)) out.push(parsed);
  return out;
}

function lineErrorOf(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    if (err instanceof AppError && err.statusCode === 400) return err.message;
    throw err;
  }
  throw new Error('expected a 400');
}

describe('batch input, properties', () => {
  it('a JSONL file gives the same lines however it is cut into chunks, with blank lines and CRLF anywhere', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(line, fc.constantFrom('\n', '\r\n'), fc.constantFrom('', '\n', '  \n', '\r\n')), { minLength: 1, maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 10 }),
        async (entries, cuts) => {
          let file = '';
          const expected: { customId: string | null; body: unknown; lineNumber: number }[] = [];
          let physical = 0;
          for (const [entry, newline, blank] of entries) {
            physical++;
            expected.push({ customId: entry.custom_id ?? null, body: entry.body, lineNumber: physical });
            file += JSON.stringify(entry) + newline + blank;
            physical += blank === '' ? 0 : 1;
          }
          const parsed = await parse(Buffer.from(file), cuts);
          expect(parsed.map((p) => ({ customId: p.customId, body: p.body, lineNumber: p.lineNumber }))).toEqual(
            expected.map((e) => ({ ...e, body: JSON.parse(JSON.stringify(e.body)) })),
          );
        },
      ),
      { numRuns: 150 },
    );
  });

  it('the first invalid inline line is the one the 400 names, whatever comes before or after it', () => {
    const corruptions = [
      [{ body: { messages: [{ role: 'user', content: 'x' }] } }, /body\.model is required/],
      [{ body: { model: 'local-chat' } }, /body\.messages is required/],
      [{ body: { model: 'local-chat', messages: [{ role: 'user', content: 'x' }], stream: true } }, /streaming is not supported/],
      [{ custom_id: 5, body: { model: 'local-chat', messages: [{ role: 'user', content: 'x' }] } }, /custom_id must be a string/],
      [{ url: '/v1/embeddings', body: { model: 'local-chat', messages: [{ role: 'user', content: 'x' }] } }, /does not match the batch endpoint/],
      [42, /must be a JSON object/],
    ] as const;
    fc.assert(
      fc.property(fc.array(line, { maxLength: 8 }), fc.array(line, { maxLength: 8 }), fc.constantFrom(...corruptions), (before, after, [bad, reason]) => {
        const lines = [...before, bad, ...after];
        const message = lineErrorOf(() => lines.map((value, i) => inlineLine('/v1/chat/completions', value, i + 1)));
        expect(message).toMatch(new RegExp(`^Line ${before.length + 1}: `));
        expect(message).toMatch(reason);
      }),
      { numRuns: 200 },
    );
  });

  it('more request lines than the maximum are refused, blank lines not counted', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(line, { minLength: 1, maxLength: 10 }), fc.integer({ min: 1, max: 10 }), async (lines, max) => {
        const file = Buffer.from(lines.map((l) => JSON.stringify(l)).join('\n\n'));
        if (lines.length <= max) expect(await parse(file, [], max)).toHaveLength(lines.length);
        else await expect(parse(file, [], max)).rejects.toThrow(`more than ${max} request lines`);
      }),
      { numRuns: 100 },
    );
  });

  it('a repeated custom_id is named at its second use', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.string({ minLength: 1, maxLength: 8 }), { minLength: 2, maxLength: 10 }), fc.nat(), fc.nat(), (ids, a, b) => {
        const first = a % ids.length;
        const lines = ids.map((id, i) => ({ customId: id, body: {}, lineNumber: i + 1 }));
        expect(reusedCustomId(lines)).toBeNull();
        const duplicate = { customId: ids[first]!, body: {}, lineNumber: ids.length + 1 + (b % 3) };
        expect(reusedCustomId([...lines, duplicate])).toEqual({
          lineNumber: duplicate.lineNumber,
          problem: `custom_id ${JSON.stringify(ids[first])} is already used by line ${first + 1}`,
        });
      }),
    );
  });
});
