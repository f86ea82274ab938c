/**
 * Analytics benchmark (issue 3, analytics at scale): the overview and usage reports over 1,000,000 metered calls,
 * served from the daily and hourly rollups (plus the raw events of the partial edge hours), against the naive way,
 * the same sums grouped straight over usage_events, in the same run on the same database.
 *
 *   node --import tsx bench/analytics.ts [--rows 1000000] [--batch 5000] [--days 30] [--rounds 5]
 *        [--database postgres://.../empty_db] [--seed 1]
 *
 * In process, no HTTP: a Context (src/context.ts) on a temp data directory and a SQLite file in it, or on the given
 * empty PostgreSQL database. Events go in through UsageStore.insertMany in batches (the metering path, which also
 * builds usage_hourly and usage_daily), in time order, spread over `--days` days: 5 models, 3 services, 20 API tokens (4 users),
 * a third of the calls (`--session-percent`, 33) in one of 20,000 tracing sessions, 3% errors. Each round runs every query once, rollup and
 * naive, in a rotating order; the tables show medians. Totals of both ways are compared and must agree.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import pino from 'pino';
import type { GroupBy, Interval, Range } from '../src/areas/analytics/service.js';
import { UsageStore, type UsageEvent } from '../src/areas/usage/store.js';
import { DAY_MS, HOUR_MS } from '../src/platform/time.js';
import { loadConfig } from '../src/config.js';
import { createContext, type Context } from '../src/context.js';
import type { ProjectScope } from '../src/http/principal.js';
import { median } from './lib/measure.js';
import { wholeNumber } from './lib/options.js';
import { int, machine, ms, table } from './lib/report.js';

interface Options {
  rows: number;
  batch: number;
  days: number;
  rounds: number;
  database: string | undefined;
  seed: number;
  /** Share of calls in a tracing session, in percent (sessions are found differently when they are rare). */
  sessionPercent: number;
}

function options(argv: string[]): Options {
  // `npm run bench` hands every benchmark the same options; the ones meant for the others are ignored here.
  const { values: parsed } = parseArgs({
    args: argv,
    strict: false,
    options: {
      rows: { type: 'string', default: '1000000' },
      batch: { type: 'string', default: '5000' },
      days: { type: 'string', default: '30' },
      rounds: { type: 'string', default: '5' },
      database: { type: 'string' },
      seed: { type: 'string', default: '1' },
      'session-percent': { type: 'string', default: '33' },
    },
  });
  const values = parsed as Record<string, string | undefined>;
  if (values.database !== undefined && !/^postgres(ql)?:\/\//.test(values.database)) throw new Error('--database must be a postgres:// URL');
  return {
    rows: wholeNumber('rows', values.rows),
    batch: wholeNumber('batch', values.batch),
    days: wholeNumber('days', values.days),
    rounds: wholeNumber('rounds', values.rounds),
    database: values.database,
    seed: wholeNumber('seed', values.seed),
    sessionPercent: Math.min(100, wholeNumber('session-percent', values['session-percent'], 0)),
  };
}

const MODELS = [
  { key: 'gpt-4o', share: 0.35, in: 2.5, out: 10 },
  { key: 'gpt-4o-mini', share: 0.3, in: 0.15, out: 0.6 },
  { key: 'claude-sonnet', share: 0.15, in: 3, out: 15 },
  { key: 'text-embedding-3-small', share: 0.15, in: 0.02, out: 0 },
  { key: 'local-chat', share: 0.05, in: 0, out: 0 },
];
const SERVICES = ['chat', 'embeddings', 'agents'];
const TOKENS = 20;
const USERS = 4;
const SESSIONS = 20_000;

/** mulberry32: a small seeded generator, so every run inserts the same events. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4_294_967_296;
  };
}

interface Fixture {
  scope: ProjectScope;
  tokenIds: string[];
  range: Range;
}

/** Inserts `rows` events in time order over the range, `batch` per insertMany; returns per-batch times in ms. */
async function fill(ctx: Context, fixture: Fixture, opts: Options, progress: (done: number) => void): Promise<number[]> {
  const store = new UsageStore(ctx.database.db, ctx.database.dialect, ctx.database.transaction);
  const next = random(opts.seed);
  const span = fixture.range.to - fixture.range.from;
  const pickModel = () => {
    let r = next();
    for (const model of MODELS) if ((r -= model.share) < 0) return model;
    return MODELS[0]!;
  };
  const times: number[] = [];
  for (let start = 0; start < opts.rows; start += opts.batch) {
    const events: UsageEvent[] = [];
    for (let i = start; i < Math.min(opts.rows, start + opts.batch); i++) {
      const model = pickModel();
      const token = Math.floor(next() * TOKENS);
      const inputTokens = 20 + Math.floor(next() * 2000);
      const outputTokens = model.out === 0 ? 0 : Math.floor(next() * 800);
      const status = next() < 0.03 ? (next() < 0.5 ? 429 : 502) : 200;
      const latencyMs = 50 + next() * 2000;
      events.push({
        id: `use_bench_${i.toString(36).padStart(8, '0')}`,
        tenantId: fixture.scope.tenantId,
        projectId: fixture.scope.projectId,
        tokenId: fixture.tokenIds[token]!,
        userId: `usr_bench_${token % USERS}`,
        model: model.key,
        provider: 'openai-compatible',
        service: model.out === 0 ? 'embeddings' : SERVICES[Math.floor(next() * SERVICES.length)]!,
        endpoint: model.out === 0 ? '/embeddings' : '/chat/completions',
        inputTokens,
        outputTokens,
        cost: (inputTokens * model.in + outputTokens * model.out) / 1e6,
        currency: 'USD',
        latencyMs,
        upstreamLatencyMs: latencyMs * 0.9,
        status,
        requestId: `req_bench_${i.toString(36)}`,
        sessionId: next() < opts.sessionPercent / 100 ? `sess_${Math.floor(next() * SESSIONS)}` : null,
        streamed: false,
        // In time order, like live traffic; the first event exactly at `from`, the last before `to`.
        createdAt: fixture.range.from + Math.floor((i / opts.rows) * span),
      });
    }
    const t0 = performance.now();
    await store.insertMany(events);
    times.push(performance.now() - t0);
    progress(start + events.length);
  }
  return times;
}

interface Totals {
  requests: number;
  input_tokens: number;
  cost: number;
}

/** The naive way: every sum grouped straight over usage_events for the whole range (no rollups). */
function naive(ctx: Context, scope: ProjectScope, range: Range) {
  const { db, dialect } = ctx.database;
  const where = sql`tenant_id = ${scope.tenantId} and project_id = ${scope.projectId} and created_at >= ${range.from} and created_at <= ${range.to}`;
  const sums = sql`count(*) as requests, sum(case when status >= 400 then 1 else 0 end) as errors, sum(input_tokens) as input_tokens,
    sum(output_tokens) as output_tokens, sum(cost) as cost, sum(latency_ms) as latency_ms, sum(upstream_latency_ms) as upstream_latency_ms`;
  const bucket = (size: number) => `(created_at / ${size}) * ${size}`;
  const month = dialect === 'postgres' ? "to_char(to_timestamp(created_at / 1000.0) at time zone 'UTC', 'YYYY-MM')" : "strftime('%Y-%m', created_at / 1000, 'unixepoch')";
  const grouped = async (columns: string | null) => {
    const query = columns
      ? sql<Record<string, unknown>>`select ${sql.raw(columns)}, ${sums} from usage_events where ${where} group by ${sql.raw(columns)}`
      : sql<Record<string, unknown>>`select ${sums} from usage_events where ${where}`;
    return (await query.execute(db)).rows;
  };
  const totalsOf = (rows: Record<string, unknown>[]): Totals => ({
    requests: rows.reduce((s, r) => s + Number(r.requests), 0),
    input_tokens: rows.reduce((s, r) => s + Number(r.input_tokens ?? 0), 0),
    cost: rows.reduce((s, r) => s + Number(r.cost ?? 0), 0),
  });
  const sessions = async () => {
    // The same two queries the service runs (they read raw events in both ways).
    const recent = await sql<{ session_id: string }>`select session_id from usage_events where ${where} and session_id is not null order by created_at desc limit 1000`.execute(db);
    const ids = [...new Set(recent.rows.map((r) => r.session_id))].slice(0, 10);
    if (ids.length === 0) return [];
    return (await sql`select session_id, count(*) as requests, min(created_at) as first_at, max(created_at) as last_at from usage_events where ${where} and session_id in (${sql.join(ids)}) group by session_id`.execute(db)).rows;
  };
  const column = { model: 'model', user: 'user_id', token: 'token_id', service: 'service' } as const;
  return {
    async overview(): Promise<Totals> {
      const [total] = await Promise.all([grouped(null), grouped(bucket(DAY_MS)), sessions()]);
      return totalsOf(total);
    },
    /** The grouping, and the series: model x (hour, day or month) for group_by model, else by day. */
    async usage(groupBy: GroupBy, interval: Interval): Promise<Totals> {
      const step = groupBy !== 'model' || interval === 'day' ? bucket(DAY_MS) : interval === 'hour' ? bucket(HOUR_MS) : month;
      const [rows] = await Promise.all([grouped(column[groupBy]), grouped(groupBy === 'model' ? `model, ${step}` : step)]);
      return totalsOf(rows);
    },
  };
}

interface Query {
  label: string;
  rollup: () => Promise<Totals>;
  naive: () => Promise<Totals>;
}

function queries(ctx: Context, fixture: Fixture): Query[] {
  const { analytics } = ctx.services;
  const raw = naive(ctx, fixture.scope, fixture.range);
  const toTotals = (t: { requests: number; input_tokens: number; cost: number }): Totals => ({ requests: t.requests, input_tokens: t.input_tokens, cost: t.cost });
  const list: Query[] = [
    {
      label: 'overview (stats, daily series, 10 recent sessions)',
      rollup: async () => toTotals((await analytics.overview(fixture.scope, fixture.range)).stats),
      naive: () => raw.overview(),
    },
  ];
  for (const interval of ['hour', 'day', 'month'] as const) {
    list.push({
      label: `usage group_by=model interval=${interval}`,
      rollup: async () => toTotals((await analytics.usageReport(fixture.scope, fixture.range, { groupBy: 'model', interval })).totals),
      naive: () => raw.usage('model', interval),
    });
  }
  for (const groupBy of ['user', 'token', 'service'] as const) {
    list.push({
      label: `usage group_by=${groupBy} (daily series)`,
      rollup: async () => toTotals((await analytics.usageReport(fixture.scope, fixture.range, { groupBy })).totals),
      naive: () => raw.usage(groupBy, 'day'),
    });
  }
  return list;
}

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

function sameTotals(a: Totals, b: Totals): boolean {
  return a.requests === b.requests && a.input_tokens === b.input_tokens && Math.abs(a.cost - b.cost) <= 1e-6 * Math.max(1, Math.abs(b.cost));
}

async function sizes(ctx: Context, dataDir: string): Promise<string> {
  const { db, dialect } = ctx.database;
  const count = async (tableName: string) => Number((await sql<{ n: number }>`select count(*) as n from ${sql.table(tableName)}`.execute(db)).rows[0]!.n);
  const [events, hourly, daily] = [await count('usage_events'), await count('usage_hourly'), await count('usage_daily')];
  let bytes = '';
  if (dialect === 'postgres') {
    const size = async (tableName: string) => Number((await sql<{ n: number }>`select pg_total_relation_size(${tableName}) as n`.execute(db)).rows[0]!.n);
    bytes = `; usage_events ${int((await size('usage_events')) / 2 ** 20)} MB, usage_hourly ${int((await size('usage_hourly')) / 2 ** 20)} MB, usage_daily ${int((await size('usage_daily')) / 2 ** 20)} MB (with indexes)`;
  } else {
    const file = path.join(dataDir, 'waygate.db');
    bytes = `; SQLite file ${int(fs.statSync(file).size / 2 ** 20)} MB`;
  }
  return `usage_events ${int(events)} rows, usage_hourly ${int(hourly)} rows, usage_daily ${int(daily)} rows${bytes}`;
}

const write = (text = '') => process.stdout.write(`${text}\n`);

export async function analyticsBench(argv: string[] = process.argv.slice(2)): Promise<void> {
  const opts = options(argv);
  const info = machine();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-bench-analytics-'));
  const config = loadConfig({
    WAYGATE_DATA_DIR: dataDir,
    DATABASE_URL: opts.database ?? `sqlite:${path.join(dataDir, 'waygate.db')}`,
    WAYGATE_ADMIN_EMAIL: 'bench@example.test',
    WAYGATE_ADMIN_PASSWORD: 'bench-password-not-secret',
    LOG_LEVEL: 'warn',
  });
  const ctx = await createContext(config, { logger: pino({ level: 'warn' }) });
  try {
    const scope = { tenantId: ctx.bootstrap.tenantId, projectId: ctx.bootstrap.projectId };
    const tokenIds: string[] = [];
    for (let i = 0; i < TOKENS; i++) {
      const { token } = await ctx.services.tokens.create({ kind: 'system', tenantId: scope.tenantId }, { name: `bench-${i}`, projectId: scope.projectId, role: 'member' });
      tokenIds.push(token.id);
    }
    // The API's default window: from the start of the day `days` back, to now (mid-hour, so both edges are partial).
    const now = Date.now();
    const range = { from: Math.floor((now - opts.days * DAY_MS) / DAY_MS) * DAY_MS, to: now };
    const fixture: Fixture = { scope, tokenIds, range };

    write(`Waygate analytics benchmark, ${info.date}`);
    write(`${opts.database ? 'PostgreSQL' : 'SQLite'}; ${int(opts.rows)} events over ${new Date(range.from).toISOString()} .. ${new Date(range.to).toISOString()}, batches of ${int(opts.batch)}`);
    let shown = 0;
    const started = performance.now();
    const batchMs = await fill(ctx, fixture, opts, (done) => {
      if (done - shown >= opts.rows / 10 || done === opts.rows) {
        shown = done;
        process.stderr.write(`  inserted ${int(done)} (${int(done / ((performance.now() - started) / 1000))} events/s)\n`);
      }
    });
    const insertSeconds = (performance.now() - started) / 1000;
    // Fresh statistics for both planners, as autovacuum (PostgreSQL) or a later ANALYZE would give a live database.
    await sql`analyze`.execute(ctx.database.db);
    const sizeLine = await sizes(ctx, dataDir);

    const list = queries(ctx, fixture);
    const rollupMs: number[][] = list.map(() => []);
    const naiveMs: number[][] = list.map(() => []);
    // A discarded pass first (caches, JIT), checking that both ways agree.
    for (const q of list) {
      const [a, b] = [await q.rollup(), await q.naive()];
      if (!sameTotals(a, b)) throw new Error(`${q.label}: rollup totals ${JSON.stringify(a)} differ from naive ${JSON.stringify(b)}`);
      if (a.requests !== opts.rows) throw new Error(`${q.label}: ${a.requests} requests counted, ${opts.rows} inserted`);
    }
    for (let round = 1; round <= opts.rounds; round++) {
      const order = list.map((_, k) => (k + round - 1) % list.length);
      for (const i of order) {
        // Alternate which way goes first, so neither always finds the other's pages in cache.
        const pair = round % 2 ? [list[i]!.rollup, list[i]!.naive] : [list[i]!.naive, list[i]!.rollup];
        const first = await timed(pair[0]!);
        const second = await timed(pair[1]!);
        (round % 2 ? rollupMs : naiveMs)[i]!.push(first.ms);
        (round % 2 ? naiveMs : rollupMs)[i]!.push(second.ms);
      }
      write(`round ${round}/${opts.rounds}: rollup ms ${list.map((_, i) => ms(rollupMs[i]!.at(-1)!)).join(' / ')}`);
    }

    write();
    write(`Machine: ${info.nproc} CPUs (${info.cpuModel}), ${info.memoryGb} GB, Node ${info.node}, ${info.platform}; load average at start ${info.loadAverage}`);
    write(sizeLine);
    write();
    write(
      `Insert through UsageStore.insertMany (events + rollup upserts in one transaction per batch): ${int(opts.rows / insertSeconds)} events/s overall ` +
        `(${insertSeconds.toFixed(1)} s); per batch of ${int(opts.batch)}: median ${ms(median(batchMs))} ms, max ${ms(Math.max(...batchMs))} ms`,
    );
    write();
    write(`Query time over the whole ${opts.days}-day range, median of ${opts.rounds} rounds (ms)`);
    write(
      table(
        ['query', 'rollup + edges', 'naive GROUP BY', 'naive / rollup'],
        list.map((q, i) => {
          const r = median(rollupMs[i]!);
          const n = median(naiveMs[i]!);
          return [q.label, ms(r), ms(n), `${(n / r).toFixed(1)}x`];
        }),
      ),
    );
  } finally {
    await ctx.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  analyticsBench().catch((err: unknown) => {
    process.stderr.write(`benchmark failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
