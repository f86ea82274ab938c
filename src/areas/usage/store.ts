import { CompiledQuery, sql } from 'kysely';
import type { Transactor } from '../../db/index.js';
import type { Db, Dialect, UsageHourlyTable } from '../../db/types.js';
import { DAY_MS, HOUR_MS } from '../../platform/time.js';

/** One model call, as metered (interface 4.3 reads these). */
export interface UsageEvent {
  id: string;
  tenantId: string;
  projectId: string;
  tokenId: string | null;
  userId: string | null;
  model: string;
  provider: string;
  service: string;
  endpoint: string;
  inputTokens: number;
  outputTokens: number;
  cost: number;
  currency: string;
  latencyMs: number;
  upstreamLatencyMs: number;
  status: number;
  requestId: string;
  sessionId: string | null;
  streamed: boolean;
  createdAt: number;
}

/** Whom a budget counts: a whole project, or one token in it. */
export interface UsageScope {
  tenantId: string;
  projectId: string;
  tokenId?: string;
}

/** The rollup tables: one row per project, period and attribution. */
const ROLLUPS = [
  { table: 'usage_hourly', column: 'hour', size: HOUR_MS },
  { table: 'usage_daily', column: 'day', size: DAY_MS },
] as const;

/** A rollup row; `hour` holds the period's start, whatever the table calls it. */
type Rollup = UsageHourlyTable;

/** Ids and keys hold no NUL, so joining with it cannot make two attributions one key. */
function attributionKey(e: UsageEvent, hour: number): string {
  return `${e.tenantId}\0${e.projectId}\0${hour}\0${e.model}\0${e.service}\0${e.tokenId ?? ''}\0${e.userId ?? ''}`;
}

function sameAttribution(r: Rollup, e: UsageEvent, hour: number): boolean {
  return (
    r.hour === hour && r.tenant_id === e.tenantId && r.project_id === e.projectId && r.model === e.model && r.service === e.service &&
    r.token_id === (e.tokenId ?? '') && r.user_id === (e.userId ?? '')
  );
}

/** Events of one batch summed per period and attribution, sorted so concurrent flushes lock rows in one order. */
function rollupsOf(events: UsageEvent[], size: number): Rollup[] {
  const byKey = new Map<string, Rollup>();
  let last: Rollup | null = null;
  for (const e of events) {
    const hour = Math.floor(e.createdAt / size) * size;
    // Most events of a batch share the previous one's attribution: that is checked first, without making (and
    // hashing) a key of some hundred characters twice per event.
    let rollup: Rollup | undefined = last && sameAttribution(last, e, hour) ? last : undefined;
    if (!rollup) {
      const key = attributionKey(e, hour);
      rollup = byKey.get(key);
      if (!rollup) {
        rollup = {
          tenant_id: e.tenantId, project_id: e.projectId, hour, model: e.model, service: e.service, token_id: e.tokenId ?? '', user_id: e.userId ?? '',
          requests: 0, errors: 0, input_tokens: 0, output_tokens: 0, cost: 0, latency_ms: 0, upstream_latency_ms: 0,
        };
        byKey.set(key, rollup);
      }
      last = rollup;
    }
    rollup.requests += 1;
    rollup.errors += e.status >= 400 ? 1 : 0;
    rollup.input_tokens += e.inputTokens;
    rollup.output_tokens += e.outputTokens;
    rollup.cost += e.cost;
    rollup.latency_ms += e.latencyMs;
    rollup.upstream_latency_ms += e.upstreamLatencyMs;
  }
  return [...byKey.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, rollup]) => rollup);
}

/**
 * Rows per statement: a few fixed sizes, so that a handful of statement texts (each kept prepared by the database
 * layer) cover every batch. Ten rows are about 0.1 ms of SQLite work: what a request may wait behind (insertMany).
 */
const ROW_COUNTS = [10, 4, 1];

function inStatementSizes<T>(items: T[]): T[][] {
  const out: T[][] = [];
  let start = 0;
  for (const size of ROW_COUNTS) {
    for (; items.length - start >= size; start += size) out.push(items.slice(start, start + size));
  }
  return out;
}

const EVENT_COLUMNS = [
  'id', 'tenant_id', 'project_id', 'token_id', 'user_id', 'model', 'provider', 'service', 'endpoint', 'input_tokens', 'output_tokens',
  'total_tokens', 'cost', 'currency', 'latency_ms', 'upstream_latency_ms', 'status', 'request_id', 'session_id', 'streamed', 'created_at',
] as const;

function eventValues(events: UsageEvent[]): unknown[] {
  const values: unknown[] = [];
  for (const e of events) {
    values.push(
      e.id, e.tenantId, e.projectId, e.tokenId, e.userId, e.model, e.provider, e.service, e.endpoint, e.inputTokens, e.outputTokens,
      e.inputTokens + e.outputTokens, e.cost, e.currency, e.latencyMs, e.upstreamLatencyMs, e.status, e.requestId, e.sessionId,
      e.streamed ? 1 : 0, e.createdAt,
    );
  }
  return values;
}

/** A rollup's attribution (the conflict target, the period's column last) and its sums, in insert order. */
const ROLLUP_KEYS = ['tenant_id', 'project_id', 'model', 'service', 'token_id', 'user_id'] as const;
const ROLLUP_SUMS = ['requests', 'errors', 'input_tokens', 'output_tokens', 'cost', 'latency_ms', 'upstream_latency_ms'] as const;

function rollupValues(rollups: Rollup[]): unknown[] {
  const values: unknown[] = [];
  for (const r of rollups) {
    values.push(r.tenant_id, r.project_id, r.model, r.service, r.token_id, r.user_id, r.hour);
    values.push(r.requests, r.errors, r.input_tokens, r.output_tokens, r.cost, r.latency_ms, r.upstream_latency_ms);
  }
  return values;
}

/** `(?, ?, ...)` or `($1, $2, ...)` for `rows` rows of `columns` values. */
function placeholders(dialect: Dialect, rows: number, columns: number): string {
  let n = 0;
  const row = () => `(${Array.from({ length: columns }, () => (dialect === 'postgres' ? `$${++n}` : '?')).join(', ')})`;
  return Array.from({ length: rows }, row).join(', ');
}

export class UsageStore {
  /**
   * Statement texts by table and row count (three counts, ROW_COUNTS): Kysely's builder costs more than the write
   * itself at thousands of calls a second, and an unchanged text lets SQLite reuse its prepared statement.
   */
  private readonly statements = new Map<string, string>();

  constructor(private readonly db: Db, private readonly dialect: Dialect, private readonly transaction: Transactor) {}

  private statement(name: string, rows: number, build: () => string): string {
    const key = `${name}:${rows}`;
    let text = this.statements.get(key);
    if (!text) {
      text = build();
      this.statements.set(key, text);
    }
    return text;
  }

  private insertEvents(rows: number): string {
    return this.statement('usage_events', rows, () => `insert into usage_events (${EVENT_COLUMNS.join(', ')}) values ${placeholders(this.dialect, rows, EVENT_COLUMNS.length)}`);
  }

  /** Adds rows to a rollup table: new attributions are inserted, existing ones get the sums added. */
  private upsertRollups(table: string, column: string, rows: number): string {
    return this.statement(table, rows, () => {
      const keys = [...ROLLUP_KEYS, column];
      const added = ROLLUP_SUMS.map((sum) => `${sum} = ${table}.${sum} + excluded.${sum}`).join(', ');
      return (
        `insert into ${table} (${[...keys, ...ROLLUP_SUMS].join(', ')}) values ${placeholders(this.dialect, rows, keys.length + ROLLUP_SUMS.length)} ` +
        `on conflict (tenant_id, project_id, ${column}, model, service, token_id, user_id) do update set ${added}`
      );
    });
  }

  /**
   * Appends events and adds them to the hourly and daily rollups, in one transaction. `between` runs between its
   * statements: SQLite runs each one synchronously on the event loop, so letting other work (requests) in there means
   * a request waits behind one statement (about 0.1 ms) rather than the whole write. The transaction keeps the one
   * connection meanwhile.
   */
  async insertMany(events: UsageEvent[], between: () => Promise<void> | void = () => undefined): Promise<void> {
    await this.transaction(async (trx) => {
      for (const part of inStatementSizes(events)) {
        await trx.executeQuery(CompiledQuery.raw(this.insertEvents(part.length), eventValues(part)));
        await between();
      }
      for (const { table, column, size } of ROLLUPS) {
        for (const part of inStatementSizes(rollupsOf(events, size))) {
          await trx.executeQuery(CompiledQuery.raw(this.upsertRollups(table, column, part.length), rollupValues(part)));
          await between();
        }
      }
    });
  }

  /** Tokens and cost a project (or one of its tokens) has used since an hour boundary: seeds budget counters. */
  async totalsSince(scope: UsageScope, since: number): Promise<{ tokens: number; cost: number }> {
    let query = this.db
      .selectFrom('usage_hourly')
      .select((eb) => [eb.fn.sum<number>(sql`input_tokens + output_tokens`).as('tokens'), eb.fn.sum<number>('cost').as('cost')])
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('hour', '>=', since);
    if (scope.tokenId !== undefined) query = query.where('token_id', '=', scope.tokenId);
    const row = await query.executeTakeFirst();
    return { tokens: Number(row?.tokens ?? 0), cost: Number(row?.cost ?? 0) };
  }
}
