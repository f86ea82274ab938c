/**
 * Instructions per request: Waygate under valgrind's callgrind, which counts the instructions each thread executes
 * rather than timing them, so that a change of a few per cent shows although this shared VM's timings vary by more
 * than that between identical runs (bench/README.md, "instructions").
 *
 *   node --import tsx bench/instructions.ts [--against <git ref>] [--runs 3] [--warmup 8000] [--requests 8000] [--connections 8] [--functions 30]
 *     [--limits] [--redis redis://127.0.0.1:6379]
 *
 * Each run starts a fresh Waygate under callgrind with counting off (`--instr-atstart=no`), registers the benchmark
 * models against the fake upstream, sends `--warmup` non-stream chat requests at `--connections`, turns counting on
 * (`callgrind_control -i on`), sends `--requests` more, turns it off and dumps. Instructions per request are the
 * dump's totals over all threads divided by `--requests`; the main thread's share is shown apart (the others are
 * V8's compiler and GC helpers and libuv's pool), the least and the median of the runs. With `--against`, the given commit's src/ is built too (from a
 * temporary git worktree) and the two builds alternate run by run. With `--functions N`, node also writes a perf map
 * of its JIT code, and the N JavaScript functions that cost the most in each build's least run are listed, each with
 * the builtins and C++ it calls directly (bench/lib/callgrind.ts). With `--limits`, the calls are made with a token that
 * has a budget and a rate limit no call reaches (admission and settlement on four counters: requests and tokens a
 * minute, the day's tokens and cost), instead of the bootstrap token without limits; with `--redis`, Waygate keeps
 * its counters there (REDIS_URL), and the run's counters are removed afterwards (the login's attempt count expires by
 * itself). Needs `valgrind` (with `callgrind_control`).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { gateway, setupWaygate, WAYGATE_MODEL } from './inference.js';
import { createLimitedToken } from './lib/api.js';
import { functionCosts, readPerfMap, type FunctionCost } from './lib/callgrind.js';
import { loadedAmount, median } from './lib/measure.js';
import { cleanupsOnExit, wholeNumber } from './lib/options.js';
import { table } from './lib/report.js';
import { buildsToCompare, REPO_ROOT, startServer, type BenchServer } from './lib/server.js';
import { startUpstream, type UpstreamProcess } from './lib/upstream.js';
import { RedisCache } from '../src/platform/cache.js';
import { REDIS_KEY_PREFIX } from '../src/platform/redis.js';

interface Options {
  against: string | undefined;
  runs: number;
  /** How many functions to list per build (0: none, and no perf map). */
  functions: number;
  warmup: number;
  requests: number;
  connections: number;
  /** Calls with a token that has a budget and a rate limit. */
  limits: boolean;
  /** REDIS_URL for Waygate: counters, cache and notices in Redis. */
  redis: string | undefined;
}

function parse(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      against: { type: 'string' },
      runs: { type: 'string', default: '3' },
      functions: { type: 'string', default: '0' },
      warmup: { type: 'string', default: '8000' },
      requests: { type: 'string', default: '8000' },
      connections: { type: 'string', default: '8' },
      limits: { type: 'boolean', default: false },
      redis: { type: 'string' },
    },
  });
  return {
    against: values.against,
    runs: wholeNumber('runs', values.runs),
    functions: wholeNumber('functions', values.functions, 0),
    warmup: wholeNumber('warmup', values.warmup, 0),
    requests: wholeNumber('requests', values.requests),
    connections: wholeNumber('connections', values.connections),
    limits: values.limits,
    redis: values.redis,
  };
}

/** One build of Waygate to measure. */
interface Build {
  label: string;
  main: string;
}

interface Count {
  total: number;
  mainThread: number;
  /** The main thread's instructions by function, per request (with --functions). */
  functions: FunctionCost[];
}

/**
 * Callgrind's client, run with the server's HOST (startServer sets it to the address it listens on) and, like the
 * server, no USER: vgdb finds the process through a file named after both.
 */
function callgrindControl(server: BenchServer, ...args: string[]): void {
  execFileSync('callgrind_control', [...args, String(server.pid)], { env: { PATH: process.env.PATH, HOST: server.host }, stdio: 'ignore' });
}

/** Whether a dump file (`prefix`.<part>-<thread>) is the first thread's: the main one. */
const isMainThreadDump = (file: string) => /-0?1$/.test(file);

/** The instruction totals of the dumps written to `prefix`.<part>-<thread>: all threads, and the first (main) one. */
function countsOf(dir: string, prefix: string): Omit<Count, 'functions'> {
  let total = 0;
  let mainThread = 0;
  for (const file of fs.readdirSync(dir).filter((f) => f.startsWith(prefix))) {
    const text = fs.readFileSync(path.join(dir, file), 'utf8');
    const sum = Math.max(0, ...[...text.matchAll(/^(?:summary|totals): (\d+)/gm)].map((m) => Number(m[1])));
    total += sum;
    if (isMainThreadDump(file)) mainThread += sum;
  }
  return { total, mainThread };
}

/** A JIT function's name with its file relative to src/ or node_modules/. */
function shortName(name: string): string {
  return name
    .slice('JIT JS:'.length)
    .replace(/file:\/\/\S*?\.test-build\/[^/]+\//, 'src/')
    .replace(`${REPO_ROOT}/node_modules/`, '');
}

const perfMapOf = (pid: number) => path.join(os.tmpdir(), `perf-${pid}.map`);

/** The main thread's dump by function, per request. */
function mainThreadFunctions(dir: string, prefix: string, perfMap: string, requests: number): FunctionCost[] {
  const dump = fs.readdirSync(dir).find((f) => f.startsWith(prefix) && isMainThreadDump(f));
  if (!dump) return [];
  return functionCosts(path.join(dir, dump), readPerfMap(perfMap)).map((f) => ({ name: f.name, self: f.self / requests, withNatives: f.withNatives / requests }));
}

async function measure(build: Build, upstream: UpstreamProcess, opts: Options): Promise<Count> {
  const outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-callgrind-'));
  const prefix = 'callgrind.out';
  const launcher = ['valgrind', '--tool=callgrind', '--instr-atstart=no', '--separate-threads=yes', `--callgrind-out-file=${path.join(outDir, prefix)}`];
  // Start-up runs some ten times slower under valgrind, even with counting off.
  // Polling (WAYGATE_BUSY_POLL_US) off: it executes instructions for as long as the loop waits, which under valgrind
  // depends on timing, not on the work a request needs. The batch worker off for the same reason: it polls the
  // database on a timer, and under valgrind's slowdown its polls were up to 3 % of a request's count, more or less
  // as the machine was busier.
  const env: Record<string, string> = { WAYGATE_BUSY_POLL_US: '0', WAYGATE_BATCH_WORKER: 'false', ...(opts.redis ? { REDIS_URL: opts.redis } : {}) };
  // With --functions, node writes a perf map naming its JIT code (for callgrind it is only addresses); the V8 log
  // that flag also opens would land in the working directory.
  const nodeArgs = opts.functions > 0 ? ['--perf-basic-prof', '--no-logfile-per-isolate', '--logfile=/dev/null'] : [];
  const server = await startServer({ entry: 'tsx', mainFile: build.main, logLevel: 'info', cpus: null, env, nodeArgs, launcher, readyTimeoutMs: 600_000 });
  let limitedTokenId: string | undefined;
  try {
    const why = await setupWaygate(server, upstream);
    if (why) throw new Error(why);
    let bearer = server.token;
    if (opts.limits) {
      const token = await createLimitedToken(server);
      if (typeof token === 'string') throw new Error(token);
      limitedTokenId = token.id;
      bearer = token.value;
    }
    const target = gateway(build.label, server.host, server.port, server.pid, '/api/client/v1', { authorization: `Bearer ${bearer}` }, WAYGATE_MODEL).chat;
    if (opts.warmup > 0) await loadedAmount(server.baseUrl, target, opts.connections, opts.warmup);
    callgrindControl(server, '-i', 'on');
    await loadedAmount(server.baseUrl, target, opts.connections, opts.requests);
    callgrindControl(server, '-i', 'off');
    callgrindControl(server, '-d');
    const count = countsOf(outDir, prefix);
    const functions = opts.functions > 0 ? mainThreadFunctions(outDir, prefix, perfMapOf(server.pid), opts.requests) : [];
    return { total: count.total / opts.requests, mainThread: count.mainThread / opts.requests, functions };
  } finally {
    await server.stop();
    if (opts.redis && limitedTokenId) await removeCounters(opts.redis, limitedTokenId);
    fs.rmSync(outDir, { recursive: true, force: true });
    fs.rmSync(perfMapOf(server.pid), { force: true });
  }
}

/** Removes a token's rate-limit and budget counters from Redis (src/areas/limits: `rl:t:<id>:...`, `bg:t:<id>:...`). */
async function removeCounters(url: string, tokenId: string): Promise<void> {
  for (const kind of ['rl', 'bg']) {
    const cache = new RedisCache(url, `${REDIS_KEY_PREFIX}${kind}:t:${tokenId}:`);
    await cache.clearPrefix();
    await cache.close();
  }
}

export async function instructions(argv: string[]): Promise<void> {
  const opts = parse(argv);
  try {
    execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
  } catch {
    throw new Error('valgrind is not installed (Debian: apt-get install valgrind)');
  }
  const cleanups = cleanupsOnExit();
  try {
    const { current, against } = await buildsToCompare(opts.against, cleanups);
    const builds: Build[] = [...(against ? [against] : []), { label: 'this checkout', main: current }];
    const upstream = await startUpstream({ cpus: null, chunks: 8, holdChunkMs: 250 });
    cleanups.add(() => upstream.stop());
    process.stdout.write(`Instructions per non-stream chat request (callgrind), ${opts.requests} requests at concurrency ${opts.connections} after ${opts.warmup}\n`);
    const counts = new Map<string, Count[]>(builds.map((b) => [b.label, []]));
    for (let run = 1; run <= opts.runs; run++) {
      // Alternate which build goes first, so drift favours neither.
      for (const build of run % 2 === 1 ? builds : [...builds].reverse()) {
        const count = await measure(build, upstream, opts);
        counts.get(build.label)!.push(count);
        process.stdout.write(`run ${run}, ${build.label}: ${Math.round(count.total)} (main thread ${Math.round(count.mainThread)})\n`);
      }
    }
    // The least of the runs is the figure to compare: what varies between runs of one build (a major GC or a
    // re-optimisation landing in the counted window) only ever adds instructions.
    const least = (label: string, pick: (c: Count) => number) => Math.min(...counts.get(label)!.map(pick));
    const med = (label: string, pick: (c: Count) => number) => median(counts.get(label)!.map(pick));
    const show = (value: number) => Math.round(value).toLocaleString('en-US');
    const rows = builds.map((b) => [b.label, show(least(b.label, (c) => c.mainThread)), show(med(b.label, (c) => c.mainThread)), show(least(b.label, (c) => c.total)), show(med(b.label, (c) => c.total))]);
    process.stdout.write(`\n${table(['build', 'main thread, least', 'main thread, median', 'all threads, least', 'all threads, median'], rows)}\n`);
    if (opts.functions > 0) {
      for (const build of builds) {
        // From the build's run with the least main-thread count, as the table compares.
        const best = counts.get(build.label)!.reduce((a, b) => (b.mainThread < a.mainThread ? b : a));
        const rows = best.functions.filter((f) => f.name.startsWith('JIT JS:')).slice(0, opts.functions).map((f) => [show(f.withNatives), show(f.self), shortName(f.name)]);
        process.stdout.write(`\n${build.label}: JavaScript functions by instructions a request, with the natives each calls directly\n`);
        process.stdout.write(`${table(['with natives', 'own', 'function'], rows)}\n`);
      }
    }
    if (builds.length === 2) {
      const [a, b] = builds as [Build, Build];
      const ratio = (pick: (c: Count) => number) => (least(b.label, pick) / least(a.label, pick)).toFixed(3);
      process.stdout.write(`this checkout / ${a.label} (least of each): ${ratio((c) => c.mainThread)} on the main thread, ${ratio((c) => c.total)} in all\n`);
    }
  } finally {
    await cleanups.run();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  instructions(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`benchmark failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exit(1);
  });
}
