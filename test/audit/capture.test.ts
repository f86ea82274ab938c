import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, ADMIN_PASSWORD, call, createTestApp, createToken, createUserSession, flushAudit, type TestApp } from '../helpers/app.js';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe.each(BACKENDS)('audit capture on %s', (backend) => {
  let t: TestApp;
  let adminId: string;
  let tenantId: string;
  let projectId: string;

  beforeAll(async () => {
    t = await createTestApp({ backend });
    adminId = (await call(t.app, t.adminSession, { method: 'GET', url: '/api/auth/me' })).json().user.id;
    ({ tenantId, projectId } = t.ctx.bootstrap);
  });
  afterAll(async () => t.close());

  /** Raw rows (all columns) straight from the database, after a flush. */
  async function rows(requestId?: string) {
    await flushAudit(t);
    let query = t.ctx.database.db.selectFrom('audit_events').selectAll();
    if (requestId !== undefined) query = query.where('request_id', '=', requestId);
    return query.orderBy('seq').execute();
  }

  /** The one event of a request, as the audit API shows it. */
  async function apiEvent(requestId: string) {
    const res = await call(t.app, t.ownerToken, { method: 'GET', url: `/api/client/v1/audit/logs?q=${encodeURIComponent(requestId)}` });
    expect(res.statusCode).toBe(200);
    const matches = res.json().data.filter((e: { requestId: string }) => e.requestId === requestId);
    expect(matches).toHaveLength(1);
    return matches[0];
  }

  it('a dashboard POST becomes exactly one event with every field filled in', async () => {
    const before = Date.now();
    const res = await call(t.app, t.adminSession, {
      method: 'POST',
      url: '/api/tokens',
      headers: { 'x-request-id': `cap-token-${backend}`, 'user-agent': 'capture-test/1.0' },
      payload: { name: 'audited', projectId: 'default', role: 'member' },
    });
    expect(res.statusCode).toBe(201);
    expect(res.headers['x-request-id']).toBe(`cap-token-${backend}`);
    expect(await rows(`cap-token-${backend}`)).toHaveLength(1);
    const event = await apiEvent(`cap-token-${backend}`);
    expect(Object.keys(event).sort()).toEqual([
      'action', 'actorType', 'actorUserId', 'apiTokenId', 'createdAt', 'id', 'ipAddress', 'method', 'outcome', 'path',
      'projectId', 'requestId', 'resourceId', 'resourceType', 'service', 'statusCode', 'tenantId', 'userAgent',
    ]);
    expect(event).toMatchObject({
      tenantId,
      projectId,
      requestId: `cap-token-${backend}`,
      actorType: 'user',
      actorUserId: adminId,
      apiTokenId: null,
      service: 'tokens',
      action: 'tokens.create',
      method: 'POST',
      path: '/api/tokens',
      statusCode: 201,
      outcome: 'success',
      ipAddress: '127.0.0.1',
      userAgent: 'capture-test/1.0',
      resourceType: 'api_token',
      resourceId: res.json().token.id,
    });
    expect(event.id).toMatch(/^aud_/);
    expect(event.createdAt).toMatch(ISO);
    expect(Date.parse(event.createdAt)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(event.createdAt)).toBeLessThanOrEqual(Date.now());
  });

  it('requestId matches the X-Request-Id response header when the id is generated or comes from the body', async () => {
    const generated = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: 'Generated Id' } });
    expect(generated.statusCode).toBe(201);
    const id = String(generated.headers['x-request-id']);
    expect(id.length).toBeGreaterThan(8);
    expect((await rows(id)).map((r) => [r.action, r.resource_id])).toEqual([['projects.create', generated.json().project.id]]);

    const fromBody = await call(t.app, t.adminSession, {
      method: 'POST',
      url: '/api/projects',
      payload: { name: 'Body Id', request_id: `body-rid-${backend}` },
    });
    expect(fromBody.statusCode).toBe(201);
    expect(fromBody.headers['x-request-id']).toBe(`body-rid-${backend}`);
    expect(await rows(`body-rid-${backend}`)).toHaveLength(1);
  });

  it('DELETE is recorded with the resource from the path', async () => {
    const token = await createToken(t, { name: 'to-revoke' });
    const res = await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/tokens/${token.id}`, headers: { 'x-request-id': `cap-del-${backend}` } });
    expect(res.statusCode).toBe(200);
    const [row] = await rows(`cap-del-${backend}`);
    expect(row).toMatchObject({ action: 'tokens.revoke', method: 'DELETE', path: `/api/tokens/${token.id}`, resource_id: token.id, outcome: 'success', status_code: 200 });
  });

  it('a rejected state-changing request (400) is recorded with outcome failure', async () => {
    const res = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', headers: { 'x-request-id': `cap-400-${backend}` }, payload: {} });
    expect(res.statusCode).toBe(400);
    const [row] = await rows(`cap-400-${backend}`);
    expect(row).toMatchObject({ action: 'projects.create', status_code: 400, outcome: 'failure', tenant_id: tenantId, actor_user_id: adminId });
  });

  it("a failed login for a known email lands in that user's tenant with outcome failure", async () => {
    const user = await createUserSession(t, 'member');
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      headers: { 'x-request-id': `cap-login-${backend}` },
      payload: { email: user.email, password: 'wrong-password-123' },
    });
    expect(res.statusCode).toBe(401);
    const event = await apiEvent(`cap-login-${backend}`);
    expect(event).toMatchObject({
      tenantId,
      actorType: 'user',
      actorUserId: user.id,
      apiTokenId: null,
      service: 'auth',
      action: 'auth.login',
      method: 'POST',
      path: '/api/auth/login',
      statusCode: 401,
      outcome: 'failure',
    });
  });

  it('a failed login for an unknown email is recorded without a tenant or actor', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      headers: { 'x-request-id': `cap-login-unknown-${backend}` },
      payload: { email: 'nobody@example.test', password: 'wrong-password-123' },
    });
    expect(res.statusCode).toBe(401);
    const [row] = await rows(`cap-login-unknown-${backend}`);
    expect(row).toMatchObject({ tenant_id: null, actor_user_id: null, action: 'auth.login', status_code: 401, outcome: 'failure' });
  });

  it('a 401 on a client route is recorded with outcome failure (missing and unknown token)', async () => {
    const missing = await t.app.inject({ method: 'GET', url: '/api/client/v1/token', headers: { 'x-request-id': `cap-401a-${backend}` } });
    const unknown = await call(t.app, 'wgt_unknownunknownunknownunknown', {
      method: 'GET',
      url: '/api/client/v1/audit/logs',
      headers: { 'x-request-id': `cap-401b-${backend}` },
    });
    expect([missing.statusCode, unknown.statusCode]).toEqual([401, 401]);
    const [a] = await rows(`cap-401a-${backend}`);
    const [b] = await rows(`cap-401b-${backend}`);
    expect(a).toMatchObject({ action: 'tokens.self', method: 'GET', path: '/api/client/v1/token', status_code: 401, outcome: 'failure', api_token_id: null });
    expect(b).toMatchObject({ action: 'audit.list', service: 'audit', status_code: 401, outcome: 'failure' });
  });

  it('a 401 on a dashboard route is recorded with outcome failure', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/api/projects', headers: { 'x-request-id': `cap-401d-${backend}` }, payload: { name: 'x' } });
    expect(res.statusCode).toBe(401);
    const [row] = await rows(`cap-401d-${backend}`);
    expect(row).toMatchObject({ action: 'projects.create', status_code: 401, outcome: 'failure' });
  });

  it('a 403 on a client route is recorded with outcome denied and the token as actor', async () => {
    const viewer = await createToken(t, { name: 'viewer', role: 'viewer' });
    const res = await call(t.app, viewer.value, { method: 'GET', url: '/api/client/v1/audit/logs', headers: { 'x-request-id': `cap-403-${backend}` } });
    expect(res.statusCode).toBe(403);
    const event = await apiEvent(`cap-403-${backend}`);
    expect(event).toMatchObject({
      tenantId,
      projectId,
      actorType: 'api_token',
      apiTokenId: viewer.id,
      actorUserId: adminId,
      service: 'audit',
      action: 'audit.list',
      method: 'GET',
      statusCode: 403,
      outcome: 'denied',
    });
  });

  it('a 403 on a dashboard route is recorded with outcome denied', async () => {
    const viewer = await createUserSession(t, 'viewer');
    const res = await call(t.app, viewer.session, { method: 'POST', url: '/api/projects', headers: { 'x-request-id': `cap-403d-${backend}` }, payload: { name: 'nope' } });
    expect(res.statusCode).toBe(403);
    const event = await apiEvent(`cap-403d-${backend}`);
    expect(event).toMatchObject({ actorType: 'user', actorUserId: viewer.id, action: 'projects.create', statusCode: 403, outcome: 'denied' });
  });

  it('successful GET requests are not recorded', async () => {
    const gets = [
      call(t.app, t.ownerToken, { method: 'GET', url: '/api/client/v1/token', headers: { 'x-request-id': `cap-get1-${backend}` } }),
      call(t.app, t.ownerToken, { method: 'GET', url: '/api/client/v1/audit/logs', headers: { 'x-request-id': `cap-get2-${backend}` } }),
      call(t.app, t.adminSession, { method: 'GET', url: '/api/projects', headers: { 'x-request-id': `cap-get3-${backend}` } }),
      call(t.app, t.adminSession, { method: 'GET', url: '/api/tokens', headers: { 'x-request-id': `cap-get4-${backend}` } }),
      t.app.inject({ method: 'GET', url: '/api/health/ready', headers: { 'x-request-id': `cap-get5-${backend}` } }),
    ];
    for (const res of await Promise.all(gets)) expect(res.statusCode).toBe(200);
    for (let i = 1; i <= 5; i++) expect(await rows(`cap-get${i}-${backend}`)).toEqual([]);
  });
});

describe.each(BACKENDS)('audit events hold no secrets on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend });
  });
  afterAll(async () => t.close());

  it('no column of any row contains a token value, a password, a session or a raw body', async () => {
    const secrets: string[] = [t.ownerToken, t.adminSession, ADMIN_PASSWORD];
    const created = await createToken(t, { name: 'secret-holder', role: 'owner' });
    secrets.push(created.value);
    const userPassword = 'user-password-123'; // the one createUserSession uses
    const user = await createUserSession(t, 'admin');
    secrets.push(userPassword, user.session);
    const wrongPassword = 'Wrong-Password-Marker-987';
    secrets.push(wrongPassword);
    await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email: user.email, password: wrongPassword } });
    const bogus = 'wgt_bogusTokenValueMarker1234567890';
    secrets.push(bogus);
    await call(t.app, bogus, { method: 'GET', url: '/api/client/v1/token' });
    await call(t.app, created.value, { method: 'GET', url: '/api/client/v1/audit/logs' });
    const bodyMarker = 'raw-body-marker-zq9';
    secrets.push(bodyMarker, `?api_key=${created.value}`);
    await call(t.app, t.adminSession, { method: 'POST', url: `/api/projects?api_key=${created.value}`, payload: { name: bodyMarker, key: 'marker' } });
    await call(t.app, user.session, { method: 'POST', url: '/api/users', payload: { email: 'third@example.test', password: 'Third-User-Password-55', role: 'member' } });
    secrets.push('Third-User-Password-55');
    await call(t.app, t.adminSession, { method: 'POST', url: '/api/tenants', payload: { name: 'Other', ownerEmail: 'o@example.test', ownerPassword: 'Tenant-Owner-Password-77' } });
    secrets.push('Tenant-Owner-Password-77');
    // Regression: a token value sent where its id belongs (revoking "by value") was kept in the path, the resource id
    // and the request log line.
    await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/tokens/${created.value}` });
    await call(t.app, t.adminSession, { method: 'PATCH', url: `/api/projects/${t.ownerToken}`, payload: { name: 'x' } });

    await flushAudit(t);
    expect(t.logs.join('\n')).not.toContain(created.value.slice(0, 16));
    expect(t.logs.join('\n')).toContain(`/api/tokens/${created.value.slice(0, 12)}…`);
    const all = await t.ctx.database.db.selectFrom('audit_events').selectAll().execute();
    expect(all.length).toBeGreaterThanOrEqual(8);
    const text = JSON.stringify(all);
    for (const secret of secrets) expect(text).not.toContain(secret);
    // Nor a fragment of a token value long enough to be useful (the display prefix is 8 characters after wgt_).
    for (const value of [created.value, t.ownerToken]) expect(text).not.toContain(value.slice(0, 16));
    expect(all.some((r) => r.path === '/api/projects' && r.status_code === 201)).toBe(true);
  });
});
