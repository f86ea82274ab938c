import { sql } from 'kysely';
import type { Transactor } from '../../db/index.js';
import type { Db, UsageHourlyTable } from '../../db/types.js';
import { HOUR_MS } from '../../platform/time.js';

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

type Rollup = UsageHourlyTable;

/** Events of one batch summed per hour and attribution, sorted so concurrent flushes lock rows in one order. */
function rollupsOf(events: UsageEvent[]): Rollup[] {
  const byKey = new Map<string, Rollup>();
  for (const e of events) {
    const hour = Math.floor(e.createdAt / HOUR_MS) * HOUR_MS;
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

export class UsageStore {
  constructor(private readonly db: Db, private readonly transaction: Transactor) {}

  /** Appends events and adds them to the hourly rollups, in one transaction. */
  async insertMany(events: UsageEvent[]): Promise<void> {
    await this.transaction(async (trx) => {
      for (const part of chunks(events)) {
        await trx
          .insertInto('usage_events')
          .values(
            part.map((e) => ({
              id: e.id, tenant_id: e.tenantId, project_id: e.projectId, token_id: e.tokenId, user_id: e.userId, model: e.model,
              provider: e.provider, service: e.service, endpoint: e.endpoint, input_tokens: e.inputTokens, output_tokens: e.outputTokens,
              total_tokens: e.inputTokens + e.outputTokens, cost: e.cost, currency: e.currency, latency_ms: e.latencyMs,
              upstream_latency_ms: e.upstreamLatencyMs, status: e.status, request_id: e.requestId, session_id: e.sessionId,
              streamed: e.streamed ? 1 : 0, created_at: e.createdAt,
            })),
          )
          .execute();
      }
      for (const part of chunks(rollupsOf(events))) {
        await trx
          .insertInto('usage_hourly')
          .values(part)
          .onConflict((oc) =>
            oc.columns(['tenant_id', 'project_id', 'hour', 'model', 'service', 'token_id', 'user_id']).doUpdateSet((eb) => ({
              requests: sql`usage_hourly.requests + ${eb.ref('excluded.requests')}`,
              errors: sql`usage_hourly.errors + ${eb.ref('excluded.errors')}`,
              input_tokens: sql`usage_hourly.input_tokens + ${eb.ref('excluded.input_tokens')}`,
              output_tokens: sql`usage_hourly.output_tokens + ${eb.ref('excluded.output_tokens')}`,
              cost: sql`usage_hourly.cost + ${eb.ref('excluded.cost')}`,
              latency_ms: sql`usage_hourly.latency_ms + ${eb.ref('excluded.latency_ms')}`,
              upstream_latency_ms: sql`usage_hourly.upstream_latency_ms + ${eb.ref('excluded.upstream_latency_ms')}`,
            })),
          )
          .execute();
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
