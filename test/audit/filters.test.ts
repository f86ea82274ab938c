import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditStore, type AuditEvent } from '../../src/areas/audit/store.js';
import { BACKENDS, call, createTestApp, type TestApp } from '../helpers/app.js';
import { auditEvent } from '../helpers/audit.js';

/** Seeded events live in 2020 (and the bulk set in 2021), far from the events real requests write now. */
const BASE = Date.parse('2020-01-01T00:00:00.000Z');
const BULK_BASE = Date.parse('2021-01-01T00:00:00.000Z');
const BULK = 1_100;
const iso = (ms: number) => new Date(ms).toISOString();
const WINDOW = `from=${iso(BASE)}&to=${iso(BASE + 10_000)}`;

describe.each(BACKENDS)('GET /api/client/v1/audit/logs filters on %s', (backend) => {
  let t: TestApp;
  let tenantId: string;
  let otherProjectId: string;
  const seeded: Record<string, AuditEvent> = {};

  function event(name: string, overrides: Partial<AuditEvent>): AuditEvent {
    const e = auditEvent({
      tenantId, projectId: t.ctx.bootstrap.projectId, requestId: `req-${name}`, actorType: 'user', service: 'seedalpha',
      action: 'seedalpha.create', path: `/seed/${name}`, statusCode: 200, createdAt: BASE, ...overrides,
    });
    seeded[name] = e;
    return e;
  }

  async function list(query: string) {
    const res = await call(t.app, t.ownerToken, { method: 'GET', url: `/api/client/v1/audit/logs?${query}` });
    return { status: res.statusCode, body: res.json() };
  }
  async function names(query: string): Promise<string[]> {
    const { status, body } = await list(query);
    expect(status).toBe(200);
    const byId = new Map(Object.entries(seeded).map(([name, e]) => [e.id, name]));
    return body.data.map((e: { id: string }) => byId.get(e.id) ?? `unseeded:${e.id}`);
  }

  beforeAll(async () => {
    t = await createTestApp({ backend });
    tenantId = t.ctx.bootstrap.tenantId;
    const project = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: 'Second' } });
    otherProjectId = project.json().project.id;
    const otherTenant = await call(t.app, t.adminSession, {
      method: 'POST', url: '/api/tenants', payload: { name: 'Elsewhere', ownerEmail: 'else@example.test', ownerPassword: 'elsewhere-password' },
    });
    const otherTenantId = otherTenant.json().tenant.id as string;
    // Through the service (buffered, then flushed) ...
    const audit = t.ctx.services.audit;
    audit.record(event('e1', { actorUserId: 'usr_alice', createdAt: BASE + 1_000, path: '/seed/alpha/one' }));
    audit.record(event('e2', { action: 'seedalpha.delete', method: 'DELETE', actorUserId: 'usr_bob', outcome: 'failure', statusCode: 400, createdAt: BASE + 2_000, path: '/seed/alpha/Two' }));
    audit.record(event('e3', { service: 'seedbeta', action: 'seedbeta.update', method: 'PATCH', actorUserId: 'usr_alice', outcome: 'denied', statusCode: 403, createdAt: BASE + 3_000, path: '/seed/beta/50%off' }));
    audit.record(event('e4', { service: 'seedbeta', action: 'seedbeta.create', projectId: otherProjectId, apiTokenId: 'tok_seedtoken', actorType: 'api_token', createdAt: BASE + 4_000, path: '/seed/beta/under_score' }));
    audit.record(event('e5', { tenantId: otherTenantId, actorUserId: 'usr_alice', createdAt: BASE + 2_500, path: '/seed/alpha/foreign' }));
    audit.record(event('e6', { service: 'seedbeta', action: 'seedbeta.create', createdAt: BASE + 5_000, path: '/seed/beta/underXscore' }));
    await audit.flush();
    // ... and straight through the store, for the page-size tests.
    const store = new AuditStore(t.ctx.database.db, t.ctx.database.dialect);
    const bulk = Array.from({ length: BULK }, (_, i) => event(`b${i}`, { service: 'bulk', action: 'bulk.write', createdAt: BULK_BASE + i * 1_000, path: `/bulk/${i}` }));
    for (let i = 0; i < bulk.length; i += 200) await store.insertMany(bulk.slice(i, i + 200));
  });
  afterAll(async () => t.close());

  it('answers { object: list, data } newest first, tenant-wide (another project visible, another tenant not)', async () => {
    const { status, body } = await list(WINDOW);
    expect(status).toBe(200);
    expect(Object.keys(body).sort()).toEqual(['data', 'object']);
    expect(body.object).toBe('list');
    expect(await names(WINDOW)).toEqual(['e6', 'e4', 'e3', 'e2', 'e1']);
    const e4 = body.data.find((e: { id: string }) => e.id === seeded.e4!.id);
    expect(e4).toMatchObject({ projectId: otherProjectId, createdAt: iso(BASE + 4_000) });
    const everything = await list('limit=1000');
    expect(everything.body.data.every((e: { tenantId: string }) => e.tenantId === tenantId)).toBe(true);
    expect(everything.body.data.some((e: { id: string }) => e.id === seeded.e5!.id)).toBe(false);
  });

  it('orders events with the same createdAt newest-inserted first', async () => {
    const audit = t.ctx.services.audit;
    const at = BASE + 20_000;
    audit.record(event('tie1', { action: 'tie.x', createdAt: at }));
    audit.record(event('tie2', { action: 'tie.x', createdAt: at }));
    await audit.flush();
    expect(await names('action=tie.x')).toEqual(['tie2', 'tie1']);
  });

  it('action filters exactly', async () => {
    expect(await names('action=seedalpha.delete')).toEqual(['e2']);
    expect(await names(`action=seedbeta.create&${WINDOW}`)).toEqual(['e6', 'e4']);
    expect(await names('action=seedalpha')).toEqual([]);
  });

  it('actorUserId filters exactly', async () => {
    expect(await names('actorUserId=usr_alice')).toEqual(['e3', 'e1']);
    expect(await names('actorUserId=usr_bob')).toEqual(['e2']);
  });

  it('from/to are inclusive: an event exactly at either bound is included', async () => {
    expect(await names(`from=${iso(BASE + 2_000)}&to=${iso(BASE + 4_000)}`)).toEqual(['e4', 'e3', 'e2']);
    expect(await names(`from=${iso(BASE + 3_000)}&to=${iso(BASE + 3_000)}`)).toEqual(['e3']);
    expect(await names(`from=${iso(BASE + 2_001)}&to=${iso(BASE + 3_999)}`)).toEqual(['e3']);
    expect(await names(`to=${iso(BASE + 1_000)}`)).toEqual(['e1']);
  });

  it('accepts other ISO 8601 spellings of the bounds (offset, date only)', async () => {
    expect(await names(`from=${encodeURIComponent('2020-01-01T01:00:03+01:00')}&to=${iso(BASE + 3_000)}`)).toEqual(['e3']);
    expect(await names('from=2019-12-31&to=2020-01-01T00:00:01.000Z')).toEqual(['e1']);
  });

  it('unparseable from/to are ignored, not a 400', async () => {
    expect(await names(`from=yesterday&to=${iso(BASE + 1_000)}`)).toEqual(['e1']);
    expect(await names(`from=${iso(BASE + 5_000)}&to=not-a-date&service=seedbeta`)).toEqual(['e6']);
    expect(await names('from=garbage&to=garbage&action=seedalpha.delete')).toEqual(['e2']);
  });

  it('method is upper-cased: ?method=post finds POSTs', async () => {
    expect(await names(`method=post&${WINDOW}`)).toEqual(['e6', 'e4', 'e1']);
    expect(await names(`method=Delete&${WINDOW}`)).toEqual(['e2']);
    expect(await names(`method=PATCH&${WINDOW}`)).toEqual(['e3']);
  });

  it('outcome filters; an unknown outcome is ignored (all events)', async () => {
    expect(await names(`outcome=denied&${WINDOW}`)).toEqual(['e3']);
    expect(await names(`outcome=failure&${WINDOW}`)).toEqual(['e2']);
    expect(await names(`outcome=success&${WINDOW}`)).toEqual(['e6', 'e4', 'e1']);
    expect(await names(`outcome=exploded&${WINDOW}`)).toEqual(['e6', 'e4', 'e3', 'e2', 'e1']);
  });

  it('service filters by RBAC slug', async () => {
    expect(await names('service=seedbeta')).toEqual(['e6', 'e4', 'e3']);
    expect(await names('service=seedalpha&action=seedalpha.create')).toEqual(['e1']);
  });

  it('q searches action, path, service and actor ids, case-insensitively', async () => {
    expect(await names('q=alpha/TWO')).toEqual(['e2']);
    expect(await names('q=SEEDALPHA.DELETE')).toEqual(['e2']);
    expect(await names(`q=USR_ALICE&${WINDOW}`)).toEqual(['e3', 'e1']);
    expect(await names('q=tok_seedtoken')).toEqual(['e4']);
    expect(await names(`q=seedbeta&${WINDOW}`)).toEqual(['e6', 'e4', 'e3']);
    expect(await names('q=  ')).toHaveLength(100);
  });

  it('q treats % and _ literally', async () => {
    expect(await names('q=50%25off')).toEqual(['e3']);
    expect(await names('q=%25')).toEqual(['e3']);
    expect(await names('q=under_score')).toEqual(['e4']);
    expect(await names(`q=_&${WINDOW}`)).toEqual(['e4', 'e3', 'e2', 'e1']);
  });

  it('limit defaults to 100, clamps to at most 1000 and at least 1', async () => {
    const all = Array.from({ length: BULK }, (_, i) => `b${BULK - 1 - i}`);
    expect(await names('service=bulk')).toEqual(all.slice(0, 100));
    expect(await names('service=bulk&limit=5000')).toEqual(all.slice(0, 1000));
    expect(await names('service=bulk&limit=1000')).toHaveLength(1000);
    expect(await names('service=bulk&limit=0')).toEqual(['b1099']);
    expect(await names('service=bulk&limit=-3')).toEqual(['b1099']);
    expect(await names('service=bulk&limit=7')).toEqual(all.slice(0, 7));
  });

  it('skip pages through the list (default 0; negative treated as 0)', async () => {
    const all = Array.from({ length: BULK }, (_, i) => `b${BULK - 1 - i}`);
    expect(await names('service=bulk&limit=10&skip=10')).toEqual(all.slice(10, 20));
    expect(await names('service=bulk&limit=1000&skip=1000')).toEqual(all.slice(1000));
    expect(await names('service=bulk&limit=5&skip=-4')).toEqual(all.slice(0, 5));
    expect(await names(`service=bulk&skip=${BULK}`)).toEqual([]);
  });

  it.each(['limit=abc', 'limit=1.5', 'skip=x', 'skip=2.5'])('%s is a 400 with {error}', async (query) => {
    const { status, body } = await list(query);
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ type: 'invalid_request_error' });
    expect(body.error.message).toMatch(/limit|skip/);
  });

  it('filters combine (AND)', async () => {
    expect(await names('service=seedbeta&method=post&outcome=success&actorUserId=usr_alice')).toEqual([]);
    expect(await names(`service=seedbeta&method=post&q=under&${WINDOW}`)).toEqual(['e6', 'e4']);
  });
});

describe('audit date filters are ISO 8601 only', () => {
  it('free text that Date.parse would accept is ignored, ISO dates and date-times are used', async () => {
    const { auditFilterFrom } = await import('../../src/areas/audit/service.js');
    expect(auditFilterFrom({ from: 'hello 2' }).from).toBeUndefined();
    expect(auditFilterFrom({ to: 'March 7, 2026' }).to).toBeUndefined();
    expect(auditFilterFrom({ from: '2026-03-07' }).from).toBe(Date.parse('2026-03-07'));
    expect(auditFilterFrom({ to: '2026-03-07T10:20:30.123Z' }).to).toBe(Date.parse('2026-03-07T10:20:30.123Z'));
    expect(auditFilterFrom({ from: '2026-03-07T10:20:30+02:00' }).from).toBe(Date.parse('2026-03-07T10:20:30+02:00'));
    expect(auditFilterFrom({ from: '2026-02-31' }).from).toBeUndefined();
    // Without an offset a time is UTC, whatever the server's zone; a bare date as upper bound covers its day.
    expect(auditFilterFrom({ from: '2026-03-07T10:00' }).from).toBe(Date.parse('2026-03-07T10:00:00Z'));
    expect(auditFilterFrom({ to: '2026-03-07' }).to).toBe(Date.parse('2026-03-08T00:00:00Z') - 1);
    expect(auditFilterFrom({ from: '2026-03-07' }).from).toBe(Date.parse('2026-03-07T00:00:00Z'));
  });
});
