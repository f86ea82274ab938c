import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { BACKENDS, call, createTestApp, createToken, createUserSession, flushAudit, type TestApp } from '../helpers/app.js';

interface TenantB {
  tenantId: string;
  projectId: string;
  ownerId: string;
  session: string;
}

async function createTenantB(t: TestApp): Promise<TenantB> {
  const email = `owner-b-${randomBase32(6)}@example.test`;
  const created = await call(t.app, t.adminSession, { method: 'POST', url: '/api/tenants', payload: { name: 'Tenant B', ownerEmail: email, ownerPassword: 'owner-b-password' } });
  if (created.statusCode !== 201) throw new Error(`tenant create failed: ${created.body}`);
  const login = await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password: 'owner-b-password' } });
  if (login.statusCode !== 200) throw new Error(`tenant B login failed: ${login.body}`);
  const body = created.json();
  return { tenantId: body.tenant.id, projectId: body.project.id, ownerId: body.user.id, session: login.json().token };
}

/** The error body with the id taken out, to compare the shape of two 404s. */
function shapeOf(body: { error: { message: string; type: string; code?: string } }, id: string) {
  return { ...body.error, message: body.error.message.replace(id, '<id>') };
}

describe.each(BACKENDS)('tenant and project isolation on %s', (backend) => {
  let t: TestApp;
  let b: TenantB;
  let tokenA: { id: string; value: string };
  beforeAll(async () => {
    t = await createTestApp({ backend });
    tokenA = await createToken(t, { role: 'member', name: 'tenant-a-token' });
    b = await createTenantB(t);
  });
  afterAll(async () => t.close());

  it("tenant B's lists exclude tenant A's tokens, users and projects", async () => {
    const bToken = await createToken(t, { role: 'owner', projectId: b.projectId, name: 'tenant-b-token' }, b.session);

    const tokens = (await call(t.app, b.session, { method: 'GET', url: '/api/tokens' })).json().tokens as { id: string }[];
    expect(tokens.map((x) => x.id)).toEqual([bToken.id]);
    const users = (await call(t.app, b.session, { method: 'GET', url: '/api/users' })).json().users as { id: string }[];
    expect(users.map((x) => x.id)).toEqual([b.ownerId]);
    const projects = (await call(t.app, b.session, { method: 'GET', url: '/api/projects' })).json().projects as { id: string }[];
    expect(projects.map((x) => x.id)).toEqual([b.projectId]);

    // And the other way round.
    const aTokens = (await call(t.app, t.adminSession, { method: 'GET', url: '/api/tokens' })).json().tokens as { id: string }[];
    expect(aTokens.map((x) => x.id)).toContain(tokenA.id);
    expect(aTokens.map((x) => x.id)).not.toContain(bToken.id);
    const aUsers = (await call(t.app, t.adminSession, { method: 'GET', url: '/api/users' })).json().users as { id: string }[];
    expect(aUsers.map((x) => x.id)).not.toContain(b.ownerId);
    const aProjects = (await call(t.app, t.adminSession, { method: 'GET', url: '/api/projects' })).json().projects as { id: string }[];
    expect(aProjects.map((x) => x.id)).not.toContain(b.projectId);
  });

  it("DELETE of A's token as B is 404 with the same body shape as a missing id, and changes nothing", async () => {
    const foreign = await call(t.app, b.session, { method: 'DELETE', url: `/api/tokens/${tokenA.id}` });
    const missingId = `tok_${randomBase32(24)}`;
    const missing = await call(t.app, b.session, { method: 'DELETE', url: `/api/tokens/${missingId}` });
    expect(foreign.statusCode).toBe(404);
    expect(missing.statusCode).toBe(404);
    expect(shapeOf(foreign.json(), tokenA.id)).toEqual(shapeOf(missing.json(), missingId));
    expect(Object.keys(foreign.json())).toEqual(['error']);
    // The token still works.
    expect((await call(t.app, tokenA.value, { method: 'GET', url: '/api/client/v1/token' })).statusCode).toBe(200);
    const row = await t.ctx.database.db.selectFrom('api_tokens').select('revoked_at').where('id', '=', tokenA.id).executeTakeFirstOrThrow();
    expect(row.revoked_at).toBeNull();
  });

  it("POST /api/tokens with A's project id as B is 404, like an unknown project", async () => {
    const foreign = await call(t.app, b.session, { method: 'POST', url: '/api/tokens', payload: { name: 'x', projectId: t.ctx.bootstrap.projectId, role: 'viewer' } });
    const unknown = await call(t.app, b.session, { method: 'POST', url: '/api/tokens', payload: { name: 'x', projectId: 'prj_nothere', role: 'viewer' } });
    expect(foreign.statusCode).toBe(404);
    expect(unknown.statusCode).toBe(404);
    expect(shapeOf(foreign.json(), t.ctx.bootstrap.projectId)).toEqual(shapeOf(unknown.json(), 'prj_nothere'));
    // The key `default` names B's own default project, never A's.
    const own = await call(t.app, b.session, { method: 'POST', url: '/api/tokens', payload: { name: 'own', projectId: 'default', role: 'viewer' } });
    expect(own.statusCode).toBe(201);
    expect(own.json().token.projectId).toBe(b.projectId);
  });

  it("audit logs listed with B's token contain none of A's events", async () => {
    // Activity in A: a state change and a denial.
    await createToken(t, { role: 'viewer', name: 'more-a-activity' });
    await call(t.app, tokenA.value, { method: 'GET', url: '/api/client/v1/audit/logs' });
    const bToken = await createToken(t, { role: 'owner', projectId: b.projectId }, b.session);
    await flushAudit(t);
    const aEvents = (await call(t.app, t.ownerToken, { method: 'GET', url: '/api/client/v1/audit/logs?limit=1000' })).json().data as { id: string; tenantId: string }[];
    expect(aEvents.length).toBeGreaterThan(3);
    const bRes = await call(t.app, bToken.value, { method: 'GET', url: '/api/client/v1/audit/logs?limit=1000' });
    expect(bRes.statusCode).toBe(200);
    const bEvents = bRes.json().data as { id: string; tenantId: string; action: string }[];
    expect(bEvents.length).toBeGreaterThan(0);
    expect(bEvents.every((e) => e.tenantId === b.tenantId)).toBe(true);
    const aIds = new Set(aEvents.map((e) => e.id));
    expect(bEvents.filter((e) => aIds.has(e.id))).toEqual([]);
    expect(aEvents.every((e) => e.tenantId === t.ctx.bootstrap.tenantId)).toBe(true);
    // B sees its own token creation; A's free-text search for it finds nothing.
    expect(bEvents.map((e) => e.action)).toContain('tokens.create');
    const aSearch = await call(t.app, t.ownerToken, { method: 'GET', url: `/api/client/v1/audit/logs?service=tokens&limit=1000` });
    expect(aSearch.json().data.map((e: { resourceId: string }) => e.resourceId)).not.toContain(bToken.id);
  });

  it("a member of A cannot revoke another member's token (404) but an admin can", async () => {
    const alice = await createUserSession(t, 'member');
    const bob = await createUserSession(t, 'member');
    const admin = await createUserSession(t, 'admin');
    const bobsToken = await createToken(t, { role: 'member', name: 'bobs' }, bob.session);

    const byAlice = await call(t.app, alice.session, { method: 'DELETE', url: `/api/tokens/${bobsToken.id}` });
    expect(byAlice.statusCode).toBe(404);
    expect(byAlice.json().error.type).toBe('not_found_error');
    // Alice does not see Bob's token in her list either.
    const alicesList = (await call(t.app, alice.session, { method: 'GET', url: '/api/tokens' })).json().tokens as { id: string }[];
    expect(alicesList.map((x) => x.id)).not.toContain(bobsToken.id);
    expect((await call(t.app, bobsToken.value, { method: 'GET', url: '/api/client/v1/token' })).statusCode).toBe(200);

    const byAdmin = await call(t.app, admin.session, { method: 'DELETE', url: `/api/tokens/${bobsToken.id}` });
    expect(byAdmin.statusCode).toBe(200);
    expect(byAdmin.json().token.revokedAt).not.toBeNull();
    expect((await call(t.app, bobsToken.value, { method: 'GET', url: '/api/client/v1/token' })).statusCode).toBe(401);

    // Bob may revoke his own.
    const own = await createToken(t, { role: 'viewer', name: 'bobs-2' }, bob.session);
    expect((await call(t.app, bob.session, { method: 'DELETE', url: `/api/tokens/${own.id}` })).statusCode).toBe(200);
  });

  it("a second project's token is distinct: GET /api/client/v1/token shows its projectId", async () => {
    const created = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: 'Second project' } });
    expect(created.statusCode).toBe(201);
    const second = created.json().project;
    expect(second.id).not.toBe(t.ctx.bootstrap.projectId);
    const byKey = await createToken(t, { role: 'member', projectId: second.key });
    const byId = await createToken(t, { role: 'member', projectId: second.id });
    for (const token of [byKey, byId]) {
      const res = await call(t.app, token.value, { method: 'GET', url: '/api/client/v1/token' });
      expect(res.json().data).toMatchObject({ id: token.id, projectId: second.id });
    }
    const first = await call(t.app, t.ownerToken, { method: 'GET', url: '/api/client/v1/token' });
    expect(first.json().data.projectId).toBe(t.ctx.bootstrap.projectId);
  });

  it("B's token on the client API reports tenant B, never A", async () => {
    const bToken = await createToken(t, { role: 'viewer', projectId: b.projectId }, b.session);
    const res = await call(t.app, bToken.value, { method: 'GET', url: '/api/client/v1/token' });
    expect(res.json().data).toMatchObject({ tenantId: b.tenantId, projectId: b.projectId });
  });
});
