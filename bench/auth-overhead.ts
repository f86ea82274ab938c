/**
 * Auth-overhead benchmark (issue 2, part 13): what token authentication + RBAC (and a database read, and an
 * audited denial) cost per request, measured against the unauthenticated liveness probe in the same run.
 *
 *   node --import tsx bench/auth-overhead.ts [--rounds 3] [--requests 5000] [--duration 5] [--connections 32]
 *        [--entry tsx|dist] [--database postgres://...] [--log-level info] [--no-pin]
 *
 * Waygate runs as a child process on a loopback port with a temp data directory, pinned to CPU 0; this process
 * (the load generator) pins itself to CPU 1. Both only when taskset exists and there are at least 2 CPUs.
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { loaded, median, sequential, type Sample, type Target } from './lib/measure.js';
import { entryOption, loadOptions, type Entry, type LoadOptions } from './lib/options.js';
import { int, machine, ms, pinSelf, table } from './lib/report.js';
import { hasTaskset, startServer, type BenchServer } from './lib/server.js';

interface Options extends LoadOptions {
  entry: Exclude<Entry, 'build'>;
  database: string | undefined;
  logLevel: string;
  pin: boolean;
}

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      rounds: { type: 'string', default: '3' },
      requests: { type: 'string', default: '5000' },
      'warmup-requests': { type: 'string', default: '500' },
      duration: { type: 'string', default: '5' },
      warmup: { type: 'string', default: '1' },
      connections: { type: 'string', default: '32' },
      entry: { type: 'string', default: 'tsx' },
      database: { type: 'string' },
      'log-level': { type: 'string', default: 'info' },
      'no-pin': { type: 'boolean', default: false },
    },
  });
  return {
    ...loadOptions(values),
    entry: entryOption(values.entry, ['tsx', 'dist']),
    database: values.database,
    logLevel: values['log-level'] ?? 'info',
    pin: !values['no-pin'],
  };
}

function targets(server: BenchServer): Target[] {
  const bearer = { authorization: `Bearer ${server.token}` };
  return [
    { label: '(a) GET /api/health/live (no auth)', path: '/api/health/live', headers: {}, expectStatus: 200 },
    { label: '(b) GET /api/client/v1/token (token auth + RBAC)', path: '/api/client/v1/token', headers: bearer, expectStatus: 200 },
    { label: '(c) GET /api/client/v1/audit/logs?limit=1 (auth + RBAC + DB read)', path: '/api/client/v1/audit/logs?limit=1', headers: bearer, expectStatus: 200 },
    {
      label: '(d) GET /api/client/v1/token, unknown token (401, cached as unknown + audit event)',
      path: '/api/client/v1/token',
      headers: { authorization: 'Bearer wgt_unknownunknownunknownunknownunknown0000000' },
      expectStatus: 401,
    },
  ];
}

const write = (text = '') => process.stdout.write(`${text}\n`);

export async function authOverhead(argv: string[] = process.argv.slice(2)): Promise<void> {
  const opts = options(argv);
  const info = machine();
  const pinned = opts.pin && hasTaskset() && info.nproc >= 2 && pinSelf('1');
  const server = await startServer({ entry: opts.entry, databaseUrl: opts.database, logLevel: opts.logLevel, cpus: pinned ? '0' : null });
  const onSignal = () => void server.stop().then(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  const list = targets(server);
  const c1: Sample[][] = list.map(() => []);
  const cN: Sample[][] = list.map(() => []);
  /** Server CPU µs per request and the server's CPU utilisation (1 = one core busy) during the loaded runs. */
  const cpuUs: number[][] = list.map(() => []);
  const busy: number[][] = list.map(() => []);
  let serverErrors: string[] = [];
  try {
    write(`Waygate auth-overhead benchmark, ${info.date}`);
    write(`server pid ${server.pid} on ${server.baseUrl} (entry ${opts.entry}, ${opts.database ? 'PostgreSQL' : 'SQLite'}, LOG_LEVEL=${opts.logLevel})`);
    write(pinned ? 'server pinned to CPU 0, load generator to CPU 1 (taskset)' : 'not pinned (no taskset, fewer than 2 CPUs, or --no-pin)');
    // One discarded pass over everything first, so the JIT and the database caches are warm before round 1.
    for (const target of list) {
      await sequential(server.host, server.port, target, opts.warmupRequests * 4, 0);
      await loaded(server.baseUrl, target, opts.connections, Math.max(1, opts.warmup), 0);
    }
    for (let round = 1; round <= opts.rounds; round++) {
      // Each round starts with a different endpoint, so warm-up and drift do not favour one of them.
      const order = list.map((_, k) => (k + round - 1) % list.length);
      for (const i of order) c1[i]!.push(await sequential(server.host, server.port, list[i]!, opts.requests, opts.warmupRequests));
      for (const i of order) {
        if (opts.warmup > 0) await loaded(server.baseUrl, list[i]!, opts.connections, opts.warmup, 0);
        const cpuBefore = server.cpuSeconds();
        const sample = await loaded(server.baseUrl, list[i]!, opts.connections, opts.duration, 0);
        const cpu = server.cpuSeconds() - cpuBefore;
        cN[i]!.push(sample);
        cpuUs[i]!.push((cpu / sample.requests) * 1e6);
        busy[i]!.push(cpu / sample.seconds);
      }
      write(`round ${round}/${opts.rounds}: c=1 req/s ${c1.map((s) => int(s.at(-1)!.rps)).join(' / ')}; c=${opts.connections} req/s ${cN.map((s) => int(s.at(-1)!.rps)).join(' / ')}`);
    }
    serverErrors = server.errorLines();
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await server.stop();
  }

  const summary = (samples: Sample[][]) =>
    samples.map((s) => ({ rps: median(s.map((x) => x.rps)), p50: median(s.map((x) => x.p50)), p90: median(s.map((x) => x.p90)), p99: median(s.map((x) => x.p99)) }));
  const one = summary(c1);
  const many = summary(cN);
  const header = ['endpoint', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms'];
  const rows = (s: ReturnType<typeof summary>) => list.map((t, i) => [t.label, int(s[i]!.rps), ms(s[i]!.p50), ms(s[i]!.p90), ms(s[i]!.p99)]);
  const cpu = list.map((_, i) => ({ us: median(cpuUs[i]!), busy: median(busy[i]!) }));

  write();
  write(`Machine: ${info.nproc} CPUs (${info.cpuModel}), ${info.memoryGb} GB, Node ${info.node}, ${info.platform}; load average at start ${info.loadAverage}`);
  write(`Medians of ${opts.rounds} rounds.`);
  write();
  write(`Concurrency 1: one keep-alive connection, ${opts.requests} sequential requests per round after ${opts.warmupRequests} warm-up requests, timed with performance.now()`);
  write(table(header, rows(one)));
  write();
  write(`Concurrency ${opts.connections}: autocannon, ${opts.duration} s per round after a ${opts.warmup} s warm-up`);
  write(
    table(
      [...header, 'server CPU µs/req', 'server CPU busy'],
      rows(many).map((row, i) => [...row, cpu[i]!.us.toFixed(1), `${Math.round(cpu[i]!.busy * 100)}%`]),
    ),
  );
  write();
  write('Cost against (a) in the same run (ratio of req/s; added latency in ms)');
  write(
    table(
      [
        'compared',
        'c=1 req/s ratio',
        'c=1 added p50 ms',
        'c=1 added p99 ms',
        `c=${opts.connections} req/s ratio`,
        `c=${opts.connections} added p50 ms`,
        `c=${opts.connections} added server CPU µs/req`,
      ],
      list.slice(1).map((t, j) => {
        const i = j + 1;
        return [
          `${t.label.slice(0, 3)} / (a)`,
          (one[i]!.rps / one[0]!.rps).toFixed(3),
          ms(one[i]!.p50 - one[0]!.p50),
          ms(one[i]!.p99 - one[0]!.p99),
          (many[i]!.rps / many[0]!.rps).toFixed(3),
          ms(many[i]!.p50 - many[0]!.p50),
          (cpu[i]!.us - cpu[0]!.us).toFixed(1),
        ];
      }),
    ),
  );
  if (serverErrors.length > 0) {
    write();
    write(`The server logged ${serverErrors.length} error line(s); first: ${serverErrors[0]!.slice(0, 500)}`);
    process.exitCode = 1;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  authOverhead().catch((err: unknown) => {
    process.stderr.write(`benchmark failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
