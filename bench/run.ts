/**
 * `npm run bench`: every benchmark in bench/, one after the other (auth-overhead, inference, analytics, batches,
 * guardrails).
 *
 *   npm run bench                                  # all, default options
 *   npm run bench -- --rounds 1 --no-pin           # all; options go to every benchmark (use the ones both know)
 *   npm run bench -- inference --memory-requests 0 # only the named benchmark, with its own options
 *   npm run bench -- instructions --against HEAD~1 # callgrind's count, run by name only (needs valgrind)
 *   npm run bench -- streams --against HEAD~1      # CPU a stream against the floor, run by name only
 */
import { analyticsBench } from './analytics.js';
import { authOverhead } from './auth-overhead.js';
import { batchesBench } from './batches.js';
import { guardrailsBench } from './guardrails.js';
import { inference } from './inference.js';
import { instructions } from './instructions.js';
import { streams } from './streams.js';

const benchmarks: Record<string, (argv: string[]) => Promise<void>> = { 'auth-overhead': authOverhead, inference, analytics: analyticsBench, batches: batchesBench, guardrails: guardrailsBench };
/** Run only when named: an A/B tool for changes, not a figure of an issue. */
const byNameOnly: Record<string, (argv: string[]) => Promise<void>> = { instructions, streams };

async function main(argv: string[]): Promise<void> {
  const [first, ...rest] = argv;
  if (first !== undefined && !first.startsWith('-')) {
    const run = benchmarks[first] ?? byNameOnly[first];
    if (!run) throw new Error(`unknown benchmark ${first}; one of: ${[...Object.keys(benchmarks), ...Object.keys(byNameOnly)].join(', ')}`);
    await run(rest);
    return;
  }
  for (const [name, run] of Object.entries(benchmarks)) {
    process.stdout.write(`\n=== ${name} ===\n`);
    await run(argv);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`benchmark failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
