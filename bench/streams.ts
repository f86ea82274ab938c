/**
 * What a streamed chat call costs the gateway's CPU, per stream and per event: streams of many events at a fixed
 * concurrency, through Waygate and through floor on Fastify (bench/lib/floor.ts: the same upstream's bytes forwarded
 * as they come, with a usage row and a log line), each pinned to CPU 0, the upstream and the client on CPU 1. The two
 * (three with `--against`) alternate round by round; the tables show each round and the ratios within it, since this
 * VM's speed moves between rounds more than a change does.
 *
 *   node --import tsx bench/streams.ts [--chunks 200] [--streams 300] [--rounds 5] [--concurrency 8] [--against <git ref>] [--no-pin]
 *   npm run bench -- streams --against HEAD~1
 */
import http from 'node:http';
import os from 'node:os';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { gateway, setupWaygate, startFloor, WAYGATE_MODEL, type Gateway } from './inference.js';
import { median } from './lib/measure.js';
import { cleanupsOnExit, wholeNumber } from './lib/options.js';
import { pinSelf, table } from './lib/report.js';
import { buildsToCompare, cpuSecondsOf, hasTaskset, startServer } from './lib/server.js';
import { streamOnce } from './lib/stream.js';
import { startUpstream } from './lib/upstream.js';

const WARMUP_STREAMS = 200;
const PAUSE_MS = 1_500;

function parse(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    options: {
      chunks: { type: 'string', default: '200' },
      streams: { type: 'string', default: '300' },
      rounds: { type: 'string', default: '5' },
      concurrency: { type: 'string', default: '8' },
      against: { type: 'string' },
      'no-pin': { type: 'boolean', default: false },
    },
  });
  return {
    chunks: wholeNumber('chunks', values.chunks),
    streams: wholeNumber('streams', values.streams),
    rounds: wholeNumber('rounds', values.rounds),
    concurrency: wholeNumber('concurrency', values.concurrency),
    against: values.against,
    pin: !values['no-pin'] && hasTaskset(),
  };
}

/** `count` streams at `concurrency`; every one must end with [DONE]. Returns the events received. */
async function streamMany(target: Gateway, count: number, concurrency: number): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  let started = 0;
  let events = 0;
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (started < count) {
          started++;
          const result = await streamOnce(agent, target.host, target.port, target.stream);
          if (result.error || !result.done) throw new Error(`${target.name}: a stream failed: ${result.error ?? 'no [DONE]'}`);
          events += result.events;
        }
      }),
    );
  } finally {
    agent.destroy();
  }
  return events;
}

export async function streams(argv: string[]): Promise<void> {
  const opts = parse(argv);
  const pinned = opts.pin && os.cpus().length >= 2 && pinSelf('1');
  const [gatewayCpus, clientCpus] = pinned ? ['0', '1'] : [null, null];
  const cleanups = cleanupsOnExit();
  try {
    process.stdout.write(pinned ? 'gateways pinned to CPU 0; the fake upstream and the load generator to CPU 1 (taskset)\n' : 'not pinned (no taskset, fewer than 2 CPUs, or --no-pin)\n');
    const upstream = await startUpstream({ cpus: clientCpus, chunks: opts.chunks, holdChunkMs: 250 });
    cleanups.add(() => upstream.stop());
    const floor = await startFloor(upstream, gatewayCpus, true);
    cleanups.add(() => floor.server.stop());
    const targets: Gateway[] = [floor.gateway];
    const { current, against } = await buildsToCompare(opts.against, cleanups);
    const builds = [{ label: 'Waygate', main: current }, ...(against ? [{ label: `Waygate at ${against.label}`, main: against.main }] : [])];
    for (const build of builds) {
      const server = await startServer({ entry: 'tsx', mainFile: build.main, logLevel: 'info', cpus: gatewayCpus });
      cleanups.add(() => server.stop());
      const why = await setupWaygate(server, upstream);
      if (why) throw new Error(`${build.label}: ${why}`);
      targets.push(gateway(build.label, server.host, server.port, server.pid, '/api/client/v1', { authorization: `Bearer ${server.token}` }, WAYGATE_MODEL));
    }
    process.stdout.write(`${opts.streams} streams of ${opts.chunks} content chunks a round at concurrency ${opts.concurrency}, ${opts.rounds} rounds\n`);
    for (const target of targets) await streamMany(target, WARMUP_STREAMS, opts.concurrency);

    const perStream = new Map<string, number[]>(targets.map((t) => [t.name, []]));
    const rows: string[][] = [];
    let eventsPerStream = 0;
    for (let round = 0; round < opts.rounds; round++) {
      const order = round % 2 === 0 ? targets : [...targets].reverse();
      const row: string[] = [String(round + 1)];
      for (const target of order) {
        await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
        const before = cpuSecondsOf(target.pid!);
        const events = await streamMany(target, opts.streams, opts.concurrency);
        perStream.get(target.name)!.push(((cpuSecondsOf(target.pid!) - before) * 1e6) / opts.streams);
        eventsPerStream = events / opts.streams;
      }
      for (const target of targets) row.push(perStream.get(target.name)!.at(-1)!.toFixed(0));
      const ratio = (name: string) => perStream.get(name)!.at(-1)! / perStream.get(targets[0]!.name)!.at(-1)!;
      for (const target of targets.slice(1)) row.push(ratio(target.name).toFixed(2));
      if (targets[2]) row.push((perStream.get(targets[1]!.name)!.at(-1)! / perStream.get(targets[2].name)!.at(-1)!).toFixed(3));
      row.push(eventsPerStream.toFixed(0));
      rows.push(row);
    }
    const header = ['round', ...targets.map((t) => `${t.name} CPU µs/stream`), ...targets.slice(1).map((t) => `${t.name} × floor`)];
    if (targets[2]) header.push(`Waygate / ${targets[2].name}`);
    header.push('events/stream');
    process.stdout.write(`\n${table(header, rows)}\n`);
    const medians = targets.map((t) => `${t.name} ${median(perStream.get(t.name)!).toFixed(0)} µs a stream (${(median(perStream.get(t.name)!) / eventsPerStream).toFixed(1)} µs an event)`);
    process.stdout.write(`medians: ${medians.join('; ')}\n`);
    if (targets[2]) {
      const ratios = perStream.get(targets[1]!.name)!.map((v, i) => v / perStream.get(targets[2]!.name)![i]!);
      process.stdout.write(`Waygate / ${targets[2].name}, median of the per-round ratios: ${median(ratios).toFixed(3)}\n`);
    }
  } finally {
    await cleanups.run();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  streams(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`benchmark failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
