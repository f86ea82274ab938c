import { sql, type RawBuilder } from 'kysely';
import { DAY_MS, HOUR_MS } from '../../platform/time.js';
import type { Db, Dialect } from '../../db/types.js';
import type { ProjectScope } from '../../http/principal.js';

/** Attributions analytics can group by (columns of both usage_events and usage_hourly). */
export type Dimension = 'model' | 'service' | 'token_id' | 'user_id';

export interface AggregateQuery {
  scope: ProjectScope;
  dimensions: Dimension[];
  /** Also group by hour or UTC day (start, in ms). */
  bucket?: 'hour' | 'day';
  /** Only this model key. */
  model?: string;
}

export interface AggregateRow {
  bucket: number | null;
  model: string | null;
  service: string | null;
  token_id: string | null;
  user_id: string | null;
  requests: number;
  errors: number;
  input_tokens: number;
  output_tokens: number;
  cost: number;
  latency_ms: number;
  upstream_latency_ms: number;
}

export interface SessionRow {
  session_id: string;
  requests: number;
  errors: number;
  input_tokens: number;
  output_tokens: number;
  cost: number;
  first_at: number;
  last_at: number;
  models: string;
}

/** Where sums come from: the daily or hourly rollups (whole days and hours) or the raw events (partial hours). */
interface Source {
  table: 'usage_hourly' | 'usage_daily' | 'usage_events';
  time: 'hour' | 'day' | 'created_at';
  requests: RawBuilder<number>;
  errors: RawBuilder<number>;
}

const HOURS: Source = { table: 'usage_hourly', time: 'hour', requests: sql<number>`sum(requests)`, errors: sql<number>`sum(errors)` };
const DAYS: Source = { table: 'usage_daily', time: 'day', requests: sql<number>`sum(requests)`, errors: sql<number>`sum(errors)` };
const EVENTS: Source = {
  table: 'usage_events',
  time: 'created_at',
  requests: sql<number>`count(*)`,
  errors: sql<number>`sum(case when status >= 400 then 1 else 0 end)`,
};

function toRow(row: Record<string, unknown>): AggregateRow {
  const text = (value: unknown) => (value === undefined || value === null || value === '' ? null : String(value));
  return {
    bucket: row.bucket === undefined || row.bucket === null ? null : Number(row.bucket),
    model: text(row.model),
    service: text(row.service),
    token_id: text(row.token_id),
    user_id: text(row.user_id),
    requests: Number(row.requests ?? 0),
    errors: Number(row.errors ?? 0),
    input_tokens: Number(row.input_tokens ?? 0),
    output_tokens: Number(row.output_tokens ?? 0),
    cost: Number(row.cost ?? 0),
    latency_ms: Number(row.latency_ms ?? 0),
    upstream_latency_ms: Number(row.upstream_latency_ms ?? 0),
  };
}

/** Newest events read to find the newest sessions before the session index is grouped instead. */
const NEWEST_EVENTS_READ = 5_000;

/**
 * Read queries over metered usage. Whole days and hours come from the daily and hourly rollups (one row per project,
 * period and attribution); the partial hours at the edges of a range come from the raw events, so any range is exact.
 */
export class AnalyticsStore {
  constructor(private readonly db: Db, private readonly dialect: Dialect) {}

  /** Sums of the daily rollups of the days in [fromDay, toDayExclusive) (never grouped by hour). */
  aggregateDays(query: AggregateQuery, fromDay: number, toDayExclusive: number): Promise<AggregateRow[]> {
    return this.aggregate(DAYS, query, fromDay, toDayExclusive);
  }

  /** Sums of the hourly rollups of the hours in [fromHour, toHourExclusive). */
  aggregateHours(query: AggregateQuery, fromHour: number, toHourExclusive: number): Promise<AggregateRow[]> {
    return this.aggregate(HOURS, query, fromHour, toHourExclusive);
  }

  /** The same sums straight from the events in [from, to] (inclusive), for the partial hours of a range. */
  aggregateEvents(query: AggregateQuery, from: number, to: number): Promise<AggregateRow[]> {
    return this.aggregate(EVENTS, query, from, to + 1);
  }

  private async aggregate(source: Source, query: AggregateQuery, from: number, toExclusive: number): Promise<AggregateRow[]> {
    const time = sql.ref(source.time);
    const bucketSize = sql.lit(query.bucket === 'day' ? DAY_MS : HOUR_MS);
    const bucket = sql<number>`(${time} / ${bucketSize}) * ${bucketSize}`;
    // Both tables share the attribution and sum columns; the rollups name their time column `hour`.
    let q = this.db
      .selectFrom(source.table as 'usage_hourly')
      .where('tenant_id', '=', query.scope.tenantId)
      .where('project_id', '=', query.scope.projectId)
      .where(time, '>=', from)
      .where(time, '<', toExclusive)
      .select([
        source.requests.as('requests'),
        source.errors.as('errors'),
        sql<number>`sum(input_tokens)`.as('input_tokens'),
        sql<number>`sum(output_tokens)`.as('output_tokens'),
        sql<number>`sum(cost)`.as('cost'),
        sql<number>`sum(latency_ms)`.as('latency_ms'),
        sql<number>`sum(upstream_latency_ms)`.as('upstream_latency_ms'),
      ]);
    if (query.model !== undefined) q = q.where('model', '=', query.model);
    for (const dimension of query.dimensions) q = q.select(dimension).groupBy(dimension);
    if (query.bucket) q = q.select(bucket.as('bucket')).groupBy(bucket);
    return (await q.execute()).map((row) => toRow(row as Record<string, unknown>));
  }

  /**
   * The sessions with the most recent activity in the range, newest first. The newest events of a project name its
   * newest sessions when sessions are common, and reading a bounded number of them is cheap; when they name fewer
   * than `limit` sessions (sessions are rare, or one busy session fills them), the session index, which holds only
   * events with a session, is grouped instead. Either way no query reads every event of the range.
   */
  async recentSessionIds(scope: ProjectScope, from: number, to: number, limit: number): Promise<string[]> {
    const inRange = this.db
      .selectFrom('usage_events')
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('created_at', '>=', from)
      .where('created_at', '<=', to);
    const newest = await this.db
      .selectFrom(inRange.select(['session_id', 'created_at']).orderBy('created_at', 'desc').limit(NEWEST_EVENTS_READ).as('newest'))
      .select('session_id')
      .where('session_id', 'is not', null)
      // A subquery's order is not kept by the query around it unless asked again.
      .orderBy('created_at', 'desc')
      .execute();
    const ids = [...new Set(newest.map((r) => r.session_id!))];
    if (ids.length >= limit) return ids.slice(0, limit);
    const grouped = await inRange
      .where('session_id', 'is not', null)
      .select((eb) => ['session_id', eb.fn.max<number>('created_at').as('last_at')])
      .groupBy('session_id')
      .orderBy('last_at', 'desc')
      .orderBy('session_id')
      .limit(limit)
      .execute();
    return grouped.map((r) => r.session_id!);
  }

  async sessions(scope: ProjectScope, ids: string[], from: number, to: number): Promise<SessionRow[]> {
    if (ids.length === 0) return [];
    const failed = sql<number>`case when status >= 400 then 1 else 0 end`;
    const rows = await this.db
      .selectFrom('usage_events')
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('session_id', 'in', ids)
      .where('created_at', '>=', from)
      .where('created_at', '<=', to)
      .select((eb) => [
        'session_id',
        eb.fn.countAll<number>().as('requests'),
        eb.fn.sum<number>(failed).as('errors'),
        eb.fn.sum<number>('input_tokens').as('input_tokens'),
        eb.fn.sum<number>('output_tokens').as('output_tokens'),
        eb.fn.sum<number>('cost').as('cost'),
        eb.fn.min<number>('created_at').as('first_at'),
        eb.fn.max<number>('created_at').as('last_at'),
        sql<string>`${sql.raw(this.dialect === 'postgres' ? "string_agg(distinct model, ',')" : 'group_concat(distinct model)')}`.as('models'),
      ])
      .groupBy('session_id')
      .execute();
    return rows.map((r) => ({
      session_id: String(r.session_id),
      requests: Number(r.requests),
      errors: Number(r.errors),
      input_tokens: Number(r.input_tokens),
      output_tokens: Number(r.output_tokens),
      cost: Number(r.cost),
      first_at: Number(r.first_at),
      last_at: Number(r.last_at),
      models: String(r.models ?? ''),
    }));
  }
}

