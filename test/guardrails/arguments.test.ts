import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readableArguments, writtenArguments } from '../../src/areas/guardrails/fields.js';

/** Function arguments as guardrails read them (escapes decoded) and as they are sent again (JSON). */
describe('readable and written arguments', () => {
  it('decodes escapes of control characters, \\u and \\/, and keeps quotes and backslashes escaped', () => {
    expect(readableArguments('{"a": "pay with\\n4111"}')).toEqual({ text: '{"a":"pay with\n4111"}', json: true });
    expect(readableArguments('{"u":"https:\\/\\/x.test\\/p","e":"a\\u0040b.test"}')).toEqual({ text: '{"u":"https://x.test/p","e":"a@b.test"}', json: true });
    expect(readableArguments('{"q":"a\\\\nb \\"x\\""}')).toEqual({ text: '{"q":"a\\\\nb \\"x\\""}', json: true });
    // Not JSON (cut off): every escape but a quote's and a backslash's is decoded all the same.
    expect(readableArguments('{"x":"a\\u0040b\\t\\/\\u0022')).toEqual({ text: '{"x":"a@b\t/\\u0022', json: false });
  });

  it('writes control characters as escapes again', () => {
    expect(writtenArguments('{"a":"pay with\n[REDACTED]"}', true)).toBe('{"a":"pay with\\n[REDACTED]"}');
    expect(writtenArguments('{"x":"cut\toff', false)).toBe('{"x":"cut\\toff');
  });

  it('keeps JSON arguments JSON when a redaction took part of their structure', () => {
    const written = writtenArguments('{"a":"[REDACTED]', true);
    expect(JSON.parse(written)).toBe('{"a":"[REDACTED]');
  });

  const json = fc.jsonValue({ maxDepth: 3 });

  it('property: read and written back unchanged, JSON arguments mean what they meant', () => {
    fc.assert(
      fc.property(json, (value) => {
        const readable = readableArguments(JSON.stringify(value));
        expect(readable.json).toBe(true);
        expect(JSON.parse(writtenArguments(readable.text, true))).toEqual(JSON.parse(JSON.stringify(value)));
      }),
      { numRuns: 500 },
    );
  });

  it('property: whatever a redaction replaces, JSON arguments stay JSON', () => {
    fc.assert(
      fc.property(json, fc.nat(), fc.nat(), fc.string({ maxLength: 12 }), (value, from, length, replacement) => {
        const { text } = readableArguments(JSON.stringify(value));
        const start = from % (text.length + 1);
        const redacted = text.slice(0, start) + replacement + text.slice(start + (length % 20));
        expect(() => JSON.parse(writtenArguments(redacted, true))).not.toThrow();
      }),
      { numRuns: 500 },
    );
  });
});
