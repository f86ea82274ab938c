import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { BACKENDS, call, createTestApp, flushAudit, type TestApp } from '../helpers/app.js';
import { holdTogether } from '../helpers/races.js';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

async function createTokenRes(t: TestApp, body: Record<string, unknown>) {
  return call(t.app, t.adminSession, { method: 'POST', url: '/api/tokens', payload: { name: 'tok', projectId: 'default', role: 'member', ...body } });
}

describe.each(BACKENDS)('API tokens on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend });
  });
  afterAll(async () => t.close());

  it('a value is wgt_ plus 43 base64url characters (32 random bytes), different every time', async () => {
    const values = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const res = await createTokenRes(t, {});
      expect(res.statusCode).toBe(201);
      const value = res.json().value as string;
      expect(value).toMatch(/^wgt_[A-Za-z0-9_-]{43}$/);
      expect(value).toHaveLength(47);
      expect(Buffer.from(value.slice(4), 'base64url')).toHaveLength(32);
      values.add(value);
    }
    expect(values.size).toBe(5);
  });

  it('the value appears only in the create response; its hash never; the row keeps SHA-256 hex', async () => {
    const created = await createTokenRes(t, { role: 'owner', name: 'once' });
    const { token, value } = created.json() as { token: { id: string; prefix: string }; value: string };
    expect(token.prefix.length).toBeLessThan(value.length);
    expect(value.startsWith(token.prefix)).toBe(true);

    const later = [
      await call(t.app, t.adminSession, { method: 'GET', url: '/api/tokens' }),
      await call(t.app, t.adminSession, { method: 'GET', url: '/api/auth/me' }),
      await call(t.app, value, { method: 'GET', url: '/api/client/v1/token' }),
      await call(t.app, value, { method: 'GET', url: '/api/client/v1/audit/logs?limit=1000' }),
      await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/tokens/${token.id}` }),
      await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/tokens/${token.id}` }),
      await call(t.app, t.adminSession, { method: 'GET', url: '/api/tokens' }),
      await call(t.app, t.ownerToken, { method: 'GET', url: '/api/client/v1/audit/logs?limit=1000' }),
    ];
    expect(later.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200, 200, 200, 200]);
    for (const res of later) {
      expect(res.body).not.toContain(value);
      expect(res.body).not.toContain(value.slice(4));
      expect(res.body).not.toContain(sha256(value));
      expect(JSON.stringify(res.headers)).not.toContain(value);
    }
    const listed = later[0]!.json().tokens.find((x: { id: string }) => x.id === token.id);
    expect(listed).toBeDefined();
    expect(Object.keys(listed)).not.toContain('value');

    const row = await t.ctx.database.db.selectFrom('api_tokens').selectAll().where('id', '=', token.id).executeTakeFirstOrThrow();
    expect(row.token_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(row.token_hash).toBe(sha256(value));
    expect(JSON.stringify(row)).not.toContain(value);
  });

  it('no token value or password reaches the logs or the audit log', async () => {
    const userPassword = `user-pw-${randomBase32(12)}`;
    const wrongPassword = `wrong-pw-${randomBase32(12)}`;
    const email = `secret-${randomBase32(6)}@example.test`;
    expect((await call(t.app, t.adminSession, { method: 'POST', url: '/api/users', payload: { email, password: userPassword, role: 'admin' } })).statusCode).toBe(201);
    expect((await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password: wrongPassword } })).statusCode).toBe(401);
    const login = await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password: userPassword } });
    expect(login.statusCode).toBe(200);
    const session = login.json().token as string;
    const created = await call(t.app, session, { method: 'POST', url: '/api/tokens', payload: { name: 'secret', projectId: 'default', role: 'admin' } });
    const { token, value } = created.json() as { token: { id: string }; value: string };
    expect((await call(t.app, value, { method: 'GET', url: '/api/client/v1/token' })).statusCode).toBe(200);
    expect((await call(t.app, session, { method: 'DELETE', url: `/api/tokens/${token.id}` })).statusCode).toBe(200);
    expect((await call(t.app, value, { method: 'GET', url: '/api/client/v1/token' })).statusCode).toBe(401);
    await flushAudit(t);

    const secrets = [value, value.slice(4), sha256(value), userPassword, wrongPassword, session];
    const viaApi = await call(t.app, t.ownerToken, { method: 'GET', url: '/api/client/v1/audit/logs?limit=1000' });
    const rows = await t.ctx.database.db.selectFrom('audit_events').selectAll().execute();
    // The trail did record these requests (so the search below is over something real).
    const actions = rows.map((r) => r.action);
    expect(actions).toEqual(expect.arrayContaining(['users.create', 'auth.login', 'tokens.create', 'tokens.revoke', 'tokens.self']));
    expect(rows.some((r) => r.resource_id === token.id)).toBe(true);
    const logs = t.logs.join('\n');
    expect(logs.length).toBeGreaterThan(0);
    for (const secret of secrets) {
      expect(viaApi.body).not.toContain(secret);
      expect(JSON.stringify(rows)).not.toContain(secret);
      expect(logs).not.toContain(secret);
    }
  });

  it('revoke makes a token 401 at once, even after it was cached by a successful call', async () => {
    const { token, value } = (await createTokenRes(t, { role: 'viewer' })).json();
    for (let i = 0; i < 2; i++) expect((await call(t.app, value, { method: 'GET', url: '/api/client/v1/token' })).statusCode).toBe(200);
    const revoked = await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/tokens/${token.id}` });
    expect(revoked.statusCode).toBe(200);
    expect(Date.parse(revoked.json().token.revokedAt)).toBeGreaterThan(0);
    const after = await call(t.app, value, { method: 'GET', url: '/api/client/v1/token' });
    expect(after.statusCode).toBe(401);
    expect(after.json().error.code).toBe('invalid_token');
  });

  it('a double revoke is 200 and keeps the first revokedAt', async () => {
    const { token } = (await createTokenRes(t, {})).json();
    const first = await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/tokens/${token.id}` });
    const row1 = await t.ctx.database.db.selectFrom('api_tokens').select('revoked_at').where('id', '=', token.id).executeTakeFirstOrThrow();
    const second = await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/tokens/${token.id}` });
    expect(first.statusCode).toBe(200);
    expect(second.statusCode).toBe(200);
    expect(second.json().token.revokedAt).toBe(first.json().token.revokedAt);
    const row2 = await t.ctx.database.db.selectFrom('api_tokens').select('revoked_at').where('id', '=', token.id).executeTakeFirstOrThrow();
    expect(row2.revoked_at).toBe(row1.revoked_at);
    expect(new Date(row2.revoked_at!).toISOString()).toBe(first.json().token.revokedAt);
  });

  it('two revokes at once both answer the revokedAt that was stored (the first)', async () => {
    const { token } = (await createTokenRes(t, {})).json();
    const restore = holdTogether((t.ctx.services.tokens as unknown as { store: object }).store, 'findById', 2, 10);
    const answers = await Promise.all([0, 1].map(() => call(t.app, t.adminSession, { method: 'DELETE', url: `/api/tokens/${token.id}` })));
    restore();
    const row = await t.ctx.database.db.selectFrom('api_tokens').select('revoked_at').where('id', '=', token.id).executeTakeFirstOrThrow();
    for (const answer of answers) expect(answer.json().token.revokedAt).toBe(new Date(row.revoked_at!).toISOString());
  });

  it('a future expiresAt is stored and returned; the token works until then', async () => {
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    const res = await createTokenRes(t, { expiresAt });
    expect(res.statusCode).toBe(201);
    expect(res.json().token.expiresAt).toBe(expiresAt);
    expect((await call(t.app, res.json().value, { method: 'GET', url: '/api/client/v1/token' })).statusCode).toBe(200);
  });

  it.each([
    ['expiresAt in the past', { expiresAt: '2020-01-01T00:00:00.000Z' }, 'expiresAt'],
    ['expiresAt not a date', { expiresAt: 'tomorrow' }, 'expiresAt'],
    // Regression: an offset took it into the year 10000; the token was stored, answered 500, and the token list
    // failed from then on (its date could not be written as a date-time).
    ['expiresAt after the year 9999 in UTC', { expiresAt: '9999-12-31T23:59:59-00:01' }, 'expiresAt'],
    ['an unknown permission-map service', { permissions: { spaceships: 'read' } }, 'spaceships'],
    ['an unknown permission level', { permissions: { agents: 'admin' } }, 'none, read, write'],
    ['a permission map naming self', { permissions: { self: 'read' } }, 'self'],
    ['an unknown grant', { grants: ['audit:write'] }, 'audit:read'],
    ['a budget without period', { budget: { maxTokens: 1000 } }, 'budget.period is required'],
    ['a budget with only period', { budget: { period: 'month' } }, 'maxTokens or maxCostUsd'],
    ['a budget with an unknown period', { budget: { maxTokens: 5, period: 'week' } }, 'day, month, total'],
    ['a budget with a non-positive limit', { budget: { maxTokens: 0, period: 'day' } }, 'maxTokens'],
    // Regression: it was taken, and counted as a limit of 0 nano-dollars (every call refused).
    ['a cost budget under one nano-dollar', { budget: { maxCostUsd: 1e-10, period: 'day' } }, 'maxCostUsd'],
    ['an empty rateLimit', { rateLimit: {} }, 'rpm or tpm'],
    ['a rateLimit with an unknown field', { rateLimit: { rps: 5 } }, 'rps'],
    ['a rateLimit of the wrong type', { rateLimit: { rpm: '60' } }, 'rpm'],
  ])('%s -> 400 naming the problem', async (_name, body, named) => {
    const res = await createTokenRes(t, body);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error.type).toBe('invalid_request_error');
    expect(res.json().error.message).toContain(named);
  });

  it('nothing is written by a rejected create', async () => {
    const before = await t.ctx.database.db.selectFrom('api_tokens').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    await createTokenRes(t, { expiresAt: '2020-01-01T00:00:00.000Z' });
    await createTokenRes(t, { projectId: 'prj_missing' });
    await createTokenRes(t, { expiresAt: '9999-12-31T23:59:59-00:01' });
    const after = await t.ctx.database.db.selectFrom('api_tokens').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    expect(Number(after.n)).toBe(Number(before.n));
  });

  it('the last moment a date-time can show is a valid expiresAt, and the list still answers', async () => {
    const res = await createTokenRes(t, { expiresAt: '9999-12-31T23:59:59.999Z' });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().token.expiresAt).toBe('9999-12-31T23:59:59.999Z');
    expect((await call(t.app, t.adminSession, { method: 'GET', url: '/api/tokens' })).statusCode).toBe(200);
  });

  it('budget and rateLimit are stored and returned', async () => {
    const budget = { maxTokens: 100000, maxCostUsd: 12.5, period: 'month' };
    const rateLimit = { rpm: 60, tpm: 40000 };
    const res = await createTokenRes(t, { budget, rateLimit, permissions: { agents: 'write', audit: 'read' }, grants: ['audit:read'] });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().token).toMatchObject({ budget, rateLimit, permissions: { agents: 'write', audit: 'read' }, grants: ['audit:read'] });
    const id = res.json().token.id;
    const listed = (await call(t.app, t.adminSession, { method: 'GET', url: '/api/tokens' })).json().tokens.find((x: { id: string }) => x.id === id);
    expect(listed).toMatchObject({ budget, rateLimit });
    const row = await t.ctx.database.db.selectFrom('api_tokens').select(['budget', 'rate_limit']).where('id', '=', id).executeTakeFirstOrThrow();
    const parse = (v: unknown) => (typeof v === 'string' ? JSON.parse(v) : v);
    expect(parse(row.budget)).toEqual(budget);
    expect(parse(row.rate_limit)).toEqual(rateLimit);
    const plain = await createTokenRes(t, {});
    expect(plain.json().token).toMatchObject({ budget: null, rateLimit: null, permissions: null, grants: [], expiresAt: null, revokedAt: null });
  });
});
