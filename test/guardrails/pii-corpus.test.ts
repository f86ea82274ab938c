import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { normalizeText } from '../../src/areas/guardrails/normalize.js';
import { CHECKSUM_CATEGORIES, PII_CATEGORIES, scanPii, type PiiCategory } from '../../src/areas/guardrails/pii.js';

/**
 * The labelled corpus: one `{ text, pii }` per line, `pii` being every category that must be found in `text` ([] for
 * a negative). A category counts as found in a snippet when any span of it is reported, so a report of a category
 * the label lacks is a false positive, and a labelled category not reported is a false negative.
 */
interface Snippet {
  text: string;
  pii: PiiCategory[];
}

const CORPUS: Snippet[] = readFileSync(new URL('../fixtures/guardrails/pii-corpus.jsonl', import.meta.url), 'utf8')
  .split('\n')
  .filter((line) => line.trim() !== '')
  .map((line) => JSON.parse(line) as Snippet);

const CHECKSUM: ReadonlySet<string> = new Set(CHECKSUM_CATEGORIES);
const MIN_CHECKSUM = 0.97;
const MIN_OTHER = 0.9;

interface Score {
  tp: number;
  fp: number;
  fn: number;
}

function score(): { scores: Map<PiiCategory, Score>; misses: string[] } {
  const scores = new Map<PiiCategory, Score>(PII_CATEGORIES.map((c) => [c, { tp: 0, fp: 0, fn: 0 }]));
  const misses: string[] = [];
  for (const { text, pii } of CORPUS) {
    const normalized = normalizeText(text);
    const spans = scanPii(normalized);
    const reported = new Set(spans.map((s) => s.category));
    for (const category of PII_CATEGORIES) {
      const s = scores.get(category)!;
      const want = pii.includes(category);
      const got = reported.has(category);
      if (want && got) s.tp++;
      else if (got) {
        s.fp++;
        const values = spans.filter((sp) => sp.category === category).map((sp) => normalized.slice(sp.start, sp.end));
        misses.push(`false ${category}: ${JSON.stringify(text)} -> ${JSON.stringify(values)}`);
      } else if (want) {
        s.fn++;
        misses.push(`missed ${category}: ${JSON.stringify(text)}`);
      }
    }
  }
  return { scores, misses };
}

const ratio = (n: number, d: number): number => (d === 0 ? 1 : n / d);

describe('PII corpus', () => {
  it('is large and labels every category several times, with plenty of negatives', () => {
    expect(CORPUS.length).toBeGreaterThanOrEqual(450);
    for (const category of PII_CATEGORIES) {
      expect(CORPUS.filter((s) => s.pii.includes(category)).length, category).toBeGreaterThanOrEqual(15);
    }
    for (const s of CORPUS) for (const c of s.pii) expect(PII_CATEGORIES, s.text).toContain(c);
    expect(CORPUS.filter((s) => s.pii.length === 0).length).toBeGreaterThanOrEqual(150);
  });

  it('meets precision and recall: 0.97 for checksum categories, 0.90 for the others', () => {
    const { scores, misses } = score();
    const rows = PII_CATEGORIES.map((category) => {
      const s = scores.get(category)!;
      const precision = ratio(s.tp, s.tp + s.fp);
      const recall = ratio(s.tp, s.tp + s.fn);
      const min = CHECKSUM.has(category) ? MIN_CHECKSUM : MIN_OTHER;
      return { category, ...s, precision, recall, min };
    });
    const table = [
      `PII corpus: ${CORPUS.length} snippets`,
      'category         positives  tp  fp  fn  precision  recall  minimum',
      ...rows.map((r) =>
        [r.category.padEnd(16), String(r.tp + r.fn).padStart(9), String(r.tp).padStart(3), String(r.fp).padStart(3), String(r.fn).padStart(3),
          r.precision.toFixed(3).padStart(10), r.recall.toFixed(3).padStart(7), r.min.toFixed(2).padStart(8)].join(' '),
      ),
      ...misses,
    ];
    console.log(table.join('\n'));
    for (const r of rows) {
      expect(r.precision, `${r.category} precision`).toBeGreaterThanOrEqual(r.min);
      expect(r.recall, `${r.category} recall`).toBeGreaterThanOrEqual(r.min);
    }
  });
});
