import { ERRORS } from '../../http/errors.js';
import type { ProjectScope } from '../../http/principal.js';
import { DAY_MS, HOUR_MS, parseTime, utcDay } from '../../platform/time.js';
import type { TokenService } from '../tokens/service.js';
import type { UsageService } from '../usage/service.js';
import type { UserService } from '../users/service.js';
import type { AggregateQuery, AggregateRow, AnalyticsStore, Dimension, SessionRow } from './store.js';

export type GroupBy = 'model' | 'user' | 'token' | 'service';
export type Interval = 'hour' | 'day' | 'month';

export interface Range {
  from: number;
  to: number;
}

const DEFAULT_DAYS = 30;
/** A series longer than this is refused rather than built: ask for a coarser interval or a shorter range. */
const MAX_BUCKETS = 10_000;
const RECENT_SESSIONS = 10;
/** Costs are summed in the models' pricing currency; budgets and analytics treat it as USD. */
const CURRENCY = 'USD';

/** Interface 4.3: inclusive ISO 8601 bounds, 400 on an invalid one; the last 30 days by default. */
export function rangeFrom(query: { from?: string; to?: string }, now = Date.now()): Range {
  const to = query.to === undefined ? now : parseTime(query.to, 'to');
  if (to === undefined) throw ERRORS.validation(`to is not an ISO 8601 date or date-time of the years 0000 to 9999: ${query.to}`);
  const from = query.from === undefined ? Math.floor((to - DEFAULT_DAYS * DAY_MS) / DAY_MS) * DAY_MS : parseTime(query.from, 'from');
  if (from === undefined) throw ERRORS.validation(`from is not an ISO 8601 date or date-time of the years 0000 to 9999: ${query.from}`);
  if (from > to) throw ERRORS.validation('from must not be after to');
  return { from, to };
}

function round(value: number, digits: number): number {
  return Math.round(value * 10 ** digits) / 10 ** digits;
}

/** Sums of floating-point costs carry binary noise (0.1 + 0.2); nano-dollars are the precision that matters. */
function roundCost(cost: number): number {
  return round(cost, 9);
}

function metrics(row: Pick<AggregateRow, 'requests' | 'errors' | 'input_tokens' | 'output_tokens' | 'cost' | 'latency_ms' | 'upstream_latency_ms'>) {
  return {
    requests: row.requests,
    errors: row.errors,
    error_rate: row.requests === 0 ? 0 : round(row.errors / row.requests, 4),
    input_tokens: row.input_tokens,
    output_tokens: row.output_tokens,
    total_tokens: row.input_tokens + row.output_tokens,
    cost: roundCost(row.cost),
    avg_latency_ms: row.requests === 0 ? 0 : round(row.latency_ms / row.requests, 3),
    avg_upstream_latency_ms: row.requests === 0 ? 0 : round(row.upstream_latency_ms / row.requests, 3),
  };
}

const EMPTY: AggregateRow = {
  bucket: null, model: null, service: null, token_id: null, user_id: null,
  requests: 0, errors: 0, input_tokens: 0, output_tokens: 0, cost: 0, latency_ms: 0, upstream_latency_ms: 0,
};

function add(into: AggregateRow, row: AggregateRow): void {
  into.requests += row.requests;
  into.errors += row.errors;
  into.input_tokens += row.input_tokens;
  into.output_tokens += row.output_tokens;
  into.cost += row.cost;
  into.latency_ms += row.latency_ms;
  into.upstream_latency_ms += row.upstream_latency_ms;
}

function sum(rows: AggregateRow[]): AggregateRow {
  const total = { ...EMPTY };
  for (const row of rows) add(total, row);
  return total;
}

/** Rows merged per attribution and the bucket `bucketOf` gives them (null: across all buckets). */
function collapse(rows: AggregateRow[], bucketOf: (row: AggregateRow) => number | null): AggregateRow[] {
  const merged = new Map<string, AggregateRow>();
  for (const row of rows) {
    const bucket = bucketOf(row);
    const key = JSON.stringify([bucket, row.model, row.service, row.token_id, row.user_id]);
    let into = merged.get(key);
    if (!into) merged.set(key, (into = { ...EMPTY, bucket, model: row.model, service: row.service, token_id: row.token_id, user_id: row.user_id }));
    add(into, row);
  }
  return [...merged.values()];
}

function byRequests<T extends { requests: number }>(a: T, b: T): number {
  return b.requests - a.requests;
}

const DIMENSIONS: Record<GroupBy, Dimension> = { model: 'model', user: 'user_id', token: 'token_id', service: 'service' };

function monthStart(ms: number): number {
  const date = new Date(ms);
  return utcDay(date.getUTCFullYear(), date.getUTCMonth(), 1);
}

function bucketStart(ms: number, interval: Interval): number {
  if (interval === 'month') return monthStart(ms);
  const size = interval === 'hour' ? HOUR_MS : DAY_MS;
  return Math.floor(ms / size) * size;
}

function nextBucket(start: number, interval: Interval): number {
  if (interval === 'month') {
    const date = new Date(start);
    return utcDay(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
  }
  return start + (interval === 'hour' ? HOUR_MS : DAY_MS);
}

/**
 * Every bucket start of the range, so a series has its empty periods too. `coarser`: the report offers a coarser
 * interval (group_by=model by hour or day), which the refusal then suggests.
 */
function bucketsOf(range: Range, interval: Interval, coarser: boolean): number[] {
  const buckets: number[] = [];
  for (let start = bucketStart(range.from, interval); start <= range.to; start = nextBucket(start, interval)) {
    buckets.push(start);
    if (buckets.length > MAX_BUCKETS) {
      throw ERRORS.validation(`The range holds more than ${MAX_BUCKETS} ${interval}s; use a shorter range${coarser ? ' or a coarser interval' : ''}`);
    }
  }
  return buckets;
}

/** Analytics over metered usage (interface 4.3): the overview rollup and the usage breakdowns. */
export class AnalyticsService {
  constructor(
    private readonly store: AnalyticsStore,
    private readonly usage: UsageService,
    private readonly tokens: TokenService,
    private readonly users: UserService,
  ) {}

  /**
   * Sums for a range, per bucket and attribution: whole days from the daily rollups (unless grouped by hour), the
   * other whole hours from the hourly rollups, and the partial hours at either edge from the raw events.
   */
  private async aggregate(query: AggregateQuery, range: Range, interval: Interval): Promise<AggregateRow[]> {
    const parts: Promise<AggregateRow[]>[] = [];
    const firstHour = Math.ceil(range.from / HOUR_MS) * HOUR_MS;
    const endHour = Math.floor((range.to + 1) / HOUR_MS) * HOUR_MS;
    if (firstHour >= endHour) {
      parts.push(this.store.aggregateEvents(query, range.from, range.to));
    } else {
      if (range.from < firstHour) parts.push(this.store.aggregateEvents(query, range.from, firstHour - 1));
      if (endHour <= range.to) parts.push(this.store.aggregateEvents(query, endHour, range.to));
      const firstDay = Math.ceil(firstHour / DAY_MS) * DAY_MS;
      const endDay = Math.floor(endHour / DAY_MS) * DAY_MS;
      if (query.bucket !== 'hour' && firstDay < endDay) {
        parts.push(this.store.aggregateDays(query, firstDay, endDay));
        if (firstHour < firstDay) parts.push(this.store.aggregateHours(query, firstHour, firstDay));
        if (endDay < endHour) parts.push(this.store.aggregateHours(query, endDay, endHour));
      } else {
        parts.push(this.store.aggregateHours(query, firstHour, endHour));
      }
    }
    return collapse((await Promise.all(parts)).flat(), (row) => (row.bucket === null ? null : bucketStart(row.bucket, interval)));
  }

  private series(rows: AggregateRow[], buckets: number[], withModels: boolean) {
    const byBucket = new Map<number, AggregateRow[]>();
    for (const row of rows) byBucket.set(row.bucket!, [...(byBucket.get(row.bucket!) ?? []), row]);
    return buckets.map((start) => {
      const inBucket = byBucket.get(start) ?? [];
      const point = { period: new Date(start).toISOString(), ...metrics(sum(inBucket)) };
      if (!withModels) return point;
      const models = inBucket.map((row) => ({ model: row.model, ...metrics(row) })).sort(byRequests);
      return { ...point, models };
    });
  }

  /** Buffered usage is written before a report, so a call just made is counted. */
  async overview(scope: ProjectScope, range: Range) {
    const buckets = bucketsOf(range, 'day', false);
    await this.usage.flush();
    const [daily, sessions] = await Promise.all([this.aggregate({ scope, dimensions: [], bucket: 'day' }, range, 'day'), this.recentSessions(scope, range)]);
    return {
      object: 'analytics.overview' as const,
      from: new Date(range.from).toISOString(),
      to: new Date(range.to).toISOString(),
      currency: CURRENCY,
      stats: metrics(sum(daily)),
      recent_sessions: sessions,
      daily: this.series(daily, buckets, false),
    };
  }

  /** Requests grouped by tracing session (the x-waygate-session-id header, or an agent conversation). */
  private async recentSessions(scope: ProjectScope, range: Range) {
    const ids = await this.store.recentSessionIds(scope, range.from, range.to, RECENT_SESSIONS);
    const rows = await this.store.sessions(scope, ids, range.from, range.to);
    return rows
      .sort((a, b) => b.last_at - a.last_at)
      .map((row: SessionRow) => ({
        session_id: row.session_id,
        requests: row.requests,
        errors: row.errors,
        input_tokens: row.input_tokens,
        output_tokens: row.output_tokens,
        total_tokens: row.input_tokens + row.output_tokens,
        cost: roundCost(row.cost),
        models: row.models.split(',').filter(Boolean).sort(),
        first_at: new Date(row.first_at).toISOString(),
        last_at: new Date(row.last_at).toISOString(),
      }));
  }

  /** One query grouped by entity and period gives both the breakdown and the series. */
  async usageReport(scope: ProjectScope, range: Range, options: { groupBy: GroupBy; interval?: Interval; model?: string }) {
    const model = options.groupBy === 'service' ? undefined : options.model;
    const dimension = DIMENSIONS[options.groupBy];
    const interval: Interval = options.groupBy === 'model' ? (options.interval ?? 'day') : 'day';
    const buckets = bucketsOf(range, interval, options.groupBy === 'model' && interval !== 'month');
    await this.usage.flush();
    const rows = await this.aggregate({ scope, dimensions: [dimension], bucket: interval === 'hour' ? 'hour' : 'day', model }, range, interval);
    const grouped = collapse(rows, () => null).sort(byRequests);
    const envelope = {
      object: 'analytics.usage' as const,
      group_by: options.groupBy,
      interval: options.groupBy === 'model' ? interval : null,
      from: new Date(range.from).toISOString(),
      to: new Date(range.to).toISOString(),
      currency: CURRENCY,
      model: model ?? null,
      totals: metrics(sum(rows)),
    };
    const timeseries = this.series(rows, buckets, options.groupBy === 'model');
    if (options.groupBy === 'model') return { ...envelope, by_model: grouped.map((row) => ({ model: row.model, ...metrics(row) })), timeseries };
    return { ...envelope, breakdown: await this.breakdown(scope, options.groupBy, grouped), timeseries };
  }

  /** Per-entity attribution, with the names a dashboard shows (token name, user email); rows come sorted. */
  private async breakdown(scope: ProjectScope, groupBy: Exclude<GroupBy, 'model'>, sorted: AggregateRow[]) {
    if (groupBy === 'service') return sorted.map((row) => ({ service: row.service, ...metrics(row) }));
    if (groupBy === 'token') {
      const names = new Map((await this.tokens.listAll(scope.tenantId)).map((t) => [t.id, t.name]));
      return sorted.map((row) => ({ token_id: row.token_id, token_name: row.token_id ? (names.get(row.token_id) ?? null) : null, ...metrics(row) }));
    }
    const emails = new Map((await this.users.list(scope.tenantId)).map((u) => [u.id, u.email]));
    return sorted.map((row) => ({ user_id: row.user_id, email: row.user_id ? (emails.get(row.user_id) ?? null) : null, ...metrics(row) }));
  }
}
