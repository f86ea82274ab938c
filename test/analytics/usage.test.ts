import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UsageEvent } from '../../src/areas/usage/store.js';
import { BACKENDS, call, createTestApp, createToken, createUserSession, type TestApp } from '../helpers/app.js';
import { defaultScope } from '../helpers/inference.js';
import { at, byField, DAY, expectSortedByRequests, get, groupBy, HOUR, inRange, iso, metricsOf, range, record, seriesOf, usageEvent, type Scope } from './support.js';

/** GET /api/client/v1/analytics/usage: every grouping and interval, the model filter and exact range edges. */

type Row = Record<string, unknown> & { requests: number };

/** Sums per model in a series bucket, as the API lists them (compared sorted by model key). */
const modelsIn = (events: UsageEvent[]) => [...groupBy(events, (e) => e.model)].map(([model, list]) => ({ model, ...metricsOf(list) }));

describe.each(BACKENDS)('analytics usage on %s', (backend) => {
  let t: TestApp;
  let scope: Scope;
  let tokens: { id: string; name: string }[];
  let users: { id: string; email: string }[];
  /** 24 events over 2024-05-01 and 02, mid-hour: 12 gpt-a, 8 gpt-b, 4 gpt-c. */
  let may: UsageEvent[];
  const MAY_FROM = at('2024-05-01T00:00:00.000Z');
  const MAY_TO = at('2024-05-02T23:59:59.999Z');

  const usage = async (query: string, token = t.ownerToken) => {
    const { status, body } = await get(t, token, 'usage', query);
    expect(status, JSON.stringify(body)).toBe(200);
    return body;
  };

  beforeAll(async () => {
    t = await createTestApp({ backend });
    scope = await defaultScope(t);
    tokens = [];
    for (const name of ['alpha', 'beta']) tokens.push({ ...(await createToken(t, { name })), name });
    users = [];
    for (const role of ['member', 'viewer']) users.push(await createUserSession(t, role));
    const models = ['gpt-a', 'gpt-a', 'gpt-b', 'gpt-a', 'gpt-c', 'gpt-b'];
    const services = ['chat', 'chat', 'embeddings', 'agents', 'chat', 'chat', 'embeddings'];
    const tokenIds = [tokens[0]!.id, tokens[0]!.id, tokens[1]!.id, null, 'tok_deleted0000000000000'];
    const userIds = [users[0]!.id, users[1]!.id, null];
    may = Array.from({ length: 24 }, (_, i) =>
      usageEvent(scope, {
        createdAt: MAY_FROM + i * 2 * HOUR + ((i * 7) % 60) * 60_000 + i * 1_013,
        model: models[i % models.length]!,
        service: services[i % services.length]!,
        tokenId: tokenIds[i % tokenIds.length]!,
        userId: userIds[i % userIds.length]!,
        inputTokens: 10 + i,
        outputTokens: i % 4 === 0 ? 0 : 3 * i,
        cost: (i % 8) / 16,
        latencyMs: 10 * (i + 1),
        upstreamLatencyMs: 5 * i,
        status: i % 7 === 3 ? 502 : i % 7 === 5 ? 429 : 200,
      }),
    );
    record(t, may);
  });
  afterAll(async () => t?.close());

  it('group_by model is the default: envelope, per-model sums sorted by requests and a daily series with models', async () => {
    const body = await usage(range(MAY_FROM, MAY_TO));
    expect(Object.keys(body).sort()).toEqual(['by_model', 'currency', 'from', 'group_by', 'interval', 'model', 'object', 'timeseries', 'to', 'totals']);
    expect(body).toMatchObject({ object: 'analytics.usage', group_by: 'model', interval: 'day', from: iso(MAY_FROM), to: iso(MAY_TO), currency: 'USD', model: null });
    expect(body.totals).toEqual(metricsOf(may));
    expect(body.totals.requests).toBe(24);
    expect(body.by_model.map((r: Row) => [r.model, r.requests])).toEqual([['gpt-a', 12], ['gpt-b', 8], ['gpt-c', 4]]);
    expect(body.by_model).toEqual(modelsIn(may).sort((a, b) => b.requests - a.requests));
    expect(body.timeseries).toHaveLength(2);
    for (const [i, point] of (body.timeseries as (Row & { models: Row[] })[]).entries()) {
      const day = may.filter((e) => Math.floor(e.createdAt / DAY) * DAY === MAY_FROM + i * DAY);
      expect(point).toMatchObject({ period: iso(MAY_FROM + i * DAY), ...metricsOf(day) });
      expect(expectSortedByRequests(point.models)).toBe(true);
      expect(byField(point.models, 'model')).toEqual(byField(modelsIn(day), 'model'));
    }
    expect(await usage(`${range(MAY_FROM, MAY_TO)}&group_by=model&interval=day`)).toEqual(body);
  });

  it('interval=hour over a range with partial edge hours has one exact point per hour', async () => {
    const from = at('2024-05-01T05:30:00.000Z');
    const to = at('2024-05-01T11:15:00.000Z');
    const body = await usage(`${range(from, to)}&interval=hour`);
    expect(body.interval).toBe('hour');
    const inside = inRange(may, from, to);
    expect(body.totals).toEqual(metricsOf(inside));
    expect(body.timeseries.map((p: Row) => p.period)).toEqual([5, 6, 7, 8, 9, 10, 11].map((h) => `2024-05-01T${String(h).padStart(2, '0')}:00:00.000Z`));
    expect(body.timeseries.map((p: Row) => ({ ...p, models: byField(p.models as Row[], 'model') }))).toEqual(
      seriesOf(may, from, to, HOUR).map((p) => ({ ...p, models: byField(modelsIn(inRange(may, Date.parse(p.period), Math.min(to, Date.parse(p.period) + HOUR - 1))), 'model') })),
    );
  });

  it('interval=month spans months; a bare date as `to` covers its whole day', async () => {
    const events = [
      usageEvent(scope, { createdAt: at('2023-11-14T23:59:59.999Z'), inputTokens: 1000 }),
      usageEvent(scope, { createdAt: at('2023-11-15T00:00:00.000Z'), model: 'gpt-n', inputTokens: 1 }),
      usageEvent(scope, { createdAt: at('2023-12-31T23:59:59.999Z'), model: 'gpt-d', inputTokens: 2 }),
      usageEvent(scope, { createdAt: at('2024-01-01T00:00:00.000Z'), model: 'gpt-d', inputTokens: 4 }),
      usageEvent(scope, { createdAt: at('2024-01-10T23:59:59.999Z'), model: 'gpt-j', inputTokens: 8 }),
      usageEvent(scope, { createdAt: at('2024-01-11T00:00:00.000Z'), inputTokens: 1000 }),
    ];
    record(t, events);
    const body = await usage('from=2023-11-15&to=2024-01-10&interval=month');
    expect(body).toMatchObject({ interval: 'month', from: '2023-11-15T00:00:00.000Z', to: '2024-01-10T23:59:59.999Z' });
    expect(body.totals).toMatchObject({ requests: 4, input_tokens: 15 });
    expect(body.timeseries.map((p: Row) => [p.period, p.requests, p.input_tokens])).toEqual([
      ['2023-11-01T00:00:00.000Z', 1, 1],
      ['2023-12-01T00:00:00.000Z', 1, 2],
      ['2024-01-01T00:00:00.000Z', 2, 12],
    ]);
    expect(body.timeseries[2].models.map((m: Row) => m.model).sort()).toEqual(['gpt-d', 'gpt-j']);
    const daily = await usage('from=2023-11-15&to=2024-01-10&interval=day');
    expect(daily.timeseries).toHaveLength(16 + 31 + 10);
    expect(daily.timeseries.filter((p: Row) => p.requests > 0).map((p: Row) => p.period)).toEqual(['2023-11-15', '2023-12-31', '2024-01-01', '2024-01-10'].map((d) => `${d}T00:00:00.000Z`));
  });

  // Regression: Date.UTC reads years 0 to 99 as 1900 to 1999, so such months had no points and year 0 no 29 February.
  it('interval=month in the years 0 to 99 has its points; 29 February of year 0 (a leap year) is a date', async () => {
    record(t, [usageEvent(scope, { createdAt: at('0050-07-10T12:00:00.000Z'), inputTokens: 3 })]);
    const body = await usage('from=0050-06-15&to=0050-08-01&interval=month');
    expect(body.totals).toMatchObject({ requests: 1, input_tokens: 3 });
    expect(body.timeseries.map((p: Row) => [p.period, p.requests])).toEqual([
      ['0050-06-01T00:00:00.000Z', 0],
      ['0050-07-01T00:00:00.000Z', 1],
      ['0050-08-01T00:00:00.000Z', 0],
    ]);
    expect((await get(t, t.ownerToken, 'usage', 'from=0000-02-29&to=0000-03-01')).status).toBe(200);
  });

  it('group_by user: per-user sums with the email, a null user for unattributed calls, and no interval', async () => {
    const body = await usage(`${range(MAY_FROM, MAY_TO)}&group_by=user&interval=hour`);
    expect(body).toMatchObject({ group_by: 'user', interval: null, model: null });
    expect(body.by_model).toBeUndefined();
    expect(expectSortedByRequests(body.breakdown)).toBe(true);
    const emails = new Map(users.map((u) => [u.id, u.email]));
    const expected = [...groupBy(may, (e) => e.userId)].map(([id, list]) => ({ user_id: id, email: id ? emails.get(id) : null, ...metricsOf(list) }));
    expect(byField(body.breakdown, 'user_id')).toEqual(byField(expected, 'user_id'));
    expect(body.breakdown.map((r: Row) => r.requests)).toEqual([8, 8, 8]);
    // The series of other groupings is daily and carries no per-model split.
    expect(body.timeseries).toEqual(seriesOf(may, MAY_FROM, MAY_TO, DAY));
  });

  it('group_by token: per-token sums with the token name (revoked ones too); unknown or missing tokens have a null name', async () => {
    const revoked = await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/tokens/${tokens[1]!.id}` });
    expect(revoked.statusCode, revoked.body).toBe(200);
    const body = await usage(`${range(MAY_FROM, MAY_TO)}&group_by=token`);
    expect(body).toMatchObject({ group_by: 'token', interval: null });
    const names = new Map(tokens.map((tk) => [tk.id, tk.name]));
    const expected = [...groupBy(may, (e) => e.tokenId)].map(([id, list]) => ({ token_id: id, token_name: id ? (names.get(id) ?? null) : null, ...metricsOf(list) }));
    expect(byField(body.breakdown, 'token_id')).toEqual(byField(expected, 'token_id'));
    expect(body.breakdown[0]).toMatchObject({ token_id: tokens[0]!.id, token_name: 'alpha', requests: 10 });
    expect(body.breakdown.find((r: Row) => r.token_id === 'tok_deleted0000000000000')).toMatchObject({ token_name: null, requests: 4 });
    expect(body.breakdown.find((r: Row) => r.token_id === null)).toMatchObject({ token_name: null, requests: 5 });
  });

  it('group_by service: per-service sums; the model filter does not apply', async () => {
    const body = await usage(`${range(MAY_FROM, MAY_TO)}&group_by=service&model=gpt-b`);
    expect(body).toMatchObject({ group_by: 'service', interval: null, model: null });
    expect(body.totals).toEqual(metricsOf(may));
    expect(body.breakdown.map((r: Row) => [r.service, r.requests])).toEqual([['chat', 14], ['embeddings', 7], ['agents', 3]]);
    expect(body.breakdown).toEqual([...groupBy(may, (e) => e.service)].map(([service, list]) => ({ service, ...metricsOf(list) })).sort((a, b) => b.requests - a.requests));
    expect(body.timeseries).toEqual(seriesOf(may, MAY_FROM, MAY_TO, DAY));
  });

  it.each(['model', 'user', 'token'] as const)('the model filter applies to group_by %s', async (groupBy_) => {
    const body = await usage(`${range(MAY_FROM, MAY_TO)}&group_by=${groupBy_}&model=gpt-b`);
    const only = may.filter((e) => e.model === 'gpt-b');
    expect(body.model).toBe('gpt-b');
    expect(body.totals).toEqual(metricsOf(only));
    expect(body.totals.requests).toBe(8);
    const rows = (body.by_model ?? body.breakdown) as Row[];
    expect(rows.reduce((s, r) => s + r.requests, 0)).toBe(8);
    if (groupBy_ === 'model') expect(rows.map((r) => r.model)).toEqual(['gpt-b']);
    expect(body.timeseries.reduce((s: number, p: Row) => s + p.requests, 0)).toBe(8);
    const none = await usage(`${range(MAY_FROM, MAY_TO)}&group_by=${groupBy_}&model=no-such-model`);
    expect(none.totals).toEqual(metricsOf([]));
  });

  describe('range edges (rollups for whole hours, raw events for the partial ones)', () => {
    const H = at('2024-06-05T10:00:00.000Z');
    const FROM = at('2024-06-05T10:17:23.456Z');
    const TO = at('2024-06-05T14:42:10.001Z');
    let edge: UsageEvent[];
    const totals = async (from: number, to: number) => (await usage(`${range(from, to)}&group_by=service`)).totals;

    beforeAll(() => {
      const times = [
        '09:59:59.999', '10:00:00.000', '10:17:23.455', '10:17:23.456', '10:30:00.000', '10:59:59.999', '11:00:00.000', '12:34:56.789',
        '13:59:59.999', '14:00:00.000', '14:00:00.001', '14:42:10.000', '14:42:10.001', '14:42:10.002', '14:59:59.999', '15:00:00.000',
      ];
      edge = times.map((time, i) =>
        usageEvent(scope, { createdAt: at(`2024-06-05T${time}Z`), model: i % 2 ? 'gpt-odd' : 'gpt-even', inputTokens: 2 ** i, outputTokens: i, cost: i / 8, status: i % 5 === 0 ? 500 : 200 }),
      );
      record(t, edge);
    });

    it('events exactly at from and at to are counted; those a millisecond outside, in the same hours, are not', async () => {
      const body = await totals(FROM, TO);
      const inside = inRange(edge, FROM, TO);
      expect(inside.map((e) => iso(e.createdAt).slice(11, 23))).toEqual(['10:17:23.456', '10:30:00.000', '10:59:59.999', '11:00:00.000', '12:34:56.789', '13:59:59.999', '14:00:00.000', '14:00:00.001', '14:42:10.000', '14:42:10.001']);
      // inputTokens are distinct powers of two, so their sum names exactly the events counted.
      expect(body.input_tokens).toBe(inside.reduce((s, e) => s + e.inputTokens, 0));
      expect(body).toEqual(metricsOf(inside));
      const hourly = await usage(`${range(FROM, TO)}&interval=hour`);
      expect(hourly.timeseries.map((p: Row) => p.requests)).toEqual([3, 1, 1, 1, 4]);
      expect(hourly.timeseries.map(({ models: _models, ...p }: Row) => p)).toEqual(seriesOf(edge, FROM, TO, HOUR));
    });

    it.each([
      ['inside one hour', '2024-06-05T10:10:00.000Z', '2024-06-05T10:20:00.000Z', 2],
      ['a single instant', '2024-06-05T10:17:23.456Z', '2024-06-05T10:17:23.456Z', 1],
      ['one whole hour', '2024-06-05T10:00:00.000Z', '2024-06-05T10:59:59.999Z', 5],
      ['ending exactly on an hour', '2024-06-05T11:00:00.000Z', '2024-06-05T14:00:00.000Z', 4],
      ['starting a millisecond before an hour', '2024-06-05T13:59:59.999Z', '2024-06-05T14:00:00.000Z', 2],
      ['starting a millisecond after an hour', '2024-06-05T10:00:00.001Z', '2024-06-05T14:00:00.000Z', 8],
      ['the whole day (bare dates)', '2024-06-05', '2024-06-05', 16],
    ])('a range %s is exact', async (_name, from, to, count) => {
      const lower = at(from);
      const upper = to.length === 10 ? at(to) + DAY - 1 : at(to);
      const body = (await usage(`from=${from}&to=${to}&group_by=service`)).totals;
      expect(body.requests).toBe(count);
      expect(body).toEqual(metricsOf(inRange(edge, lower, upper)));
    });

    it('bounds with an offset or without a zone are read as the same UTC instants', async () => {
      const expected = await totals(FROM, TO);
      const offset = await usage(`from=${encodeURIComponent('2024-06-05T12:17:23.456+02:00')}&to=${encodeURIComponent('2024-06-05T09:42:10.001-05:00')}&group_by=service`);
      expect(offset).toMatchObject({ from: iso(FROM), to: iso(TO), totals: expected });
      const noZone = await usage('from=2024-06-05T10:17:23.456&to=2024-06-05T14:42:10.001&group_by=service');
      expect(noZone).toMatchObject({ from: iso(FROM), to: iso(TO), totals: expected });
    });

    it('whole hours still count after more events arrive in them (rollups add up across flushes)', async () => {
      const before = await totals(H, H + 5 * HOUR - 1);
      const extra = [usageEvent(scope, { createdAt: H + HOUR + 1, inputTokens: 1_000_000 }), usageEvent(scope, { createdAt: H + 3 * HOUR, inputTokens: 3_000_000, status: 404 })];
      record(t, extra);
      const after = await totals(H, H + 5 * HOUR - 1);
      expect(after.requests).toBe(before.requests + 2);
      expect(after.errors).toBe(before.errors + 1);
      expect(after.input_tokens).toBe(before.input_tokens + 4_000_000);
      edge.push(...extra);
    });
  });
});
