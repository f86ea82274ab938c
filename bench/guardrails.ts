/**
 * Guardrail engines in-process (issue 5): PII evaluation of a 2 KB text (normalise, scan, redact) with sub-millisecond
 * percentiles, PII scanning throughput in MB/s, and the built-in moderation and prompt shield per 2 KB text. Each is
 * also given as a ratio to a baseline measured in the same run: one `normalize('NFKC')` pass over the same text, the
 * cheapest thing any detector has to do.
 *
 *   node --import tsx bench/guardrails.ts [--iterations 10000] [--megabytes 16]
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { piiSpans, runGuardrail, type Judge } from '../src/areas/guardrails/engines.js';
import { classifyContent } from '../src/areas/guardrails/moderation.js';
import { normalizeText } from '../src/areas/guardrails/normalize.js';
import { detectInjection } from '../src/areas/guardrails/prompt-shield.js';
import type { GuardrailRecord } from '../src/areas/guardrails/store.js';
import { machine } from './lib/report.js';

const SENTENCES = [
  'Thanks for your order; it ships on Tuesday from our warehouse in Rotterdam.',
  'Please contact jane.doe@example.com or call +1 415 555 2671 if anything is missing.',
  'Version 10.0.19045.2846 fixed the login bug reported in ticket ORD-2024-118734.',
  'Pay the invoice to IBAN DE89 3704 0044 0532 0130 00 before the end of the month.',
  'The meeting moved to 14:30 in room 4.12; bring the Q3 numbers and the roadmap.',
  'Our API lives at https://api.example.org/v2/orders and answers within 120 ms.',
  'Card 4111 1111 1111 1111 was declined; try another card or PayPal.',
  'He lives at 221B Baker Street, London NW1 6XE, and works from home on Fridays.',
  'The commit 9fceb02d0ae598e95dc970b74767f19372d61af8 reverted the change to the parser.',
  'Summarise the attached article about gardening in three short bullet points.',
];

/** About 2 KB of sentences, a different mix for each seed. */
function document(seed: number, bytes = 2048): string {
  let text = '';
  for (let i = seed; text.length < bytes; i++) text += SENTENCES[(i * 7 + seed) % SENTENCES.length] + ' ';
  return text.slice(0, bytes);
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Per-call times in ms over `iterations` calls cycling through the texts, after a warm-up. */
function timeCalls(texts: string[], iterations: number, run: (text: string) => unknown): { p50: number; p99: number; mean: number } {
  for (let i = 0; i < Math.min(2000, iterations); i++) run(texts[i % texts.length]!);
  const times = new Float64Array(iterations);
  for (let i = 0; i < iterations; i++) {
    const start = performance.now();
    run(texts[i % texts.length]!);
    times[i] = performance.now() - start;
  }
  const sorted = Array.from(times).sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), mean: sorted.reduce((a, b) => a + b, 0) / sorted.length };
}

/** MB/s of `run` over `megabytes` of text in 64 KB documents. */
function throughput(megabytes: number, run: (text: string) => unknown): number {
  const docs = Array.from({ length: 16 }, (_, i) => document(i, 64 * 1024));
  const total = megabytes * 1024 * 1024;
  run(docs[0]!);
  const start = performance.now();
  let scanned = 0;
  for (let i = 0; scanned < total; i++) {
    run(docs[i % docs.length]!);
    scanned += docs[i % docs.length]!.length;
  }
  return scanned / 1024 / 1024 / ((performance.now() - start) / 1000);
}

const piiGuardrail: GuardrailRecord = {
  id: 'grd_bench', tenantId: 't', projectId: 'p', key: 'pii', name: 'pii', type: 'pii', action: 'redact', target: 'both', config: {},
  modelKey: null, failMode: 'closed', enabled: true, createdAt: 0, updatedAt: 0,
};
const noJudge: Judge = {
  chat: () => Promise.reject(new Error('offline')),
  moderate: () => Promise.reject(new Error('offline')),
};

const fmt = (n: number, digits = 3) => n.toFixed(digits);

export async function guardrailsBench(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { iterations: { type: 'string', default: '10000' }, megabytes: { type: 'string', default: '16' } }, allowPositionals: false });
  const iterations = Number(values.iterations);
  const megabytes = Number(values.megabytes);
  const m = machine();
  process.stdout.write(`Guardrail engines benchmark, ${m.date}\nMachine: ${m.nproc} CPUs (${m.cpuModel}), Node ${m.node}; load average ${m.loadAverage}\n\n`);
  const texts = Array.from({ length: 64 }, (_, i) => document(i));

  // runGuardrail is async only for the model-based engines; PII resolves at once, so time its synchronous part.
  let evaluated = 0;
  const baseline = timeCalls(texts, iterations, (text) => text.normalize('NFKC'));
  const piiEvaluate = timeCalls(texts, iterations, (text) => void runGuardrail(piiGuardrail, text, noJudge, []).then(() => evaluated++));
  await new Promise((resolve) => setImmediate(resolve));
  const moderation = timeCalls(texts, iterations, (text) => classifyContent(normalizeText(text)));
  const shield = timeCalls(texts, iterations, (text) => detectInjection(normalizeText(text), 'balanced'));
  const baselineRate = throughput(megabytes, (text) => text.normalize('NFKC'));
  const scanRate = throughput(megabytes, (text) => piiSpans(text));
  if (evaluated !== iterations + Math.min(2000, iterations)) throw new Error('not every PII evaluation finished');

  const rows: [string, string, string, string, string][] = [
    ['baseline: normalize(NFKC) of 2 KB', fmt(baseline.p50), fmt(baseline.p99), fmt(baseline.mean), '1.0'],
    ['PII evaluate (normalise, scan, redact) of 2 KB', fmt(piiEvaluate.p50), fmt(piiEvaluate.p99), fmt(piiEvaluate.mean), fmt(piiEvaluate.mean / baseline.mean, 1)],
    ['moderation (built in) of 2 KB', fmt(moderation.p50), fmt(moderation.p99), fmt(moderation.mean), fmt(moderation.mean / baseline.mean, 1)],
    ['prompt shield (balanced) of 2 KB', fmt(shield.p50), fmt(shield.p99), fmt(shield.mean), fmt(shield.mean / baseline.mean, 1)],
  ];
  process.stdout.write(`Per call, ${iterations.toLocaleString('en')} calls over 64 different 2 KB texts (ms)\n| | p50 | p99 | mean | mean / baseline |\n|:--|--:|--:|--:|--:|\n`);
  for (const row of rows) process.stdout.write(`| ${row.join(' | ')} |\n`);
  process.stdout.write(`\nThroughput over ${megabytes} MB in 64 KB documents\n| | MB/s | / baseline |\n|:--|--:|--:|\n`);
  process.stdout.write(`| baseline: normalize(NFKC) | ${fmt(baselineRate, 1)} | 1.0 |\n| PII scan (normalise with offsets + scan) | ${fmt(scanRate, 1)} | ${fmt(scanRate / baselineRate, 3)} |\n`);
  process.stdout.write(`\nGoals (issue 5)\n| goal | measured | |\n|:--|--:|:--|\n`);
  process.stdout.write(`| PII evaluate of a 2 KB text, p99 < 1 ms | ${fmt(piiEvaluate.p99)} ms | ${piiEvaluate.p99 < 1 ? 'met' : 'MISSED'} |\n`);
  process.stdout.write(`| PII scanning >= 20 MB/s | ${fmt(scanRate, 1)} MB/s | ${scanRate >= 20 ? 'met' : 'MISSED'} |\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  guardrailsBench(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`benchmark failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
