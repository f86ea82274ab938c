import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTestApp, type TestApp } from '../helpers/app.js';
import { MAX_MATCH_PATHS, matchPaths, validateExtraCategories } from '../../src/areas/guardrails/moderation.js';
import { createGuardrail, GUARDRAILS } from './support.js';

/** Patterns a fuzzer found accepted that take seconds to minutes on a 128-character segment of "a"s. */
const SLOW_PATTERNS: [string, string][] = [
  ['a chain of bounded repeats', '\\w{0,20}'.repeat(5) + '!'],
  ['many optional letters before bounded repeats', 'a?'.repeat(40) + 'a{20}a{20}'],
  ['many optional dots before bounded repeats', '.?'.repeat(60) + '.{20}.{20}!'],
  ['a chain of bounded repeats of one letter', 'a{0,20}'.repeat(25) + '!'],
  ['a chain of two-way alternatives', '(?:a|a)'.repeat(20) + '!'],
  ['a chain of optional alternatives', '(?:a|a)?'.repeat(20) + '!'],
  ['a repeated group around an alternation', '(?:(?:a|a)a)*!'],
];

/** Patterns that are cheap and must be accepted: a few choices, alternatives, word lists, or one long repeat. */
const ACCEPTED = [
  'project\\s+(?:falcon|eagle)',
  '[a-z]{2,20}\\s[a-z]{2,20}',
  '\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}',
  'acme\\s*corp(?:oration)?',
  '\\p{L}{2,5}x',
  '\\u{41}{2,5}',
  '\\bTCK-\\d{4}\\b',
  // Word lists: only one word of a list (or a word and the words it begins) can match at one place.
  'kill(?:s|ed|ing|er)?\\W+(?:you|him|her|them)',
  '\\b(?:kill|murder|maim|stab|shoot|strangle|poison|behead|torture)\\w*\\b',
  '\\b(?:kill|murder|stab|shoot|strangle|poison|behead|torture|execute)\\w*\\b',
  '(?:acme|acme\\.com|acme\\.co\\.uk)\\W{1,3}(?:password|passwd|pwd)\\s*[:=]',
];

function accepts(pattern: string): boolean {
  try {
    validateExtraCategories([{ name: 'x', terms: [], patterns: [pattern] }]);
    return true;
  } catch {
    return false;
  }
}

describe('extra-category pattern safety', () => {
  it.each(SLOW_PATTERNS)('refuses %s, naming the problem', (_, pattern) => {
    expect(() => validateExtraCategories([{ name: 'x', terms: [], patterns: [pattern] }])).toThrow(/too many ways to match/);
  });

  it('accepts patterns with a few choices, alternatives, word lists or one long repeat', () => {
    for (const pattern of ACCEPTED) expect(accepts(pattern), pattern).toBe(true);
  });

  it('reads a quantifier bound written with leading zeros as the engine does', () => {
    // The engine reads {1,0000000000000000000009} as {1,9}: (a+){1,9}$ backtracks exponentially.
    for (const pattern of ['(a+){1,0000000000000000000009}$', '(a+){0009}', '(a+){1,00000000000000000000000000020}', `(a+){1,${'0'.repeat(150)}2}`]) {
      expect(() => validateExtraCategories([{ name: 'x', terms: [], patterns: [pattern] }]), pattern).toThrow(/nested quantifiers/);
    }
    expect(() => validateExtraCategories([{ name: 'x', terms: [], patterns: [`a{0,${'0'.repeat(24)}21}b+`] }])).toThrow(/at most 1 long repeat/);
    expect(() => validateExtraCategories([{ name: 'x', terms: [], patterns: [`\\w{0,${'0'.repeat(20)}20}`.repeat(5) + '!'] }])).toThrow(/too many ways to match/);
    expect(matchPaths(`a{0,${'0'.repeat(30)}9}`)).toBe(10);
  });

  it('counts an alternation of plain literals by its longest chain of prefixes, compared case-insensitively', () => {
    expect(matchPaths('(?:you|him|her|them)')).toBe(1);
    expect(matchPaths('(?:kill|killer|killers|murder)')).toBe(3);
    expect(matchPaths('kill|killer')).toBe(2);
    // Two equal literals, or equal after case folding: one is a prefix of the other.
    expect(matchPaths('(?:a|a)')).toBe(2);
    expect(matchPaths('(?:A|a)')).toBe(2);
    expect(matchPaths('(?:\u017f|s)')).toBe(2); // the long s folds to s under the "i" flag
    expect(matchPaths('(?:|a)')).toBe(2);
    expect(matchPaths('(?<word>a|a)')).toBe(2);
    // An escaped syntax character is a literal character; "." is not.
    expect(matchPaths('(?:a\\.|a\\.b|a\\.c)')).toBe(2);
    expect(matchPaths('(?:ab|a\\.b)')).toBe(1);
    expect(matchPaths('(?:ab|a.b)')).toBe(2);
    // A class, an escape class, an anchor, a quantifier or a group in any alternative: every alternative counts.
    for (const pattern of ['(?:ab|[c])', '(?:ab|\\w)', '(?:ab|\\bc)', '(?:ab|c$)', '(?:ab|^c)', '(?:ab|c{1})', '(?:ab|(?:c))', '(?:ab|\\x41)']) {
      expect(matchPaths(pattern), pattern).toBe(2);
    }
    expect(matchPaths('(?:ab|c?)')).toBe(3);
    expect(matchPaths('(?:a|b)?')).toBe(2);
    expect(matchPaths('(?:a|aa)?')).toBe(3);
  });

  it('runs every accepted example on adversarial 128-character segments, each within the bound', () => {
    const examples = [...ACCEPTED, ...SLOW_PATTERNS.map(([, pattern]) => pattern).filter(accepts)];
    const segments = ['a', ' ', '1', '1.', 'kill ', 'kill', 'acme.', 'TCK-1', 'x'].flatMap((unit) => {
      const run = unit.repeat(Math.ceil(128 / unit.length)).slice(0, 128);
      return [run, run.slice(0, 127) + '\u0000'];
    });
    segments.push('kill' + ' '.repeat(124), 'acme' + ' '.repeat(120) + 'pwd:', 'project' + ' '.repeat(121));
    for (const pattern of examples) {
      expect(matchPaths(pattern), pattern).toBeLessThanOrEqual(MAX_MATCH_PATHS);
      const regex = new RegExp(pattern, 'iu');
      for (const segment of segments) {
        expect(segment.length).toBe(128);
        regex.exec(segment); // finishes: at most MAX_MATCH_PATHS paths from each of 128 positions
      }
    }
  });
});

// ---------------------------------------------------------------- the bound, checked on generated patterns

/** A pattern as a tree: what it is made of decides how many paths a backtracking match can try from one position. */
type Node =
  | { kind: 'atom'; source: string }
  | { kind: 'seq'; items: Node[] }
  | { kind: 'alt'; options: Node[] }
  | { kind: 'repeat'; body: Node; min: number; max: number; source: string };

const SEGMENT = 128;

/** Atoms that match one fixed character, and the character, case-folded ("\\." is a literal dot). */
const LITERAL_ATOMS: Readonly<Record<string, string>> = { a: 'a', A: 'a', b: 'b', '!': '!', '\\.': '.' };

/** The text an alternative matches if it is a plain literal (a sequence of fixed characters), else null. */
function literalText(node: Node): string | null {
  if (node.kind !== 'seq') return null;
  let text = '';
  for (const item of node.items) {
    if (item.kind !== 'atom' || LITERAL_ATOMS[item.source] === undefined) return null;
    text += LITERAL_ATOMS[item.source];
  }
  return text;
}

/** The longest chain of texts each a prefix of the next (equal texts too: one is a prefix of the other). */
function longestPrefixChain(texts: string[]): number {
  const sorted = [...texts].sort((x, y) => x.length - y.length);
  const chain = sorted.map(() => 1);
  for (let j = 0; j < sorted.length; j++) for (let k = 0; k < j; k++) if (sorted[j]!.startsWith(sorted[k]!)) chain[j] = Math.max(chain[j]!, chain[k]! + 1);
  return Math.max(...chain);
}

/**
 * Paths from one position: a sequence multiplies, alternatives add, a repeat sums over its repeat counts. Alternatives
 * that are all plain literals can only match at one place through literals each a prefix of the next: they count by
 * the longest such chain.
 */
function paths(node: Node): number {
  switch (node.kind) {
    case 'atom':
      return 1;
    case 'seq':
      return node.items.reduce((product, item) => product * paths(item), 1);
    case 'alt': {
      const texts = node.options.map(literalText);
      if (texts.every((text) => text !== null)) return longestPrefixChain(texts as string[]);
      return node.options.reduce((sum, option) => sum + paths(option), 0);
    }
    case 'repeat': {
      const body = paths(node.body);
      let sum = 0;
      for (let count = node.min; count <= Math.min(node.max, SEGMENT); count++) sum += body ** count;
      return Math.max(1, sum);
    }
  }
}

function source(node: Node): string {
  switch (node.kind) {
    case 'atom':
      return node.source;
    case 'seq':
      return node.items.map((item) => (item.kind === 'alt' ? `(?:${source(item)})` : source(item))).join('');
    case 'alt':
      return node.options.map(source).join('|');
    case 'repeat':
      return `${node.body.kind === 'atom' ? source(node.body) : `(?:${source(node.body)})`}${node.source}`;
  }
}

const atom = fc.constantFrom('a', 'A', 'b', '!', '\\.', '[ab]', '\\w', '\\d', '.', '\\s').map((s): Node => ({ kind: 'atom', source: s }));
const quantifier = fc.oneof(
  fc.constantFrom({ min: 0, max: 1, source: '?' }, { min: 0, max: Infinity, source: '*' }, { min: 1, max: Infinity, source: '+' }),
  fc.tuple(fc.nat({ max: 30 }), fc.nat({ max: 30 })).map(([a, b]) => ({ min: Math.min(a, b), max: Math.max(a, b), source: `{${Math.min(a, b)},${Math.max(a, b)}}` })),
);
const { pattern } = fc.letrec<{ pattern: Node; item: Node; alt: Node }>((tie) => ({
  pattern: fc.array(tie('item'), { minLength: 1, maxLength: 8 }).map((items): Node => ({ kind: 'seq', items })),
  item: fc.oneof(
    { arbitrary: atom, weight: 4 },
    { arbitrary: fc.tuple(fc.oneof(atom, tie('pattern'), tie('alt')), quantifier).map(([body, q]): Node => ({ kind: 'repeat', body, ...q })), weight: 4, depthSize: 'small' },
    { arbitrary: tie('alt'), weight: 1 },
  ),
  alt: fc.array(tie('pattern'), { minLength: 2, maxLength: 3 }).map((options): Node => ({ kind: 'alt', options })),
}));

/** What the other rules refuse: a repeated group holding a quantifier or alternatives, and a second long repeat. */
function breaksOtherRules(node: Node): boolean {
  const repeats: Extract<Node, { kind: 'repeat' }>[] = [];
  const collect = (n: Node): void => {
    if (n.kind === 'repeat') repeats.push(n);
    if (n.kind === 'seq') n.items.forEach(collect);
    if (n.kind === 'alt') n.options.forEach(collect);
    if (n.kind === 'repeat') collect(n.body);
  };
  collect(node);
  const holdsQuantifier = (n: Node): boolean => n.kind === 'repeat' || (n.kind === 'seq' && n.items.some(holdsQuantifier)) || (n.kind === 'alt' && n.options.some(holdsQuantifier));
  const nested = repeats.some((r) => r.max > 1 && (holdsQuantifier(r.body) || r.body.kind === 'alt'));
  return nested || repeats.filter((r) => r.max > 20).length > 1;
}

describe('extra-category pattern bound (property)', () => {
  it(`accepts a pattern only if a match from one position has at most ${MAX_MATCH_PATHS} paths, and every such pattern the other rules allow`, () => {
    fc.assert(
      fc.property(pattern, (tree) => {
        const text = source(tree);
        fc.pre(text.length <= 200);
        const bound = paths(tree);
        expect(accepts(text), `${text}: ${bound} paths`).toBe(bound <= MAX_MATCH_PATHS && !breaksOtherRules(tree));
      }),
      { numRuns: 3000 },
    );
  });
});

// ---------------------------------------------------------------- the API

describe('extra-category patterns over the API', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend: 'sqlite' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const withPattern = (pattern: string) => ({ extraCategories: [{ name: 'tickets', terms: [], patterns: [pattern] }] });

  it('refuses a slow pattern with 400 on create and on update', async () => {
    const slow = '\\w{0,20}'.repeat(5) + '!';
    const created = await createGuardrail(t, { key: 'slow', type: 'moderation', config: withPattern(slow) });
    expect(created.statusCode, created.body).toBe(400);
    expect(created.json().error.message).toMatch(/config\.extraCategories: .*pattern 1: too many ways to match/);

    const ok = await createGuardrail(t, { key: 'tickets', type: 'moderation', config: withPattern('\\bTCK-\\d{4}\\b') });
    expect(ok.statusCode, ok.body).toBe(201);
    const patched = await call(t.app, t.adminSession, { method: 'PATCH', url: `${GUARDRAILS}/tickets`, payload: { config: withPattern(slow) } });
    expect(patched.statusCode, patched.body).toBe(400);
    expect(patched.json().error.message).toMatch(/too many ways to match/);
  });
});
