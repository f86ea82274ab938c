import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTestApp, type TestApp } from '../helpers/app.js';
import { MAX_MATCH_PATHS, validateExtraCategories } from '../../src/areas/guardrails/moderation.js';
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

  it('accepts patterns with a few choices, alternatives or one long repeat', () => {
    for (const pattern of ['project\\s+(?:falcon|eagle)', '[a-z]{2,20}\\s[a-z]{2,20}', '\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}', 'acme\\s*corp(?:oration)?', '\\p{L}{2,5}x', '\\u{41}{2,5}']) {
      expect(accepts(pattern), pattern).toBe(true);
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

/** Paths from one position: a sequence multiplies, alternatives add, a repeat sums over its repeat counts. */
function paths(node: Node): number {
  switch (node.kind) {
    case 'atom':
      return 1;
    case 'seq':
      return node.items.reduce((product, item) => product * paths(item), 1);
    case 'alt':
      return node.options.reduce((sum, option) => sum + paths(option), 0);
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

const atom = fc.constantFrom('a', 'b', '!', '[ab]', '\\w', '\\d', '.', '\\s').map((s): Node => ({ kind: 'atom', source: s }));
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
