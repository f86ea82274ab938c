import fc from 'fast-check';
import secureJson from 'secure-json-parse';
import { describe, expect, it } from 'vitest';
import { parseClientJson } from '../../src/http/body.js';

/**
 * parseClientJson skips secure-json-parse for text that cannot hold a `__proto__` or `constructor` key (no such word,
 * no \u escape, no byte order mark). Whatever the text, it must answer as secure-json-parse does: the same value, or
 * a refusal.
 */
type Outcome = { value: unknown } | 'refused';

function outcome(parse: () => unknown): Outcome {
  try {
    return { value: parse() };
  } catch {
    return 'refused';
  }
}

const reference = (text: string) => outcome(() => secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' }));

/** Keys that poison, spelled out and escaped, and harmless look-alikes. */
const key = fc.constantFrom(
  '__proto__', '\\u005f_proto__', '__pr\\u006fto__', 'constructor', 'c\\u006fnstructor', '__proto', 'construct', 'proto', 'prototype', 'model', 'é', '\\u00e9', 'a b',
);
const member = fc.tuple(key, fc.json({ maxDepth: 2 })).map(([k, v]) => `"${k}": ${v}`);
const poisonable = fc
  .tuple(fc.array(member, { maxLength: 4 }), fc.boolean(), fc.boolean())
  .map(([members, nested, bom]) => {
    const object = `{${members.join(', ')}}`;
    return `${bom ? '\uFEFF' : ''}${nested ? `{"outer": ${object}, "list": [${object}]}` : object}`;
  });

describe('client JSON', () => {
  it('answers every text as secure-json-parse does (same value or refused)', () => {
    fc.assert(
      fc.property(fc.oneof(poisonable, fc.json({ maxDepth: 3 }), fc.string()), (text) => {
        // NUL and lone surrogates are Waygate's own refusals on top: texts with them are not compared.
        fc.pre(!/\\u0000|\0|\\u[dD][89a-fA-F]|[\uD800-\uDFFF]/.test(text));
        expect(outcome(() => parseClientJson(text))).toEqual(reference(text));
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses a poisoning key however it is spelled, and reads plain bodies', () => {
    for (const text of ['{"__proto__": {"admin": true}}', '{"\\u005f_proto__": 1}', '{"a": {"constructor": {"prototype": {}}}}', '{"c\\u006fnstructor": {"prototype": 1}}']) {
      expect(() => parseClientJson(text), text).toThrow();
    }
    expect(parseClientJson('\uFEFF{"model": "m"}')).toEqual({ model: 'm' });
    expect(parseClientJson('{"model": "m", "messages": [{"role": "user", "content": "construct a proto"}]}')).toEqual({
      model: 'm',
      messages: [{ role: 'user', content: 'construct a proto' }],
    });
  });
});
