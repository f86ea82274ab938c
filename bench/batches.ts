/**
 * Batch benchmark (issue 4): creating a 10,000-line batch, running batches against a fake OpenAI-compatible upstream
 * (at once and with 200 ms of upstream latency), and the memory the JSONL results stream takes, each against a
 * baseline measured in the same run.
 *
 *   node --import tsx bench/batches.ts [--items 10000] [--create-rounds 5] [--concurrency 32] [--latency-items 4000]
 *        [--latency-ms 200] [--latency-concurrency 64] [--memory-rounds 3] [--warmup-items 1000] [--parts create,run,memory,latency]
 *        [--entry build|tsx|dist] [--database postgres://...] [--log-level info] [--cpu-prof <dir>] [--json <file>] [--no-pin]
 *
 * `--rounds N` sets both --create-rounds and --memory-rounds (for `npm run bench -- --rounds N`).
 *
 * Every part gets its own Waygate (the batch worker's settings are environment variables): `create` one with
 * WAYGATE_BATCH_WORKER=false, `run` and `memory` one with WAYGATE_BATCH_CONCURRENCY=--concurrency, `latency` one with
 * WAYGATE_BATCH_CONCURRENCY=--latency-concurrency. CPU 0: Waygate (`taskset -c 0`). CPU 1: the fake upstreams and
 * this process. Only when taskset exists and there are at least 2 CPUs.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { registerModels, requestJson } from './lib/api.js';
import { summarise } from './lib/cpuprofile.js';
import { concurrentAmount, median, type Target } from './lib/measure.js';
import { cleanupsOnExit, entryOption, wholeNumber, type Entry } from './lib/options.js';
import { int, machine, ms, pinSelf, sourceVersion, table } from './lib/report.js';
import { foreignLoad, hasTaskset, memoryMbOf, settle, startServer, transpileSources, type BenchServer } from './lib/server.js';
import { startUpstream, UPSTREAM_API_KEY, type UpstreamProcess, type UpstreamStats } from './lib/upstream.js';

const PARTS = ['create', 'run', 'memory', 'latency'] as const;
type Part = (typeof PARTS)[number];

interface Options {
  items: number;
  createRounds: number;
  concurrency: number;
  latencyItems: number;
  latencyMs: number;
  latencyConcurrency: number;
  memoryRounds: number;
  warmupItems: number;
  pollMs: number;
  sampleMs: number;
  timeoutSeconds: number;
  parts: Part[];
  entry: Entry;
  database: string | undefined;
  logLevel: string;
  cpuProf: string | undefined;
  json: string | undefined;
  pin: boolean;
}

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      items: { type: 'string', default: '10000' },
      rounds: { type: 'string' },
      'create-rounds': { type: 'string' },
      concurrency: { type: 'string', default: '32' },
      'latency-items': { type: 'string', default: '4000' },
      'latency-ms': { type: 'string', default: '200' },
      'latency-concurrency': { type: 'string', default: '64' },
      'memory-rounds': { type: 'string' },
      'warmup-items': { type: 'string', default: '1000' },
      'poll-ms': { type: 'string', default: '50' },
      'sample-ms': { type: 'string', default: '20' },
      timeout: { type: 'string', default: '900' },
      parts: { type: 'string', default: PARTS.join(',') },
      entry: { type: 'string', default: 'build' },
      database: { type: 'string' },
      'log-level': { type: 'string', default: 'info' },
      'cpu-prof': { type: 'string' },
      json: { type: 'string' },
      'no-pin': { type: 'boolean', default: false },
    },
  });
  const parts = (values.parts ?? '').split(',').map((p) => p.trim().toLowerCase()).filter(Boolean);
  for (const p of parts) if (!(PARTS as readonly string[]).includes(p)) throw new Error(`--parts: unknown part ${p}; one of ${PARTS.join(', ')}`);
  return {
    items: wholeNumber('items', values.items),
    createRounds: wholeNumber('create-rounds', values['create-rounds'] ?? values.rounds ?? '5'),
    concurrency: wholeNumber('concurrency', values.concurrency),
    latencyItems: wholeNumber('latency-items', values['latency-items']),
    latencyMs: wholeNumber('latency-ms', values['latency-ms']),
    latencyConcurrency: wholeNumber('latency-concurrency', values['latency-concurrency']),
    memoryRounds: wholeNumber('memory-rounds', values['memory-rounds'] ?? values.rounds ?? '3'),
    warmupItems: wholeNumber('warmup-items', values['warmup-items'], 0),
    pollMs: wholeNumber('poll-ms', values['poll-ms']),
    sampleMs: wholeNumber('sample-ms', values['sample-ms']),
    timeoutSeconds: wholeNumber('timeout', values.timeout),
    parts: parts as Part[],
    entry: entryOption(values.entry, ['build', 'tsx', 'dist']),
    database: values.database,
    logLevel: values['log-level'] ?? 'info',
    cpuProf: values['cpu-prof'],
    json: values.json,
    pin: !values['no-pin'],
  };
}

const write = (text = '') => process.stdout.write(`${text}\n`);
const fixed = (digits: number) => (v: number) => (Number.isFinite(v) ? v.toFixed(digits) : '-');
const verdict = (ok: boolean | null) => (ok === null ? 'n/a' : ok ? 'met' : 'MISSED');

/** The upstream's model name; every part registers its own Waygate key for it (one PostgreSQL database serves all parts). */
const UPSTREAM_MODEL = 'bench-model';
const MODEL_KEY = { create: 'bench-create', run: 'bench-run', latency: 'bench-slow' };
const BATCHES = '/api/client/v1/batches';

/** The create body as bytes: `count` inline chat lines `{ custom_id: '<prefix><i>', body }` (serialised once, outside any timing). */
function createBody(model: string, count: number, prefix: string): Buffer {
  const requests = Array.from({ length: count }, (_, i) => ({
    custom_id: `${prefix}${i}`,
    body: { model, messages: [{ role: 'user', content: `Item ${i}: say hello in one short sentence.` }] },
  }));
  return Buffer.from(JSON.stringify({ endpoint: '/v1/chat/completions', requests }));
}

interface BatchView {
  id: string;
  status: string;
  request_counts: { total: number; completed: number; failed: number; cancelled: number };
  created_at: number;
  completed_at: number | null;
}

/** A Waygate of one part, with the keep-alive agent and bootstrap token the benchmark's calls use. */
interface Instance {
  server: BenchServer;
  agent: http.Agent;
  auth: Record<string, string>;
  call(method: string, urlPath: string, body?: unknown): ReturnType<typeof requestJson>;
}

function instance(server: BenchServer): Instance {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  const auth = { authorization: `Bearer ${server.token}` };
  return {
    server,
    agent,
    auth,
    call: (method, urlPath, body) => requestJson(server.host, server.port, method, urlPath, auth, body, { agent, timeoutMs: 120_000 }),
  };
}

/** POST /batches; resolves when the 201 has arrived, with the time from just before sending. */
async function createBatch(w: Instance, body: Buffer, expected: number): Promise<{ batch: BatchView; ms: number; at: number }> {
  const t0 = performance.now();
  const reply = await w.call('POST', BATCHES, body);
  const at = performance.now();
  const batch = reply.body as BatchView | undefined;
  if (reply.status !== 201 || !batch?.id) throw new Error(`POST ${BATCHES} answered ${reply.status}: ${reply.text.slice(0, 300)}`);
  if (batch.request_counts.total !== expected) throw new Error(`the new batch has ${batch.request_counts.total} items, expected ${expected}`);
  return { batch, ms: at - t0, at };
}

async function upstreamStats(upstream: UpstreamProcess): Promise<UpstreamStats> {
  const reply = await requestJson('127.0.0.1', upstream.port, 'GET', '/stats', {});
  if (reply.status !== 200) throw new Error(`upstream GET /stats answered ${reply.status} (started without --track?)`);
  return reply.body as UpstreamStats;
}

interface RunResult {
  batchId: string;
  items: number;
  /** Create request to 201 for this batch. */
  createMs: number;
  /** From the 201 to the first poll that saw `completed`. */
  seconds: number;
  itemsPerSecond: number;
  /** Between the polls that first saw 10 % and 90 % of the items finished. */
  steadyItemsPerSecond: number;
  /** Until the first finished item was seen. */
  firstItemSeconds: number;
  /** completed_at - created_at as the API reports them (whole seconds). */
  apiSeconds: number;
  serverCpuSeconds: number;
  cpuMsPerItem: number;
  serverBusy: number;
  upstreamRequests: number;
  upstreamMeanInFlight: number;
  upstreamMaxInFlightSeen: number;
  failed: number;
  foreignCpus: number;
  trace: { t: number; done: number }[];
}

/**
 * Creates a batch of `count` lines and polls GET /batches/{id} every pollMs until it is `completed`. Also samples the
 * upstream's calls in flight on every poll.
 */
async function runBatch(opts: Options, w: Instance, upstream: UpstreamProcess, model: string, count: number, prefix: string, ownPids: () => number[]): Promise<RunResult> {
  const body = createBody(model, count, prefix);
  const foreign = foreignLoad(ownPids);
  const stats0 = await upstreamStats(upstream);
  const created = await createBatch(w, body, count);
  const cpu0 = w.server.cpuSeconds();
  const trace: { t: number; done: number }[] = [];
  let maxInFlight = 0;
  let batch = created.batch;
  const deadline = created.at + opts.timeoutSeconds * 1000;
  for (;;) {
    const [reply, stats] = await Promise.all([w.call('GET', `${BATCHES}/${batch.id}`), upstreamStats(upstream)]);
    const now = performance.now();
    if (reply.status !== 200) throw new Error(`GET batch answered ${reply.status}: ${reply.text.slice(0, 300)}`);
    batch = reply.body as BatchView;
    maxInFlight = Math.max(maxInFlight, stats.inFlight);
    const counts = batch.request_counts;
    trace.push({ t: (now - created.at) / 1000, done: counts.completed + counts.failed + counts.cancelled });
    if (batch.status === 'completed') break;
    if (batch.status !== 'in_progress') throw new Error(`batch ${batch.id} ended ${batch.status}: ${reply.text.slice(0, 300)}`);
    if (now > deadline) throw new Error(`batch ${batch.id} not completed after ${opts.timeoutSeconds} s: ${JSON.stringify(counts)}`);
    await sleep(opts.pollMs);
  }
  const seconds = trace.at(-1)!.t;
  const cpu = w.server.cpuSeconds() - cpu0;
  const stats1 = await upstreamStats(upstream);
  // Against a healthy upstream every item succeeds on its first and only call.
  if (batch.request_counts.completed !== count) throw new Error(`batch ${batch.id} completed with ${JSON.stringify(batch.request_counts)}, expected ${count} succeeded`);
  if (stats1.requests - stats0.requests !== count) throw new Error(`the upstream got ${stats1.requests - stats0.requests} calls for ${count} items`);
  const when = (share: number) => trace.find((p) => p.done >= share * count)?.t ?? Number.NaN;
  const t10 = when(0.1);
  const t90 = when(0.9);
  return {
    batchId: batch.id,
    items: count,
    createMs: created.ms,
    seconds,
    itemsPerSecond: count / seconds,
    steadyItemsPerSecond: t90 > t10 ? (0.8 * count) / (t90 - t10) : Number.NaN,
    firstItemSeconds: trace.find((p) => p.done > 0)?.t ?? Number.NaN,
    apiSeconds: (batch.completed_at ?? Number.NaN) - batch.created_at,
    serverCpuSeconds: cpu,
    cpuMsPerItem: (cpu / count) * 1000,
    serverBusy: cpu / seconds,
    upstreamRequests: stats1.requests - stats0.requests,
    upstreamMeanInFlight: (stats1.busyMs - stats0.busyMs) / 1000 / seconds,
    upstreamMaxInFlightSeen: maxInFlight,
    failed: batch.request_counts.failed,
    foreignCpus: foreign(),
    trace,
  };
}

interface DirectResult {
  requests: number;
  seconds: number;
  rps: number;
  /** Latency of one call, ms. */
  p50: number;
  p99: number;
}

/** The same upstream called directly from this process: `amount` chat calls, `connections` at a time. */
async function direct(upstream: UpstreamProcess, connections: number, amount: number): Promise<DirectResult> {
  const target: Target = {
    label: 'direct chat',
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${UPSTREAM_API_KEY}` },
    body: JSON.stringify({ model: UPSTREAM_MODEL, messages: [{ role: 'user', content: 'Item 0: say hello in one short sentence.' }] }),
    expectStatus: 200,
  };
  const sample = await concurrentAmount('127.0.0.1', upstream.port, target, connections, amount);
  return { requests: sample.requests, seconds: sample.seconds, rps: sample.rps, p50: sample.p50, p99: sample.p99 };
}

interface CreateResult {
  lines: number;
  payloadMb: number;
  roundsMs: number[];
  cpuMs: number[];
  medianMs: number;
  medianCpuMs: number;
  rssAfterMb: number;
  foreignCpus: number;
}

async function measureCreate(opts: Options, w: Instance, ownPids: () => number[]): Promise<CreateResult> {
  const body = createBody(MODEL_KEY.create, opts.items, 'c');
  write(`create: ${int(opts.items)} inline lines, ${(body.length / 2 ** 20).toFixed(2)} MB of JSON; 1 discarded warm-up, then ${opts.createRounds} rounds`);
  const created: string[] = [];
  created.push((await createBatch(w, body, opts.items)).batch.id);
  await settle([w.server.pid]);
  const roundsMs: number[] = [];
  const cpuMs: number[] = [];
  const foreign = foreignLoad(ownPids);
  for (let round = 1; round <= opts.createRounds; round++) {
    const cpu0 = w.server.cpuSeconds();
    const r = await createBatch(w, body, opts.items);
    cpuMs.push((w.server.cpuSeconds() - cpu0) * 1000);
    roundsMs.push(r.ms);
    created.push(r.batch.id);
    write(`create round ${round}/${opts.createRounds}: ${ms(r.ms)} ms to the 201, server CPU ${cpuMs.at(-1)!.toFixed(0)} ms`);
    await settle([w.server.pid]);
  }
  const foreignCpus = foreign();
  const rssAfterMb = memoryMbOf(w.server.pid);
  // The worker is off here; cancelled, so that no later part's worker (on a shared PostgreSQL database) runs them.
  for (const id of created) {
    const reply = await w.call('POST', `${BATCHES}/${id}/cancel`);
    if (reply.status !== 200) throw new Error(`cancelling ${id} answered ${reply.status}: ${reply.text.slice(0, 200)}`);
  }
  return { lines: opts.items, payloadMb: body.length / 2 ** 20, roundsMs, cpuMs, medianMs: median(roundsMs), medianCpuMs: median(cpuMs), rssAfterMb, foreignCpus };
}

interface MemoryRound {
  lines: number;
  bytes: number;
  seconds: number;
  rssBeforeMb: number;
  rssPeakSampledMb: number;
  /** VmHWM after the stream, reset to the current RSS just before it (the peak between samples too); NaN if not resettable. */
  hwmMb: number;
  rssAfterMb: number;
  growthMb: number;
  samples: number;
}

/** Resets VmHWM to the current RSS (Linux, own child): true when it worked. */
function resetPeak(pid: number): boolean {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** Streams GET /batches/{id}/results to the end, checking every line, while sampling the server's RSS. */
async function streamResults(opts: Options, w: Instance, batchId: string, expected: number): Promise<MemoryRound> {
  const pid = w.server.pid;
  await settle([pid]);
  const rssBeforeMb = memoryMbOf(pid);
  const peakResettable = resetPeak(pid);
  let peak = rssBeforeMb;
  let samples = 0;
  const sampler = setInterval(() => {
    samples++;
    peak = Math.max(peak, memoryMbOf(pid));
  }, opts.sampleMs);
  const t0 = performance.now();
  try {
    const { lines, bytes } = await new Promise<{ lines: number; bytes: number }>((resolve, reject) => {
      const req = http.get({ host: w.server.host, port: w.server.port, path: `${BATCHES}/${batchId}/results`, headers: w.auth, agent: false }, (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new Error(`GET results answered ${res.statusCode}`));
          return;
        }
        if (!String(res.headers['content-type']).startsWith('application/jsonl')) reject(new Error(`results content-type ${res.headers['content-type']}`));
        res.setEncoding('utf8');
        let carry = '';
        let count = 0;
        let size = 0;
        const seen = new Set<string>();
        const check = (line: string) => {
          const parsed = JSON.parse(line) as { id?: string; custom_id?: string; response?: { status_code?: number }; error?: unknown };
          if (!parsed.id?.startsWith('batch_req_') || parsed.response?.status_code !== 200 || parsed.error !== null || !parsed.custom_id) {
            throw new Error(`unexpected result line: ${line.slice(0, 300)}`);
          }
          seen.add(parsed.custom_id);
          count++;
        };
        res.on('data', (part: string) => {
          size += Buffer.byteLength(part);
          const parts = (carry + part).split('\n');
          carry = parts.pop()!;
          try {
            for (const line of parts) check(line);
          } catch (err) {
            req.destroy();
            reject(err as Error);
          }
        });
        res.on('end', () => {
          if (carry !== '') reject(new Error(`the results do not end with a newline: ${carry.slice(0, 200)}`));
          else if (seen.size !== count) reject(new Error(`${count - seen.size} duplicate custom_id values in the results`));
          else resolve({ lines: count, bytes: size });
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.setTimeout(120_000, () => req.destroy(new Error('no data for 120 s')));
    });
    const seconds = (performance.now() - t0) / 1000;
    clearInterval(sampler);
    peak = Math.max(peak, memoryMbOf(pid));
    if (lines !== expected) throw new Error(`the results have ${lines} lines, expected ${expected}`);
    const hwmMb = peakResettable ? memoryMbOf(pid, 'VmHWM') : Number.NaN;
    return {
      lines,
      bytes,
      seconds,
      rssBeforeMb,
      rssPeakSampledMb: peak,
      hwmMb,
      rssAfterMb: memoryMbOf(pid),
      growthMb: Math.max(peak, Number.isFinite(hwmMb) ? hwmMb : peak) - rssBeforeMb,
      samples,
    };
  } finally {
    clearInterval(sampler);
  }
}

interface ThroughputResult {
  concurrency: number;
  latencyMs: number;
  warmup: RunResult | null;
  directBefore: DirectResult;
  directAfter: DirectResult;
  waygate: RunResult;
}

/** A discarded warm-up batch, direct calls, the measured batch, direct calls again. */
async function throughput(opts: Options, w: Instance, upstream: UpstreamProcess, model: string, count: number, concurrency: number, latencyMs: number, ownPids: () => number[]): Promise<ThroughputResult> {
  const label = `run (upstream latency ${latencyMs} ms, WAYGATE_BATCH_CONCURRENCY=${concurrency})`;
  let warmup: RunResult | null = null;
  if (opts.warmupItems > 0) {
    warmup = await runBatch(opts, w, upstream, model, opts.warmupItems, 'w', ownPids);
    write(`${label}: warm-up batch of ${int(opts.warmupItems)} items, ${int(warmup.itemsPerSecond)} items/s (discarded)`);
    await settle([w.server.pid]);
  }
  // This process's own warm-up (JIT, connections) for the direct calls.
  await direct(upstream, concurrency, Math.min(count, 4 * concurrency + 1000));
  const directBefore = await direct(upstream, concurrency, count);
  write(`${label}: direct, ${int(count)} calls at concurrency ${concurrency}: ${int(directBefore.rps)} calls/s`);
  await settle([w.server.pid]);
  const waygate = await runBatch(opts, w, upstream, model, count, 'r', ownPids);
  write(
    `${label}: Waygate batch of ${int(count)} items completed in ${waygate.seconds.toFixed(2)} s: ${int(waygate.itemsPerSecond)} items/s ` +
      `(10-90 %: ${int(waygate.steadyItemsPerSecond)} items/s), server CPU ${waygate.cpuMsPerItem.toFixed(3)} ms/item, core busy ${Math.round(waygate.serverBusy * 100)} %`,
  );
  await settle([w.server.pid]);
  const directAfter = await direct(upstream, concurrency, count);
  write(`${label}: direct again: ${int(directAfter.rps)} calls/s`);
  return { concurrency, latencyMs, warmup, directBefore, directAfter, waygate };
}

interface Results {
  create?: CreateResult;
  run?: ThroughputResult;
  memory?: MemoryRound[];
  latency?: ThroughputResult;
  profiles: Record<string, string>;
  serverErrors: string[];
}

/** Prints the top of the newest profile in `dir` (written when the server exited). */
function printProfile(part: string, dir: string, filter: string): string | null {
  const files = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).map((f) => path.join(dir, f)) : [];
  const file = files.sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0];
  if (!file) {
    write(`${part}: no CPU profile in ${dir}`);
    return null;
  }
  const summary = summarise(JSON.parse(fs.readFileSync(file, 'utf8')) as Parameters<typeof summarise>[0], 15, filter);
  write();
  write(`CPU profile of the ${part} server (${file}, ${(summary.totalMs / 1000).toFixed(1)} s sampled, idle included)`);
  write(table(['self time', 'ms', 'share'], summary.self.map((r) => [r.name, r.ms.toFixed(0), `${(r.share * 100).toFixed(1)}%`])));
  write(table([`inclusive (URL contains ${filter})`, 'ms', 'share'], summary.inclusive.map((r) => [r.name, r.ms.toFixed(0), `${(r.share * 100).toFixed(1)}%`])));
  return file;
}

export async function batchesBench(argv: string[] = process.argv.slice(2)): Promise<void> {
  const opts = options(argv);
  const info = machine();
  const pinned = opts.pin && hasTaskset() && info.nproc >= 2 && pinSelf('1');
  const cleanups = cleanupsOnExit();
  const results: Results = { profiles: {}, serverErrors: [] };
  const has = (p: Part) => opts.parts.includes(p);

  write(`Waygate batches benchmark, ${info.date}, ${sourceVersion()}`);
  write(`Machine: ${info.nproc} CPUs (${info.cpuModel}), ${info.memoryGb} GB, Node ${info.node}, ${info.platform}; load average at start ${info.loadAverage}`);
  write(pinned ? 'Waygate pinned to CPU 0; the fake upstreams and this process (client, poller) to CPU 1 (taskset)' : 'not pinned (no taskset, fewer than 2 CPUs, or --no-pin)');
  write(`Database: ${opts.database ? 'PostgreSQL (--database)' : 'SQLite in a temp directory'}; entry ${opts.entry}; LOG_LEVEL=${opts.logLevel}`);

  try {
    let mainFile: string | undefined;
    if (opts.entry === 'build') {
      const built = await transpileSources();
      cleanups.add(async () => built.remove());
      mainFile = built.main;
    }
    const profileFilter = opts.entry === 'build' ? '.test-build' : opts.entry === 'dist' ? '/dist/' : '/src/';

    /** Starts a part's Waygate with the given batch settings, registers its model on `upstream`, runs `body`, stops it. */
    const withServer = async (part: string, env: Record<string, string>, upstream: UpstreamProcess, model: string, body: (w: Instance, ownPids: () => number[]) => Promise<void>) => {
      const profDir = opts.cpuProf ? path.resolve(opts.cpuProf, part) : null;
      const server = await startServer({
        entry: opts.entry === 'dist' ? 'dist' : 'tsx',
        ...(mainFile ? { mainFile } : {}),
        databaseUrl: opts.database,
        logLevel: opts.logLevel,
        cpus: pinned ? '0' : null,
        env,
        nodeArgs: profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [],
      });
      cleanups.add(() => server.stop());
      const w = instance(server);
      try {
        write();
        write(`${part}: Waygate pid ${server.pid} on ${server.baseUrl} (${Object.entries(env).map(([k, v]) => `${k}=${v}`).join(' ')})`);
        const why = await registerModels(server, upstream.baseUrl, [{ key: model, upstreamModel: UPSTREAM_MODEL, capabilities: ['chat'] }]);
        if (why) throw new Error(`${part}: ${why}`);
        await settle([server.pid]);
        await body(w, () => [process.pid, server.pid, upstream.pid]);
      } finally {
        w.agent.destroy();
        results.serverErrors.push(...server.errorLines());
        await server.stop();
      }
      if (profDir) {
        const file = printProfile(part, profDir, profileFilter);
        if (file) results.profiles[part] = file;
      }
    };

    const upstream = await startUpstream({ cpus: pinned ? '1' : null, chunks: 8, holdChunkMs: 100, track: true });
    cleanups.add(() => upstream.stop());
    write(`fake upstream pid ${upstream.pid} on ${upstream.baseUrl} (answers at once)`);

    if (has('create')) {
      await withServer('create', { WAYGATE_BATCH_WORKER: 'false' }, upstream, MODEL_KEY.create, async (w, ownPids) => {
        results.create = await measureCreate(opts, w, ownPids);
      });
    }

    if (has('run') || has('memory')) {
      await withServer('run', { WAYGATE_BATCH_CONCURRENCY: String(opts.concurrency) }, upstream, MODEL_KEY.run, async (w, ownPids) => {
        const run = await throughput(opts, w, upstream, MODEL_KEY.run, opts.items, opts.concurrency, 0, ownPids);
        if (has('run')) results.run = run;
        if (has('memory')) {
          results.memory = [];
          for (let round = 1; round <= opts.memoryRounds; round++) {
            const r = await streamResults(opts, w, run.waygate.batchId, opts.items);
            results.memory.push(r);
            write(
              `results round ${round}/${opts.memoryRounds}: ${int(r.lines)} lines, ${(r.bytes / 2 ** 20).toFixed(1)} MB in ${r.seconds.toFixed(2)} s; ` +
                `RSS ${r.rssBeforeMb.toFixed(1)} MB before, peak ${r.rssPeakSampledMb.toFixed(1)} MB sampled (${r.samples} samples), VmHWM ${fixed(1)(r.hwmMb)} MB: +${r.growthMb.toFixed(1)} MB`,
            );
          }
        }
      });
    }

    if (has('latency')) {
      const slow = await startUpstream({ cpus: pinned ? '1' : null, chunks: 8, holdChunkMs: 100, latencyMs: opts.latencyMs, track: true });
      cleanups.add(() => slow.stop());
      write();
      write(`slow fake upstream pid ${slow.pid} on ${slow.baseUrl} (answers ${opts.latencyMs} ms after each request)`);
      await withServer('latency', { WAYGATE_BATCH_CONCURRENCY: String(opts.latencyConcurrency) }, slow, MODEL_KEY.latency, async (w, ownPids) => {
        results.latency = await throughput(opts, w, slow, MODEL_KEY.latency, opts.latencyItems, opts.latencyConcurrency, opts.latencyMs, ownPids);
      });
    }
  } catch (err) {
    // What the server said about it (its data directory, log included, is gone once it stops).
    for (const line of results.serverErrors.slice(0, 3)) write(`Waygate logged: ${line.slice(0, 2000)}`);
    throw err;
  } finally {
    await cleanups.run();
  }

  report(opts, results);
  if (results.serverErrors.length > 0) {
    write();
    write(`Waygate logged ${results.serverErrors.length} error line(s); first: ${results.serverErrors[0]!.slice(0, 500)}`);
    process.exitCode = 1;
  }
  if (opts.json) {
    fs.mkdirSync(path.dirname(path.resolve(opts.json)), { recursive: true });
    fs.writeFileSync(opts.json, JSON.stringify({ machine: info, options: opts, results }, null, 2));
    write(`raw results written to ${opts.json}`);
  }
}

function report(opts: Options, results: Results): void {
  const goals: (string | number)[][] = [];
  write();
  if (results.create) {
    const c = results.create;
    write(`Create: POST ${BATCHES} with ${int(c.lines)} inline lines (${c.payloadMb.toFixed(2)} MB), worker off, from just before sending to the 201`);
    write(
      table(
        ['', 'median', 'min', 'max', 'rounds'],
        [
          ['ms to the 201', ms(c.medianMs), ms(Math.min(...c.roundsMs)), ms(Math.max(...c.roundsMs)), c.roundsMs.map((v) => v.toFixed(0)).join(', ')],
          ['server CPU ms', c.medianCpuMs.toFixed(0), Math.min(...c.cpuMs).toFixed(0), Math.max(...c.cpuMs).toFixed(0), c.cpuMs.map((v) => v.toFixed(0)).join(', ')],
          ['µs per line', ((c.medianMs / c.lines) * 1000).toFixed(1), '', '', ''],
        ],
      ),
    );
    write(`Server RSS after the creates: ${c.rssAfterMb.toFixed(1)} MB; other processes used ${c.foreignCpus.toFixed(2)} CPUs meanwhile`);
    goals.push([`create ${int(c.lines)} lines, median of ${c.roundsMs.length}`, `${ms(c.medianMs)} ms`, `< 1000 ms${opts.database ? ' (the goal is for SQLite)' : ''}`, verdict(c.medianMs < 1000)]);
    write();
  }
  const throughputTable = (t: ThroughputResult) => {
    const w = t.waygate;
    const directRps = (t.directBefore.rps + t.directAfter.rps) / 2;
    const rows: (string | number)[][] = [
      ['Waygate batch items/s (201 to `completed`)', int(w.itemsPerSecond)],
      ['Waygate batch items/s between 10 % and 90 % done', int(w.steadyItemsPerSecond)],
      ['seconds to `completed` (API timestamps, whole seconds)', `${w.seconds.toFixed(2)} (${w.apiSeconds})`],
      ['first item finished after s', w.firstItemSeconds.toFixed(3)],
      [`direct calls/s at concurrency ${t.concurrency} (before; after)`, `${int(t.directBefore.rps)}; ${int(t.directAfter.rps)}`],
      ['Waygate / direct (mean of before and after)', (w.itemsPerSecond / directRps).toFixed(3)],
    ];
    if (t.latencyMs > 0) rows.push([`Waygate / ceiling ${t.concurrency} / ${t.latencyMs / 1000} s = ${int((t.concurrency * 1000) / t.latencyMs)}/s`, (w.itemsPerSecond / ((t.concurrency * 1000) / t.latencyMs)).toFixed(3)]);
    rows.push(
      ['server CPU per item ms (CPU s per item x 1000)', w.cpuMsPerItem.toFixed(3)],
      ['server core busy', `${Math.round(w.serverBusy * 100)} %`],
      ['upstream calls made; mean and max in flight (sampled)', `${int(w.upstreamRequests)}; ${w.upstreamMeanInFlight.toFixed(1)}, ${w.upstreamMaxInFlightSeen}`],
      ['create of this batch, ms to the 201', ms(w.createMs)],
      ['failed items', w.failed],
      ['other processes, CPUs', w.foreignCpus.toFixed(2)],
    );
    write(table(['figure', 'value'], rows));
    return { directRps };
  };
  if (results.run) {
    const t = results.run;
    write(`Run, upstream answers at once: one batch of ${int(t.waygate.items)} items, WAYGATE_BATCH_CONCURRENCY=${t.concurrency}, polled every ${opts.pollMs} ms`);
    const { directRps } = throughputTable(t);
    goals.push([`run ${int(t.waygate.items)} items, no upstream latency`, `${int(t.waygate.itemsPerSecond)} items/s`, '>= 1,000 items/s', verdict(t.waygate.itemsPerSecond >= 1000)]);
    goals.push(['  the same / direct calls at the same concurrency', (t.waygate.itemsPerSecond / directRps).toFixed(3), '(baseline)', '']);
    goals.push(['  server CPU per item', `${t.waygate.cpuMsPerItem.toFixed(3)} ms`, '(reported)', '']);
    write();
  }
  if (results.latency) {
    const t = results.latency;
    write(`Run, upstream answers after ${t.latencyMs} ms: one batch of ${int(t.waygate.items)} items, WAYGATE_BATCH_CONCURRENCY=${t.concurrency}, polled every ${opts.pollMs} ms`);
    const { directRps } = throughputTable(t);
    const ceiling = (t.concurrency * 1000) / t.latencyMs;
    goals.push([`run ${int(t.waygate.items)} items, ${t.latencyMs} ms upstream, concurrency ${t.concurrency}`, `${int(t.waygate.itemsPerSecond)} items/s`, '>= 250 items/s', verdict(t.waygate.itemsPerSecond >= 250)]);
    goals.push([`  the same / ceiling ${int(ceiling)}/s`, (t.waygate.itemsPerSecond / ceiling).toFixed(3), '(ideal 1.0)', '']);
    goals.push(['  the same / direct calls at the same concurrency', (t.waygate.itemsPerSecond / directRps).toFixed(3), '(baseline)', '']);
    write();
  }
  if (results.memory && results.memory.length > 0) {
    const m = results.memory;
    write(`Results stream: GET ${BATCHES}/{id}/results of the completed ${int(m[0]!.lines)}-item batch, RSS (VmRSS) sampled every ${opts.sampleMs} ms; VmHWM reset before each stream`);
    write(
      table(
        ['round', 'lines', 'MB', 'seconds', 'RSS before MB', 'peak sampled MB', 'VmHWM MB', 'RSS after MB', 'growth MB'],
        m.map((r, i) => [i + 1, int(r.lines), (r.bytes / 2 ** 20).toFixed(1), r.seconds.toFixed(2), r.rssBeforeMb.toFixed(1), r.rssPeakSampledMb.toFixed(1), fixed(1)(r.hwmMb), r.rssAfterMb.toFixed(1), r.growthMb.toFixed(1)]),
      ),
    );
    const worst = Math.max(...m.map((r) => r.growthMb));
    goals.push([`results stream of ${int(m[0]!.lines)} lines, RSS growth (first; worst of ${m.length})`, `${m[0]!.growthMb.toFixed(1)}; ${worst.toFixed(1)} MB`, '< 50 MB', verdict(worst < 50)]);
    write();
  }
  write('Goals (issue 4)');
  write(goals.length > 0 ? table(['figure', 'measured', 'goal', ''], goals) : '(nothing measured)');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  batchesBench().catch((err: unknown) => {
    process.stderr.write(`benchmark failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exit(1);
  });
}
