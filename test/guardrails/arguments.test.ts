import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readableArguments, writtenArguments } from '../../src/areas/guardrails/fields.js';
import { scanPii } from '../../src/areas/guardrails/pii.js';

/** Function arguments as guardrails read them (every escape decoded) and as they are sent again. */
describe('readable and written arguments', () => {
  it('decodes every escape but a quote and a backslash, which stay escaped in their short form', () => {
    expect(readableArguments('{"a": "pay with\\n4111"}')).toBe('{"a": "pay with\n4111"}');
    expect(readableArguments('{"u":"https:\\/\\/x.test\\/p","e":"a\\u0040b.test","s":"\\ud800x"}')).toBe('{"u":"https://x.test/p","e":"a@b.test","s":"\ud800x"}');
    expect(readableArguments('{"q":"a\\\\nb \\"x\\" \\u0022y\\u005c"}')).toBe('{"q":"a\\\\nb \\"x\\" \\"y\\\\"}');
    // Cut off, not JSON: decoded all the same.
    expect(readableArguments('{"x":"a\\u0040b\\t')).toBe('{"x":"a@b\t');
  });

  it('a finding after an escape is read: a line break, a lone surrogate, a quote written as \\u0022', () => {
    for (const args of ['{"a":"pay\\n123-45-6789"}', '{"a":"pay \\ud800123-45-6789"}', '{"a":"pay \\udc00123-45-6789"}', '{"a":"x\\u0022123-45-6789', '{"a":"x\\u000a123-45-6789"}']) {
      expect(scanPii(readableArguments(args)).map((f) => f.category), args).toContain('us_ssn');
    }
  });

  it('sends arguments nothing changed exactly as they came', () => {
    for (const text of ['{ "n": 12345678901234567890, "x": 1e400, "z": -0 }', '{"a":1,"a":2}', '{\n  "a": "\\u00e9\\n"\n}', 'not json \\n']) {
      expect(writtenArguments(text, readableArguments(text), readableArguments(text))).toBe(text);
    }
  });

  it('escapes control characters and lone surrogates again, inside strings only', () => {
    const original = '{\n  "a": "pay with\\n4111", "s": "\\ud800"\n}';
    const checked = readableArguments(original).replace('4111', '[REDACTED]');
    expect(writtenArguments(original, readableArguments(original), checked)).toBe('{\n  "a": "pay with\\n[REDACTED]", "s": "\\ud800"\n}');
    expect(JSON.parse(writtenArguments(original, readableArguments(original), checked))).toEqual({ a: 'pay with\n[REDACTED]', s: '\ud800' });
  });

  it('a redacted number becomes a string, so the arguments keep their shape', () => {
    const original = '{"card_number": 4111111111111111, "n": 2}';
    const checked = original.replace('4111111111111111', '[REDACTED:credit_card]');
    expect(JSON.parse(writtenArguments(original, original, checked))).toEqual({ card_number: '[REDACTED:credit_card]', n: 2 });
  });

  it('keeps JSON arguments JSON when a redaction took part of their structure', () => {
    const original = '{"a":"x"}';
    expect(JSON.parse(writtenArguments(original, original, '{"a":"[REDACTED]'))).toBe('{"a":"[REDACTED]');
  });

  /** JSON texts in other forms than JSON.stringify's: spaces, every character as a \u escape, big numbers. */
  const texts = fc.oneof(
    fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' }).map((value) => JSON.stringify(value)),
    fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' }).map((value) => JSON.stringify(value, null, 2)),
    fc.string({ unit: 'binary', maxLength: 30 }).map((s) => `{"k": "${[...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}", "n": 123456789012345678901}`),
  );

  it('property: arguments nothing changed are sent as they came; what is read is what a JSON parser reads', () => {
    fc.assert(
      fc.property(texts, (text) => {
        const readable = readableArguments(text);
        expect(writtenArguments(text, readable, readable)).toBe(text);
        // Written back after a change that touches nothing a parser reads differently, the meaning stays.
        const written = writtenArguments(text, readable, `${readable} `);
        expect(JSON.parse(written)).toEqual(JSON.parse(text));
      }),
      { numRuns: 500 },
    );
  });

  it('property: whatever a redaction replaces, JSON arguments stay JSON', () => {
    fc.assert(
      fc.property(texts, fc.nat(), fc.nat(), fc.string({ unit: 'binary', maxLength: 12 }), (text, from, length, replacement) => {
        const readable = readableArguments(text);
        const start = from % (readable.length + 1);
        const checked = readable.slice(0, start) + replacement + readable.slice(start + (length % 20));
        expect(() => JSON.parse(writtenArguments(text, readable, checked))).not.toThrow();
      }),
      { numRuns: 500 },
    );
  });
});
