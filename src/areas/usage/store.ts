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

/** Events of one batch summed per period and attribution, sorted so concurrent flushes lock rows in one order. */
function rollupsOf(events: UsageEvent[], size: number): Rollup[] {
  const byKey = new Map<string, Rollup>();
  for (const e of events) {
    const hour = Math.floor(e.createdAt / size) * size;
    const key = JSON.stringify([e.tenantId, e.projectId, hour, e.model, e.service, e.tokenId ?? '', e.userId ?? '']);
    let rollup = byKey.get(key);
    if (!rollup) {
      rollup = {
        tenant_id: e.tenantId, project_id: e.projectId, hour, model: e.model, service: e.service, token_id: e.tokenId ?? '', user_id: e.userId ?? '',
        requests: 0, errors: 0, input_tokens: 0, output_tokens: 0, cost: 0, latency_ms: 0, upstream_latency_ms: 0,
      };
      byKey.set(key, rollup);
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

/** SQLite allows 32,766 bound values per statement; 21 columns x 500 rows stays well below. */
const CHUNK = 500;

function chunks<T>(items: T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += CHUNK) out.push(items.slice(i, i + CHUNK));
  return out;
}

const EVENT_COLUMNS = [
  'id', 'tenant_id', 'project_id', 'token_id', 'user_id', 'model', 'provider', 'service', 'endpoint', 'input_tokens', 'output_tokens',
  'total_tokens', 'cost', 'currency', 'latency_ms', 'upstream_latency_ms', 'status', 'request_id', 'session_id', 'streamed', 'created_at',
] as const;

function eventValues(e: UsageEvent): unknown[] {
  return [
    e.id, e.tenantId, e.projectId, e.tokenId, e.userId, e.model, e.provider, e.service, e.endpoint, e.inputTokens, e.outputTokens,
    e.inputTokens + e.outputTokens, e.cost, e.currency, e.latencyMs, e.upstreamLatencyMs, e.status, e.requestId, e.sessionId,
    e.streamed ? 1 : 0, e.createdAt,
  ];
}

export class UsageStore {
  /** Insert statements by row count: Kysely's builder costs more than the write itself at thousands of calls a second. */
  private readonly insertStatements = new Map<number, string>();

  constructor(private readonly db: Db, private readonly dialect: Dialect, private readonly transaction: Transactor) {}

  private insertStatement(rows: number): string {
    let text = this.insertStatements.get(rows);
    if (!text) {
      let n = 0;
      const row = () => `(${EVENT_COLUMNS.map(() => (this.dialect === 'postgres' ? `$${++n}` : '?')).join(', ')})`;
      text = `insert into usage_events (${EVENT_COLUMNS.join(', ')}) values ${Array.from({ length: rows }, row).join(', ')}`;
      this.insertStatements.set(rows, text);
    }
    return text;
  }

  /** Appends events and adds them to the hourly and daily rollups, in one transaction. */
  async insertMany(events: UsageEvent[]): Promise<void> {
    await this.transaction(async (trx) => {
      for (const part of chunks(events)) {
        await trx.executeQuery(CompiledQuery.raw(this.insertStatement(part.length), part.flatMap(eventValues)));
      }
      for (const { table, column, size } of ROLLUPS) {
        for (const part of chunks(rollupsOf(events, size))) {
          const rows = part.map(({ hour, ...rest }) => ({ ...rest, [column]: hour }));
          // Both tables have the same columns but for the period's name.
          await trx
            .insertInto(table as 'usage_hourly')
            .values(rows as Rollup[])
            .onConflict((oc) =>
              oc.columns(['tenant_id', 'project_id', column as 'hour', 'model', 'service', 'token_id', 'user_id']).doUpdateSet(() => ({
                requests: sql`${sql.ref(`${table}.requests`)} + excluded.requests`,
                errors: sql`${sql.ref(`${table}.errors`)} + excluded.errors`,
                input_tokens: sql`${sql.ref(`${table}.input_tokens`)} + excluded.input_tokens`,
                output_tokens: sql`${sql.ref(`${table}.output_tokens`)} + excluded.output_tokens`,
                cost: sql`${sql.ref(`${table}.cost`)} + excluded.cost`,
                latency_ms: sql`${sql.ref(`${table}.latency_ms`)} + excluded.latency_ms`,
                upstream_latency_ms: sql`${sql.ref(`${table}.upstream_latency_ms`)} + excluded.upstream_latency_ms`,
              })),
            )
            .execute();
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

  async ping(): Promise<void> {
    await sql`select 1`.execute(this.db);
  }
}
