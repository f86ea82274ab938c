import type { LightMyRequestResponse } from 'fastify';
import type { UsageEvent } from '../../src/areas/usage/store.js';
import { randomBase32 } from '../../src/platform/ids.js';
import { call, type TestApp } from '../helpers/app.js';

/**
 * Shared by the analytics tests: usage events written straight into the usage buffer (the endpoints flush it),
 * the client calls, and an oracle that sums events directly (no rollups), to compare the endpoints against.
 */

export const HOUR = 3_600_000;
export const DAY = 86_400_000;
export const iso = (ms: number) => new Date(ms).toISOString();
export const at = (text: string) => Date.parse(text);

export interface Scope {
  tenantId: string;
  projectId: string;
}

/** A usage event of `scope` with plain defaults; costs in tests are dyadic fractions, so every sum is exact. */
export function usageEvent(scope: Scope, over: Partial<UsageEvent> & { createdAt: number }): UsageEvent {
  return {
    id: `use_${randomBase32(20)}`,
    tenantId: scope.tenantId,
    projectId: scope.projectId,
    tokenId: null,
    userId: null,
    model: 'gpt-a',
    provider: 'mock',
    service: 'chat',
    endpoint: '/chat/completions',
    inputTokens: 10,
    outputTokens: 5,
    cost: 0.25,
    currency: 'USD',
    latencyMs: 100,
    upstreamLatencyMs: 80,
    status: 200,
    requestId: `req_${randomBase32(12)}`,
    sessionId: null,
    streamed: false,
    ...over,
  };
}

/** Records events through the usage service (buffered; the analytics endpoints flush before reading). */
export function record(t: TestApp, events: UsageEvent[]): void {
  for (const event of events) t.ctx.services.usage.record(event);
}

/** GET an analytics endpoint with a query string; returns status and JSON body. */
export async function get(t: TestApp, token: string, path: 'overview' | 'usage', query = '') {
  const res: LightMyRequestResponse = await call(t.app, token, { method: 'GET', url: `/api/client/v1/analytics/${path}${query ? `?${query}` : ''}` });
  return { status: res.statusCode, body: res.json(), res };
}

/** `from=...&to=...` for millisecond bounds. */
export const range = (from: number, to: number) => `from=${encodeURIComponent(iso(from))}&to=${encodeURIComponent(iso(to))}`;

const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits;

/** The metrics block the API returns, computed directly from events. */
export function metricsOf(events: UsageEvent[]) {
  const requests = events.length;
  const errors = events.filter((e) => e.status >= 400).length;
  const input = events.reduce((s, e) => s + e.inputTokens, 0);
  const output = events.reduce((s, e) => s + e.outputTokens, 0);
  const latency = events.reduce((s, e) => s + e.latencyMs, 0);
  const upstream = events.reduce((s, e) => s + e.upstreamLatencyMs, 0);
  return {
    requests,
    errors,
    error_rate: requests === 0 ? 0 : round(errors / requests, 4),
    input_tokens: input,
    output_tokens: output,
    total_tokens: input + output,
    cost: round(events.reduce((s, e) => s + e.cost, 0), 9),
    avg_latency_ms: requests === 0 ? 0 : round(latency / requests, 3),
    avg_upstream_latency_ms: requests === 0 ? 0 : round(upstream / requests, 3),
  };
}

export const inRange = (events: UsageEvent[], from: number, to: number) => events.filter((e) => e.createdAt >= from && e.createdAt <= to);

/** Groups events by a key, in first-seen order. */
export function groupBy<K>(events: UsageEvent[], key: (e: UsageEvent) => K): Map<K, UsageEvent[]> {
  const groups = new Map<K, UsageEvent[]>();
  for (const e of events) groups.set(key(e), [...(groups.get(key(e)) ?? []), e]);
  return groups;
}

/** Sorts rows by a string field so comparisons do not depend on the order of rows with equal request counts. */
export function byField<T>(rows: T[], field: keyof T): T[] {
  return [...rows].sort((a, b) => String(a[field]).localeCompare(String(b[field])));
}

/** Rows must come sorted by requests, most first. */
export function expectSortedByRequests(rows: { requests: number }[]): boolean {
  return rows.every((row, i) => i === 0 || rows[i - 1]!.requests >= row.requests);
}

/** A daily (or hourly) series computed from events: one point per bucket start in [from, to]. */
export function seriesOf(events: UsageEvent[], from: number, to: number, size: number) {
  const points = [];
  for (let start = Math.floor(from / size) * size; start <= to; start += size) {
    points.push({ period: iso(start), ...metricsOf(events.filter((e) => e.createdAt >= start && e.createdAt < start + size && e.createdAt >= from && e.createdAt <= to)) });
  }
  return points;
}
