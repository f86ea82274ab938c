import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UsageEvent } from '../../src/areas/usage/store.js';
import { ADMIN_EMAIL, BACKENDS, createTestApp, createToken, type TestApp } from '../helpers/app.js';
import { defaultScope, post } from '../helpers/inference.js';
import { chatBody, registerModel } from '../helpers/models.js';
import { at, DAY, get, iso, metricsOf, record, seriesOf, usageEvent, type Scope } from './support.js';

/** GET /api/client/v1/analytics/overview: stats, recent tracing sessions and the daily series. */

describe.each(BACKENDS)('analytics overview on %s', (backend) => {
  let t: TestApp;
  let scope: Scope;
  beforeAll(async () => {
    t = await createTestApp({ backend });
    scope = await defaultScope(t);
  });
  afterAll(async () => t?.close());

  it('sums the events of the range exactly, groups sessions and has a point for every day, empty ones too', async () => {
    const ev = (createdAt: string, over: Partial<UsageEvent>) => usageEvent(scope, { createdAt: at(createdAt), ...over });
    const inside = [
      ev('2024-03-10T00:00:00.000Z', { model: 'gpt-a', inputTokens: 10, outputTokens: 5, cost: 0.25, latencyMs: 100, upstreamLatencyMs: 80, sessionId: 's-A' }),
      ev('2024-03-10T08:30:00.000Z', { model: 'gpt-b', inputTokens: 20, outputTokens: 0, cost: 0.5, latencyMs: 50, upstreamLatencyMs: 40, status: 500, sessionId: 's-A' }),
      ev('2024-03-11T23:59:59.999Z', { model: 'gpt-a', inputTokens: 7, outputTokens: 0, cost: 0, latencyMs: 29, upstreamLatencyMs: 0, status: 429, sessionId: 's-B' }),
      ev('2024-03-13T12:00:00.000Z', { model: 'gpt-c', service: 'embeddings', inputTokens: 100, outputTokens: 0, cost: 0.125, latencyMs: 20, upstreamLatencyMs: 10 }),
      ev('2024-03-14T23:59:59.999Z', { model: 'gpt-a', inputTokens: 1, outputTokens: 2, cost: 0.0625, latencyMs: 1, upstreamLatencyMs: 0, sessionId: 's-C' }),
    ];
    const outside = [
      ev('2024-03-09T23:59:59.999Z', { model: 'gpt-z', sessionId: 's-A', inputTokens: 1000 }),
      ev('2024-03-15T00:00:00.000Z', { model: 'gpt-z', sessionId: 's-out', inputTokens: 1000 }),
    ];
    record(t, [...outside, ...inside]);

    // A bare date as `to` covers that whole day.
    const { status, body } = await get(t, t.ownerToken, 'overview', 'from=2024-03-10&to=2024-03-14');
    expect(status, JSON.stringify(body)).toBe(200);
    expect(Object.keys(body).sort()).toEqual(['currency', 'daily', 'from', 'object', 'recent_sessions', 'stats', 'to']);
    expect(body).toMatchObject({ object: 'analytics.overview', from: '2024-03-10T00:00:00.000Z', to: '2024-03-14T23:59:59.999Z', currency: 'USD' });
    // Worked out by hand: 5 requests, 2 of them errors (500 and 429).
    expect(body.stats).toEqual({
      requests: 5,
      errors: 2,
      error_rate: 0.4,
      input_tokens: 138,
      output_tokens: 7,
      total_tokens: 145,
      cost: 0.9375,
      avg_latency_ms: 40,
      avg_upstream_latency_ms: 26,
    });
    expect(body.stats).toEqual(metricsOf(inside));

    expect(body.daily.map((p: { period: string }) => p.period)).toEqual(['2024-03-10', '2024-03-11', '2024-03-12', '2024-03-13', '2024-03-14'].map((d) => `${d}T00:00:00.000Z`));
    expect(body.daily.map((p: { requests: number }) => p.requests)).toEqual([2, 1, 0, 1, 1]);
    expect(body.daily[2]).toEqual({ period: '2024-03-12T00:00:00.000Z', ...metricsOf([]) });
    expect(body.daily).toEqual(seriesOf(inside, at('2024-03-10'), at('2024-03-14T23:59:59.999Z'), DAY));

    // Newest activity first; the s-A event before the range is not counted; events without a session are not sessions.
    expect(body.recent_sessions).toEqual([
      { session_id: 's-C', requests: 1, errors: 0, input_tokens: 1, output_tokens: 2, total_tokens: 3, cost: 0.0625, models: ['gpt-a'], first_at: '2024-03-14T23:59:59.999Z', last_at: '2024-03-14T23:59:59.999Z' },
      { session_id: 's-B', requests: 1, errors: 1, input_tokens: 7, output_tokens: 0, total_tokens: 7, cost: 0, models: ['gpt-a'], first_at: '2024-03-11T23:59:59.999Z', last_at: '2024-03-11T23:59:59.999Z' },
      { session_id: 's-A', requests: 2, errors: 1, input_tokens: 30, output_tokens: 5, total_tokens: 35, cost: 0.75, models: ['gpt-a', 'gpt-b'], first_at: '2024-03-10T00:00:00.000Z', last_at: '2024-03-10T08:30:00.000Z' },
    ]);
  });

  it('a range with no usage has zero stats, no sessions and a zero point per day', async () => {
    const { status, body } = await get(t, t.ownerToken, 'overview', 'from=2019-02-27&to=2019-03-02');
    expect(status).toBe(200);
    expect(body.stats).toEqual(metricsOf([]));
    expect(body.recent_sessions).toEqual([]);
    expect(body.daily).toEqual(['2019-02-27', '2019-02-28', '2019-03-01', '2019-03-02'].map((d) => ({ period: `${d}T00:00:00.000Z`, ...metricsOf([]) })));
  });

  it('lists at most 10 sessions, the ones with the newest activity, newest first', async () => {
    const base = at('2024-04-01T00:00:00.000Z');
    // Sessions s00..s11, one event each an hour apart; s00 also has the newest event of all, so it leads.
    const events = Array.from({ length: 12 }, (_, i) => usageEvent(scope, { createdAt: base + i * 3_600_000, sessionId: `s${String(i).padStart(2, '0')}`, model: `m${i % 3}` }));
    const late = usageEvent(scope, { createdAt: base + 20 * 3_600_000, sessionId: 's00', model: 'm9', status: 502 });
    record(t, [...events, late]);

    const { body } = await get(t, t.ownerToken, 'overview', 'from=2024-04-01&to=2024-04-02');
    expect(body.recent_sessions.map((s: { session_id: string }) => s.session_id)).toEqual(['s00', 's11', 's10', 's09', 's08', 's07', 's06', 's05', 's04', 's03']);
    expect(body.recent_sessions[0]).toMatchObject({ requests: 2, errors: 1, models: ['m0', 'm9'], first_at: iso(base), last_at: iso(late.createdAt) });
    expect(body.stats.requests).toBe(13);

    // Narrowing the range to before the late event drops it from s00, which falls out of the newest 10.
    const narrow = await get(t, t.ownerToken, 'overview', `from=${iso(base)}&to=${iso(base + 11 * 3_600_000)}`);
    expect(narrow.body.recent_sessions.map((s: { session_id: string }) => s.session_id)).toEqual(['s11', 's10', 's09', 's08', 's07', 's06', 's05', 's04', 's03', 's02']);
  });

  // Regression: sessions were looked up among the newest 1,000 events only, so one busy session hid every other.
  it('a busy session does not hide the others: sessions beyond the newest events are found too', async () => {
    const base = at('2024-05-01T00:00:00.000Z');
    const quiet = usageEvent(scope, { createdAt: base, sessionId: 'quiet' });
    const unnamed = Array.from({ length: 6_000 }, (_, i) => usageEvent(scope, { createdAt: base + 60_000 + i }));
    const busy = Array.from({ length: 1_100 }, (_, i) => usageEvent(scope, { createdAt: base + 120_000 + i, sessionId: 'busy' }));
    record(t, [quiet, ...unnamed, ...busy]);
    const { body } = await get(t, t.ownerToken, 'overview', 'from=2024-05-01&to=2024-05-01');
    expect(body.recent_sessions.map((s: { session_id: string }) => s.session_id)).toEqual(['busy', 'quiet']);
    expect(body.recent_sessions[0]).toMatchObject({ requests: 1_100 });
  });

  // Regression: session costs were the raw SQL sum (0.1 + 0.2 = 0.30000000000000004) while other costs are rounded.
  it('a session reports the same cost as the stats of the same events (costs that are not binary fractions)', async () => {
    const base = at('2024-08-01T10:00:00.000Z');
    record(t, [0.1, 0.2].map((cost, i) => usageEvent(scope, { createdAt: base + i * 1000, cost, sessionId: 'decimal-costs' })));
    const { body } = await get(t, t.ownerToken, 'overview', 'from=2024-08-01&to=2024-08-01');
    expect(body.stats.cost).toBe(0.3);
    expect(body.recent_sessions[0].cost).toBe(body.stats.cost);
  });

  it('meters real calls end to end: local-chat, local-embed and a priced mock, grouped by x-waygate-session-id', async () => {
    const token = await createToken(t, { name: 'metered' });
    const priced = await registerModel(t, { provider: { type: 'mock', mock: { reply: 'Priced reply.' } }, upstreamModel: 'mock-1', pricing: { inputPer1M: 250_000, outputPer1M: 500_000, currency: 'USD' } });
    const failing = await registerModel(t, { provider: { type: 'mock', mock: { failureRate: 1 } }, upstreamModel: 'mock-1' });
    const started = Date.now();
    const session = (id: string) => ({ 'x-waygate-session-id': id });
    const chat1 = await post(t, token.value, '/chat/completions', chatBody('local-chat'), session('real-1'));
    const chat2 = await post(t, token.value, '/chat/completions', chatBody('local-chat', { messages: [{ role: 'user', content: 'A longer question for the echo model' }] }), session('real-1'));
    const embed = await post(t, token.value, '/embeddings', { model: 'local-embed', input: ['one', 'two three'] }, session('real-1'));
    const paid = await post(t, token.value, '/chat/completions', chatBody(priced), session('real-2'));
    const failed = await post(t, token.value, '/chat/completions', chatBody(failing));
    for (const res of [chat1, chat2, embed, paid]) expect(res.statusCode, res.body).toBe(200);
    expect(failed.statusCode).toBeGreaterThanOrEqual(500);
    const ended = Date.now();

    const usages = [chat1, chat2, embed, paid].map((res) => res.json().usage as { prompt_tokens: number; completion_tokens?: number });
    const input = usages.reduce((s, u) => s + u.prompt_tokens, 0);
    const output = usages.reduce((s, u) => s + (u.completion_tokens ?? 0), 0);
    const paidUsage = usages[3]!;
    const paidCost = paidUsage.prompt_tokens * 0.25 + paidUsage.completion_tokens! * 0.5;
    expect(input).toBeGreaterThan(0);
    expect(paidCost).toBeGreaterThan(0);

    const window = `from=${iso(started)}&to=${iso(ended)}`;
    const { status, body } = await get(t, token.value, 'overview', window);
    expect(status).toBe(200);
    expect(body.stats).toMatchObject({ requests: 5, errors: 1, error_rate: 0.2, input_tokens: input, output_tokens: output, total_tokens: input + output, cost: paidCost });
    expect(body.stats.avg_latency_ms).toBeGreaterThan(0);
    const sessions = Object.fromEntries(body.recent_sessions.map((s: { session_id: string }) => [s.session_id, s]));
    expect(Object.keys(sessions).sort()).toEqual(['real-1', 'real-2']);
    expect(sessions['real-1']).toMatchObject({ requests: 3, errors: 0, models: ['local-chat', 'local-embed'], input_tokens: usages[0]!.prompt_tokens + usages[1]!.prompt_tokens + usages[2]!.prompt_tokens });
    expect(sessions['real-2']).toMatchObject({ requests: 1, models: [priced], cost: paidCost });
    // Newest first (the two sessions may end in the same millisecond, so compare times rather than names).
    expect(Date.parse(body.recent_sessions[0].last_at)).toBeGreaterThanOrEqual(Date.parse(body.recent_sessions[1].last_at));
    expect(Date.parse(sessions['real-2'].last_at)).toBeGreaterThanOrEqual(Date.parse(sessions['real-1'].last_at));

    const services = await get(t, token.value, 'usage', `${window}&group_by=service`);
    expect(Object.fromEntries(services.body.breakdown.map((r: { service: string; requests: number }) => [r.service, r.requests]))).toEqual({ chat: 4, embeddings: 1 });
    const byToken = await get(t, token.value, 'usage', `${window}&group_by=token`);
    expect(byToken.body.breakdown).toEqual([expect.objectContaining({ token_id: token.id, token_name: 'metered', requests: 5, errors: 1 })]);
    const byUser = await get(t, token.value, 'usage', `${window}&group_by=user`);
    expect(byUser.body.breakdown).toEqual([expect.objectContaining({ user_id: (await defaultScope(t)).adminUserId, email: ADMIN_EMAIL, requests: 5 })]);
    const byModel = await get(t, token.value, 'usage', `${window}&group_by=model`);
    expect(Object.fromEntries(byModel.body.by_model.map((r: { model: string; requests: number }) => [r.model, r.requests]))).toEqual({ 'local-chat': 2, 'local-embed': 1, [priced]: 1, [failing]: 1 });

    // Without from/to: the last 30 days from the start of the day 30 days back, up to now; the calls are in it.
    const recent = await get(t, token.value, 'overview');
    expect(recent.status).toBe(200);
    const to = Date.parse(recent.body.to);
    expect(to).toBeGreaterThanOrEqual(ended);
    expect(recent.body.from).toBe(iso(Math.floor((to - 30 * DAY) / DAY) * DAY));
    expect(recent.body.daily).toHaveLength(31);
    expect(recent.body.stats.requests).toBe(5);
  });
});
