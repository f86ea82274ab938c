import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { BACKENDS, call, createTestApp, createToken, createUserSession, type TestApp } from '../helpers/app.js';

const AUDIT = { method: 'GET' as const, url: '/api/client/v1/audit/logs?limit=5' };
const SELF = { method: 'GET' as const, url: '/api/client/v1/token' };

function expectForbidden(res: { statusCode: number; body: string; json: () => { error: { type: string; code: string; message: string } } }, ...named: string[]): void {
  expect(res.statusCode, res.body).toBe(403);
  expect(res.json().error.type).toBe('permission_error');
  expect(res.json().error.code).toBe('insufficient_permission');
  for (const word of named) expect(res.json().error.message).toContain(word);
}

describe.each(BACKENDS)('RBAC on the client API on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend });
  });
  afterAll(async () => t.close());

  it.each(['owner', 'admin'])('audit.list is open to a %s token', async (role) => {
    const token = await createToken(t, { role });
    const res = await call(t.app, token.value, AUDIT);
    expect(res.statusCode).toBe(200);
    expect(res.json().object).toBe('list');
  });

  it.each(['member', 'viewer'])('audit.list is 403 for a %s token, naming the audit service and read level', async (role) => {
    const token = await createToken(t, { role });
    expectForbidden(await call(t.app, token.value, AUDIT), 'audit', 'read');
  });

  it.each(['member', 'viewer'])('a %s token with the audit:read grant may list audit logs', async (role) => {
    const token = await createToken(t, { role, grants: ['audit:read'] });
    const res = await call(t.app, token.value, AUDIT);
    expect(res.statusCode).toBe(200);
    expect(Array.isArray(res.json().data)).toBe(true);
  });

  it('an owner token whose permission map omits audit is 403', async () => {
    const token = await createToken(t, { role: 'owner', permissions: { agents: 'write', batches: 'read' } });
    expectForbidden(await call(t.app, token.value, AUDIT), 'audit');
  });

  it('an owner token whose permission map sets audit to none is 403', async () => {
    const token = await createToken(t, { role: 'owner', permissions: { audit: 'none' } });
    expectForbidden(await call(t.app, token.value, AUDIT), 'audit');
  });

  it('an admin token with permission map { audit: read } may list audit logs', async () => {
    const token = await createToken(t, { role: 'admin', permissions: { audit: 'read' } });
    expect((await call(t.app, token.value, AUDIT)).statusCode).toBe(200);
  });

  it('a permission map cannot widen a role: a member token with { audit: write } is still 403', async () => {
    const token = await createToken(t, { role: 'member', permissions: { audit: 'write' } });
    expectForbidden(await call(t.app, token.value, AUDIT), 'audit');
  });

  it.each([
    ['owner', undefined],
    ['admin', undefined],
    ['member', undefined],
    ['viewer', undefined],
    ['viewer', { agents: 'read' }],
    ['owner', {}],
  ])('tokens.self works for a %s token (permissions %j)', async (role, permissions) => {
    const token = await createToken(t, { role, ...(permissions ? { permissions } : {}) });
    const res = await call(t.app, token.value, SELF);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ id: token.id, role, tenantId: t.ctx.bootstrap.tenantId, projectId: t.ctx.bootstrap.projectId });
    expect(res.json().data.permissions).toEqual(permissions ?? null);
  });

  it('a 403 is recorded in the audit log as denied', async () => {
    const token = await createToken(t, { role: 'viewer' });
    expect((await call(t.app, token.value, AUDIT)).statusCode).toBe(403);
    const list = await call(t.app, t.ownerToken, { method: 'GET', url: '/api/client/v1/audit/logs?outcome=denied&action=audit.list' });
    const denied = list.json().data.filter((e: { apiTokenId: string }) => e.apiTokenId === token.id);
    expect(denied).toHaveLength(1);
    expect(denied[0]).toMatchObject({ statusCode: 403, outcome: 'denied', action: 'audit.list', service: 'audit' });
  });

  it('the denied event is found by free-text search on the token id (ids contain "_")', async () => {
    const token = await createToken(t, { role: 'viewer' });
    expect((await call(t.app, token.value, AUDIT)).statusCode).toBe(403);
    const list = await call(t.app, t.ownerToken, { method: 'GET', url: `/api/client/v1/audit/logs?q=${token.id}` });
    expect(list.statusCode).toBe(200);
    const found = list.json().data.map((e: { apiTokenId: string; outcome: string }) => [e.apiTokenId, e.outcome]);
    expect(found).toContainEqual([token.id, 'denied']);
  });
});

describe.each(BACKENDS)('RBAC on the dashboard API on %s', (backend) => {
  let t: TestApp;
  let member: { session: string; id: string };
  let viewer: { session: string; id: string };
  let admin: { session: string; id: string };
  beforeAll(async () => {
    t = await createTestApp({ backend });
    member = await createUserSession(t, 'member');
    viewer = await createUserSession(t, 'viewer');
    admin = await createUserSession(t, 'admin');
  });
  afterAll(async () => t.close());

  const newUser = (role: string) => ({ email: `u-${randomBase32(8)}@example.test`, password: 'user-password-1', role });

  it.each(['member', 'viewer'] as const)('a %s cannot create projects or users (403 naming the service)', async (who) => {
    const session = who === 'member' ? member.session : viewer.session;
    expectForbidden(await call(t.app, session, { method: 'POST', url: '/api/projects', payload: { name: `P ${randomBase32(6)}` } }), 'projects', 'write');
    expectForbidden(await call(t.app, session, { method: 'POST', url: '/api/users', payload: newUser('viewer') }), 'users', 'write');
  });

  it.each(['member', 'viewer'] as const)('a %s may still read projects and users', async (who) => {
    const session = who === 'member' ? member.session : viewer.session;
    expect((await call(t.app, session, { method: 'GET', url: '/api/projects' })).statusCode).toBe(200);
    expect((await call(t.app, session, { method: 'GET', url: '/api/users' })).statusCode).toBe(200);
  });

  it('a member creates tokens with role member or viewer', async () => {
    for (const role of ['member', 'viewer']) {
      const res = await call(t.app, member.session, { method: 'POST', url: '/api/tokens', payload: { name: 'mine', projectId: 'default', role } });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().token).toMatchObject({ role, createdByUserId: member.id });
    }
  });

  it.each(['admin', 'owner'])('a member creating a %s token is 403', async (role) => {
    const res = await call(t.app, member.session, { method: 'POST', url: '/api/tokens', payload: { name: 'up', projectId: 'default', role } });
    expectForbidden(res, role);
  });

  it('a member cannot give a token grants (403)', async () => {
    const res = await call(t.app, member.session, { method: 'POST', url: '/api/tokens', payload: { name: 'g', projectId: 'default', role: 'viewer', grants: ['audit:read'] } });
    expectForbidden(res, 'grant');
  });

  it('a viewer cannot create tokens at all (403 naming the tokens service)', async () => {
    const res = await call(t.app, viewer.session, { method: 'POST', url: '/api/tokens', payload: { name: 'v', projectId: 'default', role: 'viewer' } });
    expectForbidden(res, 'tokens', 'write');
  });

  it('an admin may give grants and create admin tokens but not owner tokens', async () => {
    const ok = await call(t.app, admin.session, { method: 'POST', url: '/api/tokens', payload: { name: 'a', projectId: 'default', role: 'admin', grants: ['audit:read'] } });
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json().token.grants).toEqual(['audit:read']);
    expectForbidden(await call(t.app, admin.session, { method: 'POST', url: '/api/tokens', payload: { name: 'o', projectId: 'default', role: 'owner' } }), 'owner');
  });

  it('an admin cannot create an owner user (403) but can create an admin', async () => {
    expectForbidden(await call(t.app, admin.session, { method: 'POST', url: '/api/users', payload: newUser('owner') }), 'owner');
    const ok = await call(t.app, admin.session, { method: 'POST', url: '/api/users', payload: newUser('admin') });
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json().user.role).toBe('admin');
  });

  it('only the instance admin can POST /api/tenants', async () => {
    const email = `b-owner-${randomBase32(6)}@example.test`;
    const created = await call(t.app, t.adminSession, { method: 'POST', url: '/api/tenants', payload: { name: 'Tenant B', ownerEmail: email, ownerPassword: 'b-owner-password' } });
    expect(created.statusCode, created.body).toBe(201);
    const otherOwner = (await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password: 'b-owner-password' } })).json().token;
    const tenantBody = () => ({ name: `T ${randomBase32(6)}`, ownerEmail: `x-${randomBase32(8)}@example.test`, ownerPassword: 'x-owner-password' });
    expectForbidden(await call(t.app, otherOwner, { method: 'POST', url: '/api/tenants', payload: tenantBody() }), 'instance admin');
    // An owner of the default tenant who is not the instance admin is refused too, as are admins.
    const owner = await createUserSession(t, 'owner');
    expectForbidden(await call(t.app, owner.session, { method: 'POST', url: '/api/tenants', payload: tenantBody() }));
    expectForbidden(await call(t.app, admin.session, { method: 'POST', url: '/api/tenants', payload: tenantBody() }));
    expectForbidden(await call(t.app, member.session, { method: 'POST', url: '/api/tenants', payload: tenantBody() }), 'tenants');
  });
});
