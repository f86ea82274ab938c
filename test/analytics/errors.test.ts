import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { BACKENDS, call, createTestApp, createToken, type TestApp } from '../helpers/app.js';
import { defaultScope } from '../helpers/inference.js';
import { at, get, HOUR, iso, metricsOf, range, record, usageEvent, type Scope } from './support.js';

/** Analytics refusals (400, 401, 403) and isolation between projects and tenants. */

const PATHS = ['overview', 'usage'] as const;

function expectError(status: number, body: { error?: { message?: unknown; type?: unknown } }, expected: number): void {
  expect(status, JSON.stringify(body)).toBe(expected);
  expect(Object.keys(body)).toEqual(['error']);
  expect(typeof body.error?.message).toBe('string');
  expect(typeof body.error?.type).toBe('string');
}

describe.each(BACKENDS)('analytics refusals and isolation on %s', (backend) => {
  let t: TestApp;
  let scope: Scope;
  beforeAll(async () => {
    t = await createTestApp({ backend });
    scope = await defaultScope(t);
  });
  afterAll(async () => t?.close());

  describe.each(PATHS)('GET /analytics/%s', (path) => {
    it.each([
      ['garbage from', 'from=garbage'],
      ['garbage to', 'to=yesterday'],
      ['free text with a date in it', 'from=hello%202026-01-01'],
      ['31 February style from', 'from=2026-02-30'],
      ['29 February of a common year', 'to=2025-02-29'],
      ['month 13', 'from=2026-13-01'],
      ['month 00', 'to=2026-00-10'],
      ['hour 24', 'from=2026-01-01T24:00:00Z'],
      ['minute 60', 'to=2026-01-01T10:60:00Z'],
      ['an empty from', 'from='],
      ['from after to', 'from=2026-01-02&to=2026-01-01'],
      ['from one millisecond after to', 'from=2026-01-01T00:00:00.001Z&to=2026-01-01T00:00:00.000Z'],
      ['an unknown query parameter', 'since=2026-01-01'],
      // Regression: these were answered with the bounds as '+010000-…' and '-000001-…', which are not date-times.
      ['an offset that moves to into the year 10000', 'to=9999-12-31T23:59:59.999-23:59'],
      ['an offset that moves from before the year 0000', 'from=0000-01-01T00:00:00%2B01:00'],
    ])('%s is a 400 with {error}', async (_name, query) => {
      const { status, body } = await get(t, t.ownerToken, path, query);
      expectError(status, body, 400);
    });

    it('29 February of a leap year and from equal to to are accepted', async () => {
      expect((await get(t, t.ownerToken, path, 'from=2024-02-29&to=2024-02-29')).status).toBe(200);
      expect((await get(t, t.ownerToken, path, 'from=2024-02-29T12:00:00Z&to=2024-02-29T12:00:00Z')).status).toBe(200);
    });

    it('no token is a 401; a wrong token is a 401', async () => {
      const none = await call(t.app, null, { method: 'GET', url: `/api/client/v1/analytics/${path}` });
      expectError(none.statusCode, none.json(), 401);
      const wrong = await get(t, `wgt_${randomBase32(43)}`, path);
      expectError(wrong.status, wrong.body, 401);
    });

    it('a token without read on models is a 403; a project-less token is a 400', async () => {
      const batchesOnly = await createToken(t, { name: 'batches-only', permissions: { batches: 'read' } });
      const forbidden = await get(t, batchesOnly.value, path);
      expectError(forbidden.status, forbidden.body, 403);
      const projectLess = await createToken(t, { name: 'project-less', role: 'owner', projectId: null });
      const refused = await get(t, projectLess.value, path);
      expectError(refused.status, refused.body, 400);
      expect(refused.body.error.code).toBe('project_required');
      // A viewer can read analytics.
      const viewer = await createToken(t, { name: 'viewer', role: 'viewer' });
      expect((await get(t, viewer.value, path)).status).toBe(200);
    });
  });

  it.each([
    ['an unknown group_by', 'group_by=project'],
    ['an unknown interval', 'interval=week'],
    ['an empty model', 'model='],
  ])('/analytics/usage with %s is a 400', async (_name, query) => {
    const { status, body } = await get(t, t.ownerToken, 'usage', query);
    expectError(status, body, 400);
  });

  it('an hourly series of more than 10,000 buckets is a 400; exactly 10,000 is served', async () => {
    const from = at('2020-01-01T00:00:00.000Z');
    const fits = await get(t, t.ownerToken, 'usage', `${range(from, from + 10_000 * HOUR - 1)}&interval=hour`);
    expect(fits.status).toBe(200);
    expect(fits.body.timeseries).toHaveLength(10_000);
    const over = await get(t, t.ownerToken, 'usage', `${range(from, from + 10_000 * HOUR)}&interval=hour`);
    expectError(over.status, over.body, 400);
    expect(over.body.error.message).toMatch(/shorter range or a coarser interval/);
    // The same range by day is fine.
    expect((await get(t, t.ownerToken, 'usage', `${range(from, from + 10_000 * HOUR)}&interval=day`)).status).toBe(200);
  });

  // Regression: reports without a coarser interval (the overview, group_by user, token or service) suggested one.
  it('a daily series of more than 10,000 days asks for a shorter range, and a coarser interval only where there is one', async () => {
    for (const report of ['overview', 'usage'] as const) {
      for (const query of report === 'usage' ? ['group_by=user', 'group_by=service'] : ['']) {
        const res = await get(t, t.ownerToken, report, `from=1990-01-01&to=2026-01-01${query ? `&${query}` : ''}`);
        expectError(res.status, res.body, 400);
        expect(res.body.error.message).toMatch(/more than 10000 days; use a shorter range$/);
      }
    }
    const byModel = await get(t, t.ownerToken, 'usage', 'from=1990-01-01&to=2026-01-01&interval=day');
    expect(byModel.body.error.message).toMatch(/or a coarser interval$/);
  });

  it("another project's or tenant's usage never appears, even with the same session ids and times", async () => {
    const project = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: 'Second', key: 'second' } });
    expect(project.statusCode, project.body).toBe(201);
    const second: Scope = { tenantId: scope.tenantId, projectId: project.json().project.id };
    const email = `owner-b-${randomBase32(6).toLowerCase()}@example.test`;
    const tenant = await call(t.app, t.adminSession, { method: 'POST', url: '/api/tenants', payload: { name: 'Tenant B', ownerEmail: email, ownerPassword: 'owner-b-password' } });
    expect(tenant.statusCode, tenant.body).toBe(201);
    const other: Scope = { tenantId: tenant.json().tenant.id, projectId: tenant.json().project.id };
    const login = await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password: 'owner-b-password' } });
    const secondToken = await createToken(t, { name: 'second', projectId: second.projectId });
    const otherToken = await createToken(t, { name: 'other', projectId: other.projectId }, login.json().token);

    const base = at('2023-07-01T10:30:00.000Z');
    const of = (s: Scope, n: number, tokens: number) =>
      Array.from({ length: n }, (_, i) => usageEvent(s, { createdAt: base + i * HOUR, sessionId: 'shared', model: 'same-model', inputTokens: tokens, service: i % 2 ? 'chat' : 'agents' }));
    const mine = of(scope, 3, 1);
    const theirs = of(second, 4, 100);
    const foreign = of(other, 5, 10_000);
    record(t, [...mine, ...theirs, ...foreign]);

    const window = range(base - HOUR, base + 10 * HOUR);
    for (const [token, events] of [[t.ownerToken, mine], [secondToken.value, theirs], [otherToken.value, foreign]] as const) {
      const overview = await get(t, token, 'overview', window);
      expect(overview.body.stats).toEqual(metricsOf([...events]));
      expect(overview.body.recent_sessions).toEqual([
        expect.objectContaining({ session_id: 'shared', requests: events.length, input_tokens: events.length * events[0]!.inputTokens, last_at: iso(events.at(-1)!.createdAt) }),
      ]);
      expect(overview.body.daily.reduce((s: number, p: { requests: number }) => s + p.requests, 0)).toBe(events.length);
      for (const groupBy of ['model', 'user', 'token', 'service']) {
        const usage = await get(t, token, 'usage', `${window}&group_by=${groupBy}&interval=hour`);
        expect(usage.body.totals, groupBy).toEqual(metricsOf([...events]));
        expect(usage.body.timeseries.reduce((s: number, p: { requests: number }) => s + p.requests, 0)).toBe(events.length);
      }
    }
  });
});
