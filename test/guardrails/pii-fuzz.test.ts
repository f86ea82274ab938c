import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeText } from '../../src/areas/guardrails/normalize.js';
import { PII_CATEGORIES, redactPii, scanPii, type PiiCategory } from '../../src/areas/guardrails/pii.js';
import type { Span } from '../../src/areas/guardrails/types.js';
import { fastestMs } from './timing.js';

/** Known findings, each found on its own between spaces (its keyword included where the category needs one). */
const FINDINGS: Array<[PiiCategory, string, string]> = [
  ['email', 'jane.doe@example.com', 'jane.doe@example.com'],
  ['phone', '+1 415 555 2671', '+1 415 555 2671'],
  ['phone', 'tel 0532 123 45 67', '0532 123 45 67'],
  ['credit_card', '4111 1111 1111 1111', '4111 1111 1111 1111'],
  ['iban', 'DE89370400440532013000', 'DE89370400440532013000'],
  ['swift_bic', 'SWIFT COBADEFFXXX', 'COBADEFFXXX'],
  ['us_ssn', '536-22-8145', '536-22-8145'],
  ['national_id', '10000000146', '10000000146'],
  ['passport', 'passport X12345678', 'X12345678'],
  ['date_of_birth', 'DOB 12.03.1985', '12.03.1985'],
  ['street_address', '221B Baker Street', '221B Baker Street'],
  ['ip_address', '192.168.1.10', '192.168.1.10'],
  ['ip_address', '2001:db8::8a2e:370:7334', '2001:db8::8a2e:370:7334'],
  ['url', 'https://docs.example.com/a?b=1', 'https://docs.example.com/a?b=1'],
  ['social_handle', '@jack_dev', '@jack_dev'],
  ['api_key', 'AKIAIOSFODNN7EXAMPLE', 'AKIAIOSFODNN7EXAMPLE'],
  ['api_key', 'sk-proj-Ab3dEf9hIjKlMn0pQrStUvWxYz12345678', 'sk-proj-Ab3dEf9hIjKlMn0pQrStUvWxYz12345678'],
  ['crypto_wallet', '1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa', '1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa'],
  ['crypto_wallet', '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed', '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed'],
];
/** Words that can neither be PII nor a keyword that makes a neighbour PII. */
const FILLER = ['lorem', 'ipsum', 'dolor', 'sit', 'amet', 'the', 'quick', 'fox', 'jumps', 'over', 'lazy', 'dog', 'and', 'again'];

const PARAMS = { numRuns: 300 };

function expectWellFormed(text: string, spans: Span[], enabled?: ReadonlySet<string>): void {
  let previousEnd = 0;
  for (const span of spans) {
    expect(span.start).toBeGreaterThanOrEqual(previousEnd);
    expect(span.end).toBeGreaterThan(span.start);
    expect(span.end).toBeLessThanOrEqual(text.length);
    expect(enabled ?? new Set<string>(PII_CATEGORIES)).toContain(span.category);
    previousEnd = span.end;
  }
}

/** Text that is part PII fragments, part arbitrary Unicode code points, glued without separators. */
const messyText = fc
  .array(
    fc.oneof(
      fc.string({ unit: 'binary', maxLength: 12 }),
      fc.constantFrom(...FINDINGS.map(([, text]) => text), ' ', '@', '.', ':', '-', '\n', '0', '1 ', '+', 'www.', 'https://', 'eyJ'),
    ),
    { maxLength: 24 },
  )
  .map((parts) => parts.join(''));

describe('scanPii properties', () => {
  it('never throws on arbitrary Unicode, and returns sorted, disjoint, in-bounds spans of known categories', () => {
    fc.assert(
      fc.property(messyText, (raw) => {
        for (const text of [raw, normalizeText(raw)]) expectWellFormed(text, scanPii(text));
      }),
      PARAMS,
    );
  });

  it('reports only enabled categories', () => {
    fc.assert(
      fc.property(messyText, fc.subarray([...PII_CATEGORIES]), (text, subset) => {
        const enabled = new Set<PiiCategory>(subset);
        expectWellFormed(text, scanPii(text, enabled), enabled);
      }),
      PARAMS,
    );
  });

  it('redaction replaces exactly the reported spans', () => {
    fc.assert(
      fc.property(messyText, (text) => {
        const spans = scanPii(text);
        let expected = '';
        let pos = 0;
        for (const s of spans) {
          expected += `${text.slice(pos, s.start)}[REDACTED:${s.category}]`;
          pos = s.end;
        }
        expect(redactPii(text, spans)).toBe(expected + text.slice(pos));
      }),
      PARAMS,
    );
  });

  it('redaction removes the value of every finding placed in ordinary text', () => {
    // Findings separated by at least one ordinary word (two numbers side by side can read as one).
    const words = fc.array(fc.constantFrom(...FILLER), { minLength: 1, maxLength: 3 }).map((w) => w.join(' '));
    const doc = fc.array(fc.tuple(words, fc.constantFrom(...FINDINGS.keys())), { minLength: 1, maxLength: 12 });
    fc.assert(
      fc.property(doc, words, (parts, last) => {
        const text = `${parts.map(([w, i]) => `${w} ${FINDINGS[i]![1]}`).join(' ')} ${last}`;
        const spans = scanPii(text);
        const redacted = redactPii(text, spans);
        for (const [, i] of parts) {
          const [category, , value] = FINDINGS[i]!;
          expect(redacted, category).not.toContain(value);
          expect(redacted).toContain(`[REDACTED:${category}]`);
        }
      }),
      PARAMS,
    );
  });
});

const SIZE = 100_000;
/** A 100 KB input repeating `unit`, optionally capped by `tail` (the character that makes a near miss fail late). */
const repeat = (unit: string, tail = ''): string => unit.repeat(Math.ceil(SIZE / unit.length)).slice(0, SIZE) + tail;

/** Inputs built to make a backtracking engine blow up on each detector's pattern: runs, separators and near misses. */
const ADVERSARIAL: Array<[string, string]> = [
  ['digits', repeat('1')],
  ['digits and spaces', repeat('1 ')],
  ['digits and dashes', repeat('1-')],
  ['digits and dots', repeat('1.')],
  ['digit groups', repeat('4111 ')],
  ['card-like run with a bad end', repeat('4111 1111 1111 111', 'x')],
  ['phone separators', repeat('(0) ')],
  ['plus signs', repeat('+1 ')],
  ['dots', repeat('.')],
  ['at signs', repeat('@')],
  ['letters', repeat('a')],
  ['letters then @', repeat('a', '@')],
  ['near-miss emails', repeat('a.b@c.')],
  ['email local parts', repeat('a@a@')],
  ['near-miss IPv4', repeat('1.1.1.')],
  ['long dotted quads', repeat('255.255.255.255.')],
  ['colons', repeat(':')],
  ['hex and colons', repeat('ff:')],
  ['double colons', repeat('1::')],
  ['near-miss URLs', repeat('http://')],
  ['URL with endless host', `https://${repeat('a.')}`],
  ['URL of brackets', `https://example.com/${repeat('()')}`],
  ['www', repeat('www.')],
  ['upper-case letters', repeat('A')],
  ['IBAN starts', repeat('DE89 ')],
  ['SWIFT-like words', repeat('DEUTDEFF')],
  ['base64-ish run', repeat('Ab3+/x9Z')],
  ['token separators', repeat('a-')],
  ['JWT starts', repeat('eyJ')],
  ['JWT-like dots', repeat('eyJhbGciOi.')],
  ['PEM headers without end', repeat('-----BEGIN PRIVATE KEY-----\n')],
  ['dashes', repeat('-')],
  ['handles', repeat('@a ')],
  ['street words', `1 ${repeat('Main ')}`],
  ['German street words', repeat('Hauptstraße ')],
  ['Turkish street words', repeat('Caddesi No: ')],
  ['keywords', repeat('passport born DOB SSN swift ')],
  ['dates after a keyword', `DOB ${repeat('12.12.')}`],
  ['mixed classes', repeat('a1A_')],
  ['non-Latin letters', repeat('ğüşİ')],
  ['lone surrogates', repeat('\uD800')],
  ['whitespace', repeat(' \n\t')],
  ['punctuation in URL hosts', repeat(`http://${',;'.repeat(140)}a `)],
  ['one token of separators', `a${repeat('-')}b`],
  ['base58 run', repeat('1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNb')],
  ['bech32 run', `bc1${repeat('q')}`],
  ['parentheses and plus signs', repeat('(+(')],
  ['passport keyword and codes', repeat('passport A1B2C3D4E5 ')],
  // Dense findings: every detector's validation runs thousands of times.
  ['emails', repeat('a@b.co ')],
  ['IPv6 addresses', repeat('2001:db8::1 ')],
  ['random tokens', repeat('Kz8fQ2mLx9Tb4RwJ7nVc3HpY ')],
  ['dates of birth', repeat('DOB 12.03.1985 ')],
  ['Turkish addresses', repeat('Gül Sokak No 5 ')],
];

describe('linear-time scanning', () => {
  const times: Array<[string, number]> = [];
  beforeAll(() => {
    // Let the JIT compile every detector first: cold, interpreted code is several times slower than a scan in service.
    const warm = FINDINGS.map(([, text]) => `${text} lorem ipsum`).join(' ').repeat(40);
    for (let i = 0; i < 5; i++) scanPii(warm);
  });
  afterAll(() => {
    const slowest = [...times].sort((a, b) => b[1] - a[1]).slice(0, 3);
    console.log(`adversarial 100 KB scans, slowest: ${slowest.map(([n, ms]) => `${n} ${ms.toFixed(1)} ms`).join(', ')}`);
  });

  it.each(ADVERSARIAL)('scans 100 KB of %s in under 100 ms', (name, text) => {
    // The better of two scans (see timing.ts): the first may include compiling a code path this input is the first to
    // reach, while catastrophic backtracking is slow every time.
    let spans: Span[] = [];
    const ms = fastestMs(() => (spans = scanPii(text)), 2);
    times.push([name, ms]);
    expectWellFormed(text, spans);
    expect(ms).toBeLessThan(100);
  });
});
