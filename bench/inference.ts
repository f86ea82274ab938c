/**
 * Inference benchmark (issue 3, "Speed and memory"): what Waygate adds to an OpenAI-compatible call, measured against
 * the same fake upstream called directly and through the Portkey OSS gateway, all in the same run.
 *
 *   node --import tsx bench/inference.ts [--rounds 3] [--requests 5000] [--warmup-requests 3000] [--duration 5] [--connections 64]
 *        [--stream-requests 2000] [--streams 1000] [--memory-requests 1000000] [--sparse-requests 100] [--sparse-interval-ms 20]
 *        [--targets direct,proxy,waygate,portkey, plus floor for the least a metering gateway costs, floor-fastify for the same on Fastify, waygate-limited for calls under a budget and a rate limit, and waygate-no-poll for the polling A/B]
 *        [--entry build|tsx|dist] [--idle-seconds 60] [--database postgres://...] [--log-level info] [--cpu-prof <dir>] [--json <file>] [--no-pin]
 *
 * CPU 0: Waygate and Portkey (`taskset -c 0`, one at a time under load). CPU 1: the fake upstream (its own child
 * process) and this process, the load generator. Only when taskset exists and there are at least 2 CPUs.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { createLimitedToken, registerModels, requestJson } from './lib/api.js';
import { loaded, loadedAmount, median, paced, sequential, type Sample, type Target } from './lib/measure.js';
import { ensurePortkey, startPortkey, type PortkeyServer } from './lib/portkey.js';
import { cleanupsOnExit, entryOption, loadOptions, wholeNumber, type Entry, type LoadOptions } from './lib/options.js';
import { int, machine, ms, pinSelf, sourceVersion, table } from './lib/report.js';
import { cpuSecondsOf, foreignLoad, hasTaskset, memoryMbOf, SCHEDULER_TIMES, settle, startServer, transpileSources, type BenchServer } from './lib/server.js';
import { heldStreams, streamSequential, type HeldStreams, type TtfbSample } from './lib/stream.js';
import { startFloorGateway } from './lib/floor.js';
import type { ChildServer } from './lib/child.js';
import { startProxy } from './lib/proxy.js';
import { startUpstream, UPSTREAM_API_KEY, type UpstreamProcess } from './lib/upstream.js';

const TARGET_NAMES = ['direct', 'proxy', 'floor', 'floor-fastify', 'waygate', 'waygate-limited', 'waygate-no-poll', 'portkey'] as const;
type TargetName = (typeof TARGET_NAMES)[number];

/** The A/B target `waygate-no-poll`: Waygate with its event-loop polling turned off. */
const NO_POLL_LABEL = 'Waygate, no polling';
/**
 * The target `waygate-limited`: a second Waygate called with a token that has a daily budget and a rate limit (none
 * reached), so every call is admitted and settled on four counters, as a budgeted project's calls are.
 */
const LIMITED_LABEL = 'Waygate, limited token';
/** The control target `floor` (bench/lib/floor.ts): a call's duties and nothing else, without a framework. */
const FLOOR_LABEL = 'floor gateway';
/** The control target `floor-fastify`: the same duties inside one Fastify route (what the framework adds). */
const FASTIFY_FLOOR_LABEL = 'floor on Fastify';

interface Options extends LoadOptions {
  streamRequests: number;
  streams: number;
  chunks: number;
  holdChunkMs: number;
  memoryRequests: number;
  memoryConnections: number;
  sparseRequests: number;
  sparseIntervalMs: number;
  targets: TargetName[];
  entry: Entry;
  idleSeconds: number;
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
      rounds: { type: 'string', default: '3' },
      requests: { type: 'string', default: '5000' },
      'warmup-requests': { type: 'string', default: '3000' },
      duration: { type: 'string', default: '5' },
      warmup: { type: 'string', default: '1' },
      connections: { type: 'string', default: '64' },
      'stream-requests': { type: 'string', default: '2000' },
      streams: { type: 'string', default: '1000' },
      chunks: { type: 'string', default: '8' },
      'hold-chunk-ms': { type: 'string', default: '250' },
      'memory-requests': { type: 'string', default: '1000000' },
      'memory-connections': { type: 'string', default: '64' },
      'sparse-requests': { type: 'string', default: '100' },
      'sparse-interval-ms': { type: 'string', default: '20' },
      targets: { type: 'string', default: 'direct,proxy,waygate,portkey' },
      entry: { type: 'string', default: 'build' },
      'idle-seconds': { type: 'string', default: '60' },
      database: { type: 'string' },
      'log-level': { type: 'string', default: 'info' },
      'cpu-prof': { type: 'string' },
      json: { type: 'string' },
      'no-pin': { type: 'boolean', default: false },
    },
  });
  const targets = (values.targets ?? '').split(',').map((t) => t.trim().toLowerCase()).filter(Boolean);
  for (const t of targets) if (!(TARGET_NAMES as readonly string[]).includes(t)) throw new Error(`--targets: unknown target ${t}`);
  if (!targets.includes('direct')) targets.unshift('direct'); // every figure is relative to it
  return {
    ...loadOptions(values),
    streamRequests: wholeNumber('stream-requests', values['stream-requests']),
    streams: wholeNumber('streams', values.streams, 0),
    chunks: wholeNumber('chunks', values.chunks),
    holdChunkMs: wholeNumber('hold-chunk-ms', values['hold-chunk-ms']),
    memoryRequests: wholeNumber('memory-requests', values['memory-requests'], 0),
    memoryConnections: wholeNumber('memory-connections', values['memory-connections']),
    sparseRequests: wholeNumber('sparse-requests', values['sparse-requests'], 0),
    sparseIntervalMs: wholeNumber('sparse-interval-ms', values['sparse-interval-ms']),
    targets: targets as TargetName[],
    entry: entryOption(values.entry, ['build', 'tsx', 'dist']),
    idleSeconds: wholeNumber('idle-seconds', values['idle-seconds'], 0),
    database: values.database,
    logLevel: values['log-level'] ?? 'info',
    cpuProf: values['cpu-prof'],
    json: values.json,
    pin: !values['no-pin'],
  };
}

const write = (text = '') => process.stdout.write(`${text}\n`);
const sleep = (msec: number) => new Promise((resolve) => setTimeout(resolve, msec));

/** Upstream model names; Waygate maps its model keys onto them. */
const UPSTREAM_MODEL = { chat: 'bench-model', hold: 'hold-model', embed: 'bench-embed' };
export const WAYGATE_MODEL = { chat: 'bench', hold: 'bench-hold', embed: 'bench-embed' };
const MESSAGES = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Say hello in one short sentence.' },
];

/** One gateway (or the upstream itself) with the four request shapes the benchmark sends to it. */
export interface Gateway {
  name: string;
  host: string;
  port: number;
  /** The process on CPU 0 whose CPU time is charged to the requests; null for direct. */
  pid: number | null;
  chat: Target;
  embed: Target;
  stream: Target;
  hold: Target;
}

export function gateway(name: string, host: string, port: number, pid: number | null, prefix: string, headers: Record<string, string>, models: typeof UPSTREAM_MODEL): Gateway {
  const h = { 'content-type': 'application/json', ...headers };
  const chat = JSON.stringify({ model: models.chat, messages: MESSAGES, max_tokens: 32, temperature: 0 });
  const stream = (model: string) => JSON.stringify({ model, messages: MESSAGES, max_tokens: 32, temperature: 0, stream: true, stream_options: { include_usage: true } });
  const base = { headers: h, expectStatus: 200, method: 'POST' };
  return {
    name,
    host,
    port,
    pid,
    chat: { ...base, label: `${name} chat`, path: `${prefix}/chat/completions`, body: chat, recordHeader: 'x-waygate-overhead-ms' },
    embed: { ...base, label: `${name} embeddings`, path: `${prefix}/embeddings`, body: JSON.stringify({ model: models.embed, input: 'The quick brown fox jumps over the lazy dog.' }) },
    stream: { ...base, label: `${name} stream`, path: `${prefix}/chat/completions`, body: stream(models.chat) },
    hold: { ...base, label: `${name} held stream`, path: `${prefix}/chat/completions`, body: stream(models.hold) },
  };
}

/** The floor gateway (on Fastify with `fastify`) in front of the upstream, with the benchmark's model keys. */
export async function startFloor(upstream: UpstreamProcess, cpus: string | null, fastify: boolean): Promise<{ server: ChildServer; gateway: Gateway }> {
  const token = 'wg_floor_bench_token';
  const models = Object.fromEntries((Object.keys(WAYGATE_MODEL) as (keyof typeof WAYGATE_MODEL)[]).map((kind) => [WAYGATE_MODEL[kind], UPSTREAM_MODEL[kind]]));
  const server = await startFloorGateway({ cpus, upstreamOrigin: new URL(upstream.baseUrl).origin, token, models, fastify });
  return { server, gateway: gateway(fastify ? FASTIFY_FLOOR_LABEL : FLOOR_LABEL, '127.0.0.1', server.port, server.pid, '/v1', { authorization: `Bearer ${token}` }, WAYGATE_MODEL) };
}

/**
 * Logs in as the admin and registers the three benchmark models. Returns null when done, or why Waygate cannot be
 * benchmarked (for instance the inference routes do not exist yet).
 */
export function setupWaygate(server: BenchServer, upstream: UpstreamProcess): Promise<string | null> {
  return registerModels(server, upstream.baseUrl, [
    { key: WAYGATE_MODEL.chat, upstreamModel: UPSTREAM_MODEL.chat, capabilities: ['chat'] },
    { key: WAYGATE_MODEL.hold, upstreamModel: UPSTREAM_MODEL.hold, capabilities: ['chat'] },
    { key: WAYGATE_MODEL.embed, upstreamModel: UPSTREAM_MODEL.embed, capabilities: ['embeddings'] },
  ]);
}

/** One request of each kind, checked for shape, before anything is measured. Returns the problems found. */
async function smoke(g: Gateway): Promise<string[]> {
  const problems: string[] = [];
  const send = (t: Target) => requestJson(g.host, g.port, 'POST', t.path, t.headers, JSON.parse(t.body!));
  const chat = await send(g.chat);
  const c = chat.body as { object?: string; choices?: { message?: { content?: string } }[]; usage?: { total_tokens?: number } } | undefined;
  if (chat.status !== 200 || c?.object !== 'chat.completion' || !c.choices?.[0]?.message?.content || !c.usage?.total_tokens) {
    problems.push(`chat: ${chat.status} ${chat.text.slice(0, 300)}`);
  }
  const embed = await send(g.embed);
  const e = embed.body as { data?: { embedding?: unknown }[] } | undefined;
  if (embed.status !== 200 || !Array.isArray(e?.data?.[0]?.embedding)) problems.push(`embeddings: ${embed.status} ${embed.text.slice(0, 300)}`);
  const stream = await send(g.stream);
  const events = stream.text.split('\n\n').filter((x) => x.startsWith('data:'));
  if (stream.status !== 200 || events.at(-1)?.trim() !== 'data: [DONE]' || !events.some((x) => x.includes('"total_tokens"'))) {
    problems.push(`stream: ${stream.status}, ${events.length} events, last ${JSON.stringify(events.at(-1)?.slice(0, 100))}, usage chunk ${events.some((x) => x.includes('"total_tokens"'))}: ${stream.text.slice(0, 200)}`);
  }
  return problems;
}

interface TargetResults {
  c1: Sample[];
  embed: Sample[];
  ttfb: TtfbSample[];
  cN: Sample[];
  cpuUs: number[];
  busy: number[];
  /** Gateway CPU µs per request of sparse traffic (one request every --sparse-interval-ms). */
  sparseCpuUs: number[];
  held?: HeldStreams;
  failure?: string;
  rssIdle?: number;
  rssEnd?: number;
}

interface MemoryResult {
  requests: number;
  /** RSS a few seconds after start and setup. */
  idle: number;
  /** RSS after --idle-seconds more without requests. */
  idleLater: number;
  after: number;
  /** RSS after --idle-seconds without requests, after the load. */
  afterSettled: number;
  peak: number;
  rps: number;
  trace: { requests: number; rss: number }[];
  analytics?: string;
  /** Error lines the fresh server logged. */
  errors: string[];
}

export async function inference(argv: string[] = process.argv.slice(2)): Promise<void> {
  const opts = options(argv);
  const info = machine();
  const pinned = opts.pin && hasTaskset() && info.nproc >= 2 && pinSelf('1');
  const gwCpus = pinned ? '0' : null;
  const cleanups = cleanupsOnExit();
  let startWaygate = (cpus: string | null, nodeArgs: string[] = [], env: Record<string, string> = {}) =>
    startServer({ entry: opts.entry === 'dist' ? 'dist' : 'tsx', databaseUrl: opts.database, logLevel: opts.logLevel, cpus, nodeArgs, env });
  if (opts.entry === 'build' && opts.targets.some((t) => t.startsWith('waygate'))) {
    const built = await transpileSources();
    cleanups.add(async () => built.remove());
    startWaygate = (cpus, nodeArgs = [], env = {}) =>
      startServer({ entry: 'tsx', mainFile: built.main, databaseUrl: opts.database, logLevel: opts.logLevel, cpus, nodeArgs, env });
  }

  write(`Waygate inference benchmark, ${info.date}, ${sourceVersion()}`);
  write(`Machine: ${info.nproc} CPUs (${info.cpuModel}), ${info.memoryGb} GB, Node ${info.node}, ${info.platform}; load average at start ${info.loadAverage}`);
  write(`Gateway CPU times from ${SCHEDULER_TIMES ? "the scheduler's per-thread run time (ns)" : '/proc/<pid>/stat (10 ms ticks)'}`);
  write(pinned ? 'Waygate and Portkey pinned to CPU 0; the fake upstream and the load generator to CPU 1 (taskset)' : 'not pinned (no taskset, fewer than 2 CPUs, or --no-pin)');

  const gateways: Gateway[] = [];
  const results = new Map<string, TargetResults>();
  const skipped: string[] = [];
  let waygate: BenchServer | null = null;
  let waygateNoPoll: BenchServer | null = null;
  let waygateLimited: BenchServer | null = null;
  let portkey: PortkeyServer | null = null;
  let memory: MemoryResult | null = null;
  let serverErrors: string[] = [];
  const foreign = { rounds: [] as number[], all: Number.NaN };
  /** Starts and sets up one Waygate target; null (and a line in `skipped`) when its setup fails. */
  const addWaygate = async (upstream: UpstreamProcess, label: string, nodeArgs: string[], env: Record<string, string>, limited = false): Promise<BenchServer | null> => {
    const server = await startWaygate(gwCpus, nodeArgs, env);
    cleanups.add(() => server.stop());
    let why = await setupWaygate(server, upstream);
    let token = server.token;
    if (!why && limited) {
      const created = await createLimitedToken(server);
      if (typeof created === 'string') why = created;
      else token = created.value;
    }
    if (why) {
      skipped.push(`${label} skipped: ${why}`);
      write(skipped.at(-1));
      await server.stop();
      return null;
    }
    const settings = Object.entries(env).map(([name, value]) => `, ${name}=${value}`).join('');
    write(`${label} pid ${server.pid} on ${server.baseUrl} (entry ${opts.entry}, ${opts.database ? 'PostgreSQL' : 'SQLite'}, LOG_LEVEL=${opts.logLevel}${settings}${nodeArgs.length ? ', --cpu-prof' : ''})`);
    gateways.push(gateway(label, server.host, server.port, server.pid, '/api/client/v1', { authorization: `Bearer ${token}` }, WAYGATE_MODEL));
    return server;
  };
  try {
    const upstream = await startUpstream({ cpus: pinned ? '1' : null, chunks: opts.chunks, holdChunkMs: opts.holdChunkMs });
    cleanups.add(() => upstream.stop());
    write(`fake upstream pid ${upstream.pid} on ${upstream.baseUrl} (${opts.chunks} content chunks per stream)`);
    gateways.push(gateway('direct', '127.0.0.1', upstream.port, null, '/v1', { authorization: `Bearer ${UPSTREAM_API_KEY}` }, UPSTREAM_MODEL));

    if (opts.targets.includes('proxy')) {
      const proxy = await startProxy({ cpus: gwCpus, upstreamOrigin: new URL(upstream.baseUrl).origin });
      cleanups.add(() => proxy.stop());
      write(`bare proxy (node:http + undici, no processing) pid ${proxy.pid} on http://127.0.0.1:${proxy.port}`);
      gateways.push(gateway('bare proxy', '127.0.0.1', proxy.port, proxy.pid, '/v1', { authorization: `Bearer ${UPSTREAM_API_KEY}` }, UPSTREAM_MODEL));
    }

    for (const fastify of [false, true]) {
      if (!opts.targets.includes(fastify ? 'floor-fastify' : 'floor')) continue;
      const floor = await startFloor(upstream, gwCpus, fastify);
      cleanups.add(() => floor.server.stop());
      write(`${floor.gateway.name} (${fastify ? 'Fastify' : 'node:http'} + undici + better-sqlite3 + pino: token, body, upstream, usage row, log line) pid ${floor.server.pid} on http://127.0.0.1:${floor.server.port}`);
      gateways.push(floor.gateway);
    }

    if (opts.targets.includes('waygate')) {
      const nodeArgs = opts.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(opts.cpuProf)}`] : [];
      waygate = await addWaygate(upstream, 'Waygate', nodeArgs, {});
    }
    if (opts.targets.includes('waygate-limited')) waygateLimited = await addWaygate(upstream, LIMITED_LABEL, [], {}, true);
    if (opts.targets.includes('waygate-no-poll')) waygateNoPoll = await addWaygate(upstream, NO_POLL_LABEL, [], { WAYGATE_BUSY_POLL_US: '0' });

    if (opts.targets.includes('portkey')) {
      const why = ensurePortkey(write);
      if (why) {
        skipped.push(`Portkey skipped: ${why}`);
        write(skipped.at(-1));
      } else {
        const server = await startPortkey({ cpus: gwCpus });
        cleanups.add(() => server.stop());
        portkey = server;
        write(`Portkey gateway 1.15.2 pid ${server.pid} on ${server.baseUrl} (custom host ${upstream.baseUrl})`);
        gateways.push(gateway('Portkey', server.host, server.port, server.pid, '/v1', server.headersFor(upstream.baseUrl), UPSTREAM_MODEL));
      }
    }

    const pids = gateways.flatMap((g) => (g.pid === null ? [] : [g.pid]));
    const ownPids = () => [process.pid, upstream.pid, ...pids];
    const foreignAll = foreignLoad(ownPids);
    await settle(pids);
    for (const g of gateways) {
      results.set(g.name, { c1: [], embed: [], ttfb: [], cN: [], cpuUs: [], busy: [], sparseCpuUs: [], ...(g.pid ? { rssIdle: memoryMbOf(g.pid) } : {}) });
      const problems = await smoke(g);
      if (problems.length > 0) {
        results.get(g.name)!.failure = `smoke test: ${problems.join('; ')}`;
        write(`${g.name}: ${results.get(g.name)!.failure}`);
      }
    }
    const live = () => gateways.filter((g) => !results.get(g.name)!.failure);
    /** Runs one measurement; a failure takes that target out of the rest of the run instead of ending it. */
    const guarded = async (g: Gateway, what: string, run: () => Promise<void>) => {
      const r = results.get(g.name)!;
      if (r.failure) return;
      try {
        await run();
      } catch (err) {
        r.failure = `${what}: ${err instanceof Error ? err.message : String(err)}`;
        write(`${g.name} failed, ${r.failure}`);
      }
    };

    // Warm-up pass: JIT, connection pools, database caches.
    for (const g of live()) {
      await guarded(g, 'warm-up', async () => {
        await sequential(g.host, g.port, g.chat, opts.warmupRequests * 2, 0);
        await streamSequential(g.host, g.port, g.stream, Math.ceil(opts.warmupRequests / 2), 0);
        await sequential(g.host, g.port, g.embed, opts.warmupRequests, 0);
        await loaded(`http://${g.host}:${g.port}`, g.chat, opts.connections, Math.max(1, opts.warmup), 0);
      });
      await settle(pids);
    }

    for (let round = 1; round <= opts.rounds; round++) {
      const list = live();
      // Each round starts with a different target, so warm-up and drift favour none of them.
      const order = list.map((_, k) => list[(k + round - 1) % list.length]!);
      const foreignRound = foreignLoad(ownPids);
      for (const g of order) {
        const r = results.get(g.name)!;
        await guarded(g, 'concurrency 1', async () => {
          r.c1.push(await sequential(g.host, g.port, g.chat, opts.requests, opts.warmupRequests));
          r.embed.push(await sequential(g.host, g.port, g.embed, Math.ceil(opts.requests / 2), Math.ceil(opts.warmupRequests / 2)));
          r.ttfb.push(await streamSequential(g.host, g.port, g.stream, opts.streamRequests, Math.ceil(opts.warmupRequests / 2)));
        });
        await settle(pids);
        if (!g.pid || opts.sparseRequests === 0) continue;
        const pid = g.pid;
        // After the settle: work left from the streams must not be charged to the sparse calls.
        await guarded(g, 'sparse traffic', async () => {
          const before = cpuSecondsOf(pid);
          await paced(g.host, g.port, g.chat, opts.sparseRequests, opts.sparseIntervalMs);
          r.sparseCpuUs.push(((cpuSecondsOf(pid) - before) / opts.sparseRequests) * 1e6);
        });
        await settle(pids);
      }
      for (const g of order) {
        const r = results.get(g.name)!;
        await guarded(g, `concurrency ${opts.connections}`, async () => {
          const url = `http://${g.host}:${g.port}`;
          if (opts.warmup > 0) await loaded(url, g.chat, opts.connections, opts.warmup, 0);
          const before = g.pid ? cpuSecondsOf(g.pid) : Number.NaN;
          const sample = await loaded(url, g.chat, opts.connections, opts.duration, 0);
          const cpu = g.pid ? cpuSecondsOf(g.pid) - before : Number.NaN;
          r.cN.push(sample);
          r.cpuUs.push((cpu / sample.requests) * 1e6);
          r.busy.push(cpu / sample.seconds);
        });
        await settle(pids);
      }
      foreign.rounds.push(foreignRound());
      write(
        `round ${round}/${opts.rounds} (other processes used ${foreign.rounds.at(-1)!.toFixed(2)} CPUs meanwhile): ` +
          order
            .map((g) => {
              const r = results.get(g.name)!;
              return `${g.name} c=1 p50 ${ms(r.c1.at(-1)?.p50 ?? Number.NaN)} ms, c=${opts.connections} ${int(r.cN.at(-1)?.rps ?? Number.NaN)} req/s`;
            })
            .join('; '),
      );
    }

    if (opts.streams > 0) {
      for (const g of live()) {
        await guarded(g, `${opts.streams} held streams`, async () => {
          const held = await heldStreams(g.host, g.port, g.hold, opts.streams);
          results.get(g.name)!.held = held;
          const kernel = held.kernel ? `; kernel: ${held.kernel.listenOverflows} listen overflows, ${held.kernel.synRetransmits} SYN retransmits` : '';
          write(`${g.name}: ${held.ok}/${held.streams} held streams ok, at most ${held.maxOpen} open at once, ${held.errors} errors${held.errorKinds.length ? ` (${held.errorKinds.join('; ')})` : ''}${kernel}`);
        });
        await settle(pids);
      }
    }
    foreign.all = foreignAll();
    for (const g of gateways) if (g.pid) results.get(g.name)!.rssEnd = memoryMbOf(g.pid);
    serverErrors = [waygate, waygateLimited, waygateNoPoll].flatMap((server) => server?.errorLines() ?? []);

    // Memory: a fresh Waygate, idle RSS, then --memory-requests non-stream chat requests at concurrency 64.
    if (waygate && opts.memoryRequests > 0) {
      await waygate.stop();
      if (portkey) await portkey.stop();
      memory = await memoryRun(opts, upstream, () => startWaygate(gwCpus));
      serverErrors.push(...memory.errors);
    }
  } finally {
    await cleanups.run();
  }

  report(opts, gateways, results, skipped, memory);
  write();
  write(
    `Other processes on the machine used ${foreign.all.toFixed(2)} CPUs on average during the measurements ` +
      `(per round: ${foreign.rounds.map((f) => f.toFixed(2)).join(', ')}); above about 0.1 the figures are disturbed.`,
  );
  if (opts.cpuProf) write(`\nWaygate CPU profile(s) in ${path.resolve(opts.cpuProf)} (written when the server exits)`);
  if (serverErrors.length > 0) {
    write();
    write(`Waygate logged ${serverErrors.length} error line(s); first: ${serverErrors[0]!.slice(0, 500)}`);
    process.exitCode = 1;
  }
  if (opts.json) {
    fs.mkdirSync(path.dirname(path.resolve(opts.json)), { recursive: true });
    fs.writeFileSync(opts.json, JSON.stringify({ machine: info, options: opts, skipped, foreign, results: Object.fromEntries(results), memory }, null, 2));
    write(`raw results written to ${opts.json}`);
  }
}

async function memoryRun(opts: Options, upstream: UpstreamProcess, start: () => Promise<BenchServer>): Promise<MemoryResult> {
  write();
  write(`memory: fresh Waygate, ${int(opts.memoryRequests)} non-stream chat requests at concurrency ${opts.memoryConnections}`);
  const server = await start();
  try {
    const why = await setupWaygate(server, upstream);
    if (why) throw new Error(`memory run: ${why}`);
    await sleep(2000);
    await settle([server.pid]);
    const idle = memoryMbOf(server.pid);
    await sleep(opts.idleSeconds * 1000);
    const idleLater = memoryMbOf(server.pid);
    write(`memory: idle RSS ${idle.toFixed(1)} MB after start and setup, ${idleLater.toFixed(1)} MB ${opts.idleSeconds} s later`);
    try {
      // Resets VmHWM, so that the peak below belongs to this run.
      fs.writeFileSync(`/proc/${server.pid}/clear_refs`, '5');
    } catch {
      // not Linux or not allowed: the peak then includes start-up
    }
    const g = gateway('Waygate', server.host, server.port, server.pid, '/api/client/v1', { authorization: `Bearer ${server.token}` }, WAYGATE_MODEL);
    const slices = Math.min(10, opts.memoryRequests);
    const trace: { requests: number; rss: number }[] = [];
    let done = 0;
    const started = performance.now();
    for (let i = 0; i < slices; i++) {
      const amount = Math.floor(opts.memoryRequests / slices) + (i < opts.memoryRequests % slices ? 1 : 0);
      await loadedAmount(server.baseUrl, g.chat, opts.memoryConnections, amount);
      done += amount;
      trace.push({ requests: done, rss: memoryMbOf(server.pid) });
      write(`memory: ${int(done)} requests, RSS ${trace.at(-1)!.rss.toFixed(1)} MB, ${int(done / ((performance.now() - started) / 1000))} req/s so far`);
    }
    const seconds = (performance.now() - started) / 1000;
    const after = memoryMbOf(server.pid);
    const peak = memoryMbOf(server.pid, 'VmHWM');
    await sleep(opts.idleSeconds * 1000);
    await settle([server.pid]);
    const afterSettled = memoryMbOf(server.pid);
    let analytics: string | undefined;
    const usage = await requestJson(server.host, server.port, 'GET', '/api/client/v1/analytics/usage', { authorization: `Bearer ${server.token}` });
    if (usage.status === 200) analytics = JSON.stringify((usage.body as { totals?: unknown }).totals);
    const errors = server.errorLines();
    return { requests: done, idle, idleLater, after, afterSettled, peak, rps: done / seconds, trace, errors, ...(analytics ? { analytics } : {}) };
  } finally {
    await server.stop();
  }
}

function report(opts: Options, gateways: Gateway[], results: Map<string, TargetResults>, skipped: string[], memory: MemoryResult | null): void {
  const direct = results.get('direct');
  const med = (values: number[]) => (values.length ? median(values) : Number.NaN);
  const sum = (name: string) => {
    const r = results.get(name)!;
    return {
      c1p50: med(r.c1.map((s) => s.p50)),
      c1p90: med(r.c1.map((s) => s.p90)),
      c1p99: med(r.c1.map((s) => s.p99)),
      c1rps: med(r.c1.map((s) => s.rps)),
      overhead: med(r.c1.flatMap((s) => (s.headerMedian === undefined ? [] : [s.headerMedian]))),
      e50: med(r.embed.map((s) => s.p50)),
      e99: med(r.embed.map((s) => s.p99)),
      t50: med(r.ttfb.map((s) => s.ttfbP50)),
      t99: med(r.ttfb.map((s) => s.ttfbP99)),
      s50: med(r.ttfb.map((s) => s.totalP50)),
      rps: med(r.cN.map((s) => s.rps)),
      np50: med(r.cN.map((s) => s.p50)),
      np99: med(r.cN.map((s) => s.p99)),
      cpuUs: med(r.cpuUs),
      busy: med(r.busy),
      sparseCpuUs: med(r.sparseCpuUs),
    };
  };
  const names = gateways.map((g) => g.name);
  const s = new Map(names.map((n) => [n, sum(n)]));
  const d = s.get('direct')!;
  const added = (v: number, base: number) => (Number.isFinite(v) && Number.isFinite(base) ? ms(v - base) : '-');
  const show = (v: number, f: (x: number) => string = ms) => (Number.isFinite(v) ? f(v) : '-');

  write();
  write(`Medians of ${opts.rounds} round(s). "added" = the target minus direct in the same round set.`);
  for (const line of skipped) write(line);
  for (const n of names) if (results.get(n)!.failure) write(`${n} did not finish: ${results.get(n)!.failure}`);
  write();
  write(`Non-stream chat, concurrency 1: one keep-alive connection, ${opts.requests} requests per round, timed with performance.now()`);
  write(
    table(
      ['target', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'added p50 ms', 'added p99 ms', 'x-waygate-overhead-ms p50'],
      names.map((n) => {
        const x = s.get(n)!;
        return [n, show(x.c1rps, int), show(x.c1p50), show(x.c1p90), show(x.c1p99), n === 'direct' ? '' : added(x.c1p50, d.c1p50), n === 'direct' ? '' : added(x.c1p99, d.c1p99), show(x.overhead)];
      }),
    ),
  );
  write();
  write(`Embeddings, concurrency 1 (${Math.ceil(opts.requests / 2)} requests per round)`);
  write(
    table(
      ['target', 'p50 ms', 'p99 ms', 'added p50 ms', 'added p99 ms'],
      names.map((n) => {
        const x = s.get(n)!;
        return [n, show(x.e50), show(x.e99), n === 'direct' ? '' : added(x.e50, d.e50), n === 'direct' ? '' : added(x.e99, d.e99)];
      }),
    ),
  );
  write();
  write(`Streaming chat, concurrency 1 (${opts.streamRequests} streams per round, ${opts.chunks} content chunks + usage + [DONE]): time to the first body byte`);
  write(
    table(
      ['target', 'TTFB p50 ms', 'TTFB p99 ms', 'added TTFB p50 ms', 'added TTFB p99 ms', 'whole stream p50 ms'],
      names.map((n) => {
        const x = s.get(n)!;
        return [n, show(x.t50), show(x.t99), n === 'direct' ? '' : added(x.t50, d.t50), n === 'direct' ? '' : added(x.t99, d.t99), show(x.s50)];
      }),
    ),
  );
  write();
  write(`Non-stream chat, concurrency ${opts.connections}: autocannon, ${opts.duration} s per round after a ${opts.warmup} s warm-up`);
  write(
    table(
      ['target', 'req/s', 'p50 ms', 'p99 ms', 'x direct', 'gateway CPU µs/req', 'gateway CPU busy'],
      names.map((n) => {
        const x = s.get(n)!;
        return [n, show(x.rps, int), show(x.np50, String), show(x.np99, String), (x.rps / d.rps).toFixed(3), show(x.cpuUs, (v) => v.toFixed(1)), show(x.busy, (v) => `${Math.round(v * 100)}%`)];
      }),
    ),
  );
  if (opts.sparseRequests > 0) {
    write();
    write(`Sparse traffic: ${opts.sparseRequests} non-stream chat requests per round, one every ${opts.sparseIntervalMs} ms (gateway CPU per request, idle time included)`);
    const sparse = names.filter((n) => Number.isFinite(s.get(n)!.sparseCpuUs));
    write(table(['target', 'gateway CPU µs/req'], sparse.map((n) => [n, s.get(n)!.sparseCpuUs.toFixed(1)])));
  }
  if (opts.streams > 0) {
    write();
    write(`${opts.streams} streams started together, each on its own connection, held about ${((opts.chunks + 3) * opts.holdChunkMs) / 1000} s by the upstream`);
    write(
      table(
        ['target', 'ok', 'errors', 'max open at once', 'with usage', 'TTFB p50 ms', 'TTFB p99 ms', 'seconds', 'listen overflows, SYN retransmits', 'error kinds'],
        names.map((n) => {
          const h = results.get(n)!.held;
          if (!h) return [n, '-', '-', '-', '-', '-', '-', '-', '-', ''];
          const kernel = h.kernel ? `${h.kernel.listenOverflows}, ${h.kernel.synRetransmits}` : '-';
          return [n, h.ok, h.errors, h.maxOpen, h.withUsage, show(h.ttfbP50), show(h.ttfbP99), h.seconds.toFixed(2), kernel, h.errorKinds.join('; ')];
        }),
      ),
    );
  }
  write();
  write('Gateway memory (VmRSS from /proc/<pid>/status)');
  const memRows: (string | number)[][] = names
    .filter((n) => n !== 'direct')
    .map((n) => {
      const r = results.get(n)!;
      return [n, show(r.rssIdle ?? Number.NaN, (v) => v.toFixed(1)), show(r.rssEnd ?? Number.NaN, (v) => v.toFixed(1))];
    });
  write(table(['target', 'RSS idle MB (after start and setup)', 'RSS MB after the runs above'], memRows));
  if (memory) {
    write();
    write(
      `Waygate memory run (fresh server): idle ${memory.idle.toFixed(1)} MB after start and setup, ${memory.idleLater.toFixed(1)} MB ${opts.idleSeconds} s later; ` +
        `after ${int(memory.requests)} requests ${memory.after.toFixed(1)} MB (${memory.afterSettled.toFixed(1)} MB after ${opts.idleSeconds} s idle), ` +
        `peak during the load ${memory.peak.toFixed(1)} MB; ${int(memory.rps)} req/s at concurrency ${opts.memoryConnections}`,
    );
    write(`RSS trace: ${memory.trace.map((t) => `${int(t.requests)}: ${t.rss.toFixed(0)}`).join(', ')}`);
    if (memory.analytics) write(`analytics/usage totals afterwards: ${memory.analytics}`);
  }

  // Goals of issue 3.
  const w = s.get('Waygate');
  const p = s.get('Portkey');
  write();
  write('Ratios and goals (issue 3)');
  const goals: (string | number)[][] = [];
  const verdict = (ok: boolean | null) => (ok === null ? 'n/a' : ok ? 'met' : 'MISSED');
  const fin = (v: number | undefined) => v !== undefined && Number.isFinite(v);
  if (w) {
    const a50 = w.c1p50 - d.c1p50;
    const a99 = w.c1p99 - d.c1p99;
    goals.push(['Waygate added p50, concurrency 1', `${ms(a50)} ms`, '<= 0.3 ms', verdict(fin(a50) ? a50 <= 0.3 : null)]);
    goals.push(['Waygate added p99, concurrency 1', `${ms(a99)} ms`, '<= 1 ms', verdict(fin(a99) ? a99 <= 1 : null)]);
    const rd = w.rps / d.rps;
    goals.push([`Waygate / direct req/s, concurrency ${opts.connections}`, rd.toFixed(3), '>= 0.60', verdict(fin(rd) ? rd >= 0.6 : null)]);
    if (p) {
      const rp = w.rps / p.rps;
      goals.push([`Waygate / Portkey req/s, concurrency ${opts.connections}`, rp.toFixed(2), '>= 5', verdict(fin(rp) ? rp >= 5 : null)]);
    }
    const t = w.t50 - d.t50;
    const t99 = w.t99 - d.t99;
    goals.push(['Waygate added TTFB p50 (p99), streaming', `${ms(t)} (${ms(t99)}) ms`, '<= 1 ms', verdict(fin(t) ? t <= 1 : null)]);
    const held = results.get('Waygate')!.held;
    if (held) {
      goals.push([
        `Waygate ${held.streams} concurrent streams`,
        `${held.errors} errors, ${held.maxOpen} streaming at once`,
        `0 errors, ${held.streams} at once`,
        verdict(held.errors === 0 && held.maxOpen === held.streams),
      ]);
    }
    if (memory) {
      goals.push([
        'Waygate RSS idle (after start; after more idle time)',
        `${memory.idle.toFixed(1)} MB; ${memory.idleLater.toFixed(1)} MB`,
        '< 80 MB once idle',
        // Idle is the later reading: 2 s after setup, V8 still holds the young generation that start-up grew to its
        // maximum (about 16 MB), which only its memory reducer gives back, 10 to 30 s later (bench/README.md).
        verdict(memory.idleLater < 80),
      ]);
      goals.push([
        `Waygate RSS after ${int(memory.requests)} requests (right after; after idle time)`,
        `${memory.after.toFixed(1)} MB; ${memory.afterSettled.toFixed(1)} MB`,
        '< 150 MB',
        verdict(memory.requests >= 1_000_000 ? memory.after < 150 : null),
      ]);
    } else {
      const idle = results.get('Waygate')!.rssIdle;
      goals.push(['Waygate RSS after start and setup', `${show(idle ?? Number.NaN, (v) => v.toFixed(1))} MB`, '< 80 MB', verdict(fin(idle) ? idle! < 80 : null)]);
    }
  }
  const bp = s.get('bare proxy');
  if (bp) {
    goals.push(['bare proxy added p50 / p99, concurrency 1', `${added(bp.c1p50, d.c1p50)} / ${added(bp.c1p99, d.c1p99)} ms`, '(the hop itself)', '']);
    goals.push([`bare proxy / direct req/s, concurrency ${opts.connections}`, (bp.rps / d.rps).toFixed(3), '(the hop itself)', '']);
    goals.push(['bare proxy added TTFB p50', `${added(bp.t50, d.t50)} ms`, '(the hop itself)', '']);
    if (w) {
      goals.push(['Waygate minus bare proxy: p50 / p99, concurrency 1', `${added(w.c1p50, bp.c1p50)} / ${added(w.c1p99, bp.c1p99)} ms`, "(Waygate's own)", '']);
      goals.push(['Waygate minus bare proxy: TTFB p50', `${added(w.t50, bp.t50)} ms`, "(Waygate's own)", '']);
      goals.push(['Waygate minus bare proxy: CPU per request', `${(w.cpuUs - bp.cpuUs).toFixed(1)} µs`, "(Waygate's own)", '']);
    }
  }
  const fl = s.get(FLOOR_LABEL);
  if (fl) {
    goals.push([`floor gateway / direct req/s, concurrency ${opts.connections}`, (fl.rps / d.rps).toFixed(3), "(a call's duties, no framework)", '']);
    goals.push(['floor gateway CPU per request', `${fl.cpuUs.toFixed(1)} µs`, "(a call's duties, no framework)", '']);
    if (w) goals.push([`Waygate / floor gateway req/s, concurrency ${opts.connections}`, (w.rps / fl.rps).toFixed(3), '', '']);
  }
  const ff = s.get(FASTIFY_FLOOR_LABEL);
  if (ff) {
    goals.push([`floor on Fastify / direct req/s, concurrency ${opts.connections}`, (ff.rps / d.rps).toFixed(3), '(the duties on Fastify)', '']);
    goals.push(['floor on Fastify CPU per request', `${ff.cpuUs.toFixed(1)} µs`, '(the duties on Fastify)', '']);
    if (fl) goals.push(['floor on Fastify minus floor gateway: CPU per request', `${(ff.cpuUs - fl.cpuUs).toFixed(1)} µs`, '(what the framework costs)', '']);
    if (w) goals.push(['Waygate minus floor on Fastify: CPU per request', `${(w.cpuUs - ff.cpuUs).toFixed(1)} µs`, "(Waygate's own layers)", '']);
  }
  const wl = s.get(LIMITED_LABEL);
  if (wl) {
    goals.push([`Waygate with a limited token / direct req/s, concurrency ${opts.connections}`, (wl.rps / d.rps).toFixed(3), '(a budget and a rate limit)', '']);
    if (w) {
      goals.push(['Waygate with a limited token minus Waygate: CPU per request', `${(wl.cpuUs - w.cpuUs).toFixed(1)} µs`, '(what limits cost)', '']);
      goals.push(['Waygate with a limited token minus Waygate: p50 / p99, concurrency 1', `${added(wl.c1p50, w.c1p50)} / ${added(wl.c1p99, w.c1p99)} ms`, '(what limits cost)', '']);
    }
  }
  const np = s.get(NO_POLL_LABEL);
  if (w && np) {
    goals.push(['Waygate minus Waygate without polling: p50 / p99, concurrency 1', `${added(w.c1p50, np.c1p50)} / ${added(w.c1p99, np.c1p99)} ms`, '(what polling buys)', '']);
    goals.push(['Waygate minus Waygate without polling: TTFB p50', `${added(w.t50, np.t50)} ms`, '(what polling buys)', '']);
    goals.push([`Waygate / Waygate without polling req/s, concurrency ${opts.connections}`, (w.rps / np.rps).toFixed(3), '(what polling costs)', '']);
    if (Number.isFinite(w.sparseCpuUs) && Number.isFinite(np.sparseCpuUs)) {
      goals.push(['Waygate minus Waygate without polling: CPU per sparse request', `${(w.sparseCpuUs - np.sparseCpuUs).toFixed(1)} µs`, '(what polling costs)', '']);
    }
  }
  if (p) {
    goals.push(['Portkey added p50 / p99, concurrency 1', `${added(p.c1p50, d.c1p50)} / ${added(p.c1p99, d.c1p99)} ms`, '(reference)', '']);
    goals.push([`Portkey / direct req/s, concurrency ${opts.connections}`, (p.rps / d.rps).toFixed(3), '(reference)', '']);
    goals.push(['Portkey added TTFB p50', `${added(p.t50, d.t50)} ms`, '(reference)', '']);
  }
  if (goals.length) write(table(['figure', 'measured', 'goal', ''], goals));
  else write('(no gateway measured: only direct)');
  if (!direct) write('direct was not measured');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  inference().catch((err: unknown) => {
    process.stderr.write(`benchmark failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exit(1);
  });
}
