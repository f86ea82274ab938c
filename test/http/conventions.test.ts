import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { ADMIN_EMAIL, BACKENDS, createTestApp, createUserSession, flushAudit, type TestApp } from '../helpers/app.js';

const BODY_LIMIT = 1024;

describe.each(BACKENDS)('request conventions on %s', (backend) => {
  let t: TestApp;
  /** Every response of the current test, checked after it: never a 5xx, always an X-Request-Id. */
  let seen: LightMyRequestResponse[] = [];
  beforeAll(async () => {
    t = await createTestApp({ backend, env: { WAYGATE_BODY_LIMIT_BYTES: String(BODY_LIMIT) } });
  });
  afterAll(async () => t.close());
  afterEach(() => {
    const responses = seen;
    seen = [];
    expect(responses.length).toBeGreaterThan(0);
    for (const res of responses) {
      expect(res.statusCode, res.body).toBeLessThan(500);
      expect(res.headers['x-request-id']).toMatch(/^[\w.:@/+=-]{1,128}$/);
    }
  });

  async function send(options: InjectOptions, session: string | null = t.adminSession): Promise<LightMyRequestResponse> {
    const headers = { ...(options.headers ?? {}), ...(session ? { authorization: `Bearer ${session}` } : {}) };
    const res = await t.app.inject({ ...options, headers });
    seen.push(res);
    return res;
  }

  function expectError(res: LightMyRequestResponse, status: number, code?: string): { message: string; type: string; code?: string } {
    expect(res.statusCode, res.body).toBe(status);
    const body = res.json();
    expect(Object.keys(body)).toEqual(['error']);
    expect(typeof body.error.message).toBe('string');
    expect(typeof body.error.type).toBe('string');
    if (code) expect(body.error.code).toBe(code);
    return body.error;
  }

  const json = { 'content-type': 'application/json' };

  it('malformed JSON is 400 invalid_json, on a session route and on login', async () => {
    for (const payload of ['{"name": ', '{name: "x"}', "{'a':1}", '{"a":1}}']) {
      expectError(await send({ method: 'POST', url: '/api/projects', headers: json, payload }), 400, 'invalid_json');
    }
    expectError(await send({ method: 'POST', url: '/api/auth/login', headers: json, payload: '{"email":' }, null), 400, 'invalid_json');
  });

  it.each([
    ['null', 'null'],
    ['an array', '[]'],
    ['a string', '"project"'],
    ['a number', '42'],
    ['an empty body', ''],
  ])('a JSON body that is %s where an object is required is 400', async (_name, payload) => {
    const error = expectError(await send({ method: 'POST', url: '/api/projects', headers: json, payload }), 400);
    expect(error.type).toBe('invalid_request_error');
  });

  it('a POST with neither body nor Content-Type where a body is required is 400', async () => {
    expectError(await send({ method: 'POST', url: '/api/projects' }), 400);
  });

  it.each([
    ['/api/projects', { name: 5 }, 'body.name must be of type string'],
    ['/api/users', { email: 'w@example.test', password: 12345678, role: 'viewer' }, 'body.password must be of type string'],
    ['/api/tokens', { name: 'x', projectId: 'default', role: 'viewer', grants: 'audit:read' }, 'body.grants'],
    ['/api/tokens', { name: 'x', projectId: 'default', role: 'viewer', expiresAt: 1893456000 }, 'body.expiresAt'],
  ])('POST %s with a wrong type is 400 naming the field', async (url, payload, message) => {
    expect(expectError(await send({ method: 'POST', url, payload }), 400, 'invalid_request').message).toContain(message);
  });

  it('a wrong type in the query string is 400 naming the parameter', async () => {
    const res = await send({ method: 'GET', url: '/api/client/v1/audit/logs?limit=lots' }, t.ownerToken);
    expect(expectError(res, 400).message).toContain('limit');
  });

  it.each([
    ['/api/users', { email: 'e@example.test', password: 'password-123', role: 'superuser' }],
    ['/api/tokens', { name: 'x', projectId: 'default', role: 'superuser' }],
  ])('POST %s with an unknown role is 400 listing the allowed values', async (url, payload) => {
    const error = expectError(await send({ method: 'POST', url, payload }), 400, 'invalid_request');
    expect(error.message).toContain('role');
    expect(error.message).toContain('owner, admin, member, viewer');
  });

  it.each([
    ['/api/projects', { name: 'x', colour: 'red' }, 'colour'],
    ['/api/users', { email: 'f@example.test', password: 'password-123', role: 'viewer', admin: true }, 'admin'],
    ['/api/tokens', { name: 'x', projectId: 'default', role: 'viewer', scopes: ['all'] }, 'scopes'],
    ['/api/tenants', { name: 'x', ownerEmail: 'g@example.test', ownerPassword: 'password-123', plan: 'gold' }, 'plan'],
  ])('POST %s with an unknown field is 400 naming it', async (url, payload, field) => {
    const error = expectError(await send({ method: 'POST', url, payload }), 400, 'invalid_request');
    expect(error.message).toContain(field);
  });

  it('names are capped at 200 characters', async () => {
    const ok = await send({ method: 'POST', url: '/api/projects', payload: { name: 'p'.repeat(200) } });
    expect(ok.statusCode, ok.body).toBe(201);
    for (const [url, payload] of [
      ['/api/projects', { name: 'q'.repeat(201) }],
      ['/api/tokens', { name: 't'.repeat(201), projectId: 'default', role: 'viewer' }],
      ['/api/tenants', { name: 'n'.repeat(201), ownerEmail: 'h@example.test', ownerPassword: 'password-123' }],
    ] as const) {
      expect(expectError(await send({ method: 'POST', url, payload }), 400, 'invalid_request').message).toContain('name');
    }
  });

  it(`a body larger than WAYGATE_BODY_LIMIT_BYTES (${BODY_LIMIT}) is 413`, async () => {
    const big = JSON.stringify({ name: 'x'.repeat(BODY_LIMIT + 100) });
    const error = expectError(await send({ method: 'POST', url: '/api/projects', headers: json, payload: big }), 413, 'body_too_large');
    expect(error.message).toContain(String(BODY_LIMIT));
    expectError(await send({ method: 'POST', url: '/api/auth/login', headers: json, payload: JSON.stringify({ email: ADMIN_EMAIL, password: 'p'.repeat(2000) }) }, null), 413);
  });

  it('a text/plain body is 415', async () => {
    const error = expectError(await send({ method: 'POST', url: '/api/projects', headers: { 'content-type': 'text/plain' }, payload: 'name=x' }), 415, 'unsupported_media_type');
    expect(error.message).toContain('text/plain');
    expectError(await send({ method: 'POST', url: '/api/auth/login', headers: { 'content-type': 'text/plain' }, payload: 'hello' }, null), 415);
    expectError(await send({ method: 'POST', url: '/api/projects', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'name=x' }), 415);
  });

  // Regression: `curl -X POST -d ''` (form-urlencoded, no bytes) got a 415 on routes that take no body.
  it('a bodiless request of any Content-Type is a request without a body', async () => {
    // Logging out ends every session of the user: not the admin's, which the other tests use.
    const user = await createUserSession(t, 'viewer');
    const logout = await send({ method: 'POST', url: '/api/auth/logout', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: '' }, user.session);
    expect(logout.statusCode, logout.body).not.toBe(415);
    expect(logout.statusCode).toBeLessThan(300);
    const empty = await send({ method: 'POST', url: '/api/projects', headers: { 'content-type': 'text/plain' }, payload: '' });
    // A route that needs a body says what is missing, not which media type it takes.
    expectError(empty, 400);
    // An unknown route is a 404 whatever its body.
    expectError(await send({ method: 'POST', url: '/api/no-such-route', headers: { 'content-type': 'text/plain' }, payload: 'hello' }), 404);
  });

  it('application/json and application/*+json, with or without a charset parameter, are accepted', async () => {
    for (const type of ['application/json; charset=utf-8', 'application/vnd.api+json', 'application/vnd.api+json; charset=utf-8', 'Application/Problem+JSON;charset=UTF-8']) {
      const res = await send({ method: 'POST', url: '/api/projects', headers: { 'content-type': type }, payload: JSON.stringify({ name: `Charset ${randomBase32(4)}` }) });
      expect(res.statusCode, `${type}: ${res.body}`).toBe(201);
    }
    expectError(await send({ method: 'POST', url: '/api/projects', headers: { 'content-type': 'application/vnd.api+jsonx' }, payload: '{}' }), 415);
  });

  it('an unknown route is 404 {error}, with or without credentials, for any method', async () => {
    for (const [method, url] of [
      ['GET', '/api/nothing-here'],
      ['POST', '/api/client/v1/nothing-here'],
      ['DELETE', '/api/projects'],
      ['GET', '/'],
      ['HEAD', '/api/nothing-here'],
    ] as const) {
      const res = await send({ method, url }, null);
      expect(res.statusCode).toBe(404);
      if (method !== 'HEAD') expect(expectError(res, 404, 'route_not_found').message).toContain(url);
    }
    expectError(await send({ method: 'GET', url: '/api/nothing-here' }), 404, 'route_not_found');
  });

  it('an over-long path parameter or a badly encoded URL is a 4xx in the {error} envelope', async () => {
    const long = await send({ method: 'DELETE', url: `/api/tokens/${'t'.repeat(101)}` });
    expect([400, 414]).toContain(long.statusCode);
    expectError(long, long.statusCode);
    const badEncoding = await send({ method: 'DELETE', url: '/api/tokens/%zz' });
    expect([400, 404]).toContain(badEncoding.statusCode);
    expectError(badEncoding, badEncoding.statusCode);
    expectError(await send({ method: 'DELETE', url: `/api/tokens/tok_${'t'.repeat(20)}` }), 404, 'not_found');
  });

  it('every kind of response carries X-Request-Id, and a given X-Request-Id is echoed', async () => {
    const cases: [() => InjectOptions, string | null, number][] = [
      [() => ({ method: 'GET', url: '/api/projects' }), t.adminSession, 200],
      [() => ({ method: 'POST', url: '/api/projects', payload: { name: `Echo ${randomBase32(6)}` } }), t.adminSession, 201],
      [() => ({ method: 'GET', url: '/api/projects' }), null, 401],
      [() => ({ method: 'GET', url: '/api/client/v1/audit/logs' }), null, 401],
      [() => ({ method: 'POST', url: '/api/tenants', payload: { name: 'x', ownerEmail: 'i@example.test', ownerPassword: 'password-123' } }), t.ownerToken, 401],
      [() => ({ method: 'POST', url: '/api/projects', headers: json, payload: '{' }), t.adminSession, 400],
      [() => ({ method: 'POST', url: '/api/projects', payload: { name: 7 } }), t.adminSession, 400],
      [() => ({ method: 'POST', url: '/api/projects', headers: { 'content-type': 'text/plain' }, payload: 'x' }), t.adminSession, 415],
      [() => ({ method: 'POST', url: '/api/projects', headers: json, payload: JSON.stringify({ name: 'y'.repeat(2000) }) }), t.adminSession, 413],
      [() => ({ method: 'GET', url: '/api/projects', headers: { 'x-waygate-project': 'prj_missing' } }), t.adminSession, 404],
      [() => ({ method: 'GET', url: '/api/nope' }), null, 404],
      [() => ({ method: 'POST', url: '/api/auth/login', payload: { email: ADMIN_EMAIL, password: 'wrong-password' } }), null, 401],
      [() => ({ method: 'GET', url: '/api/health/live' }), null, 200],
    ];
    for (const [options, session, status] of cases) {
      const generated = await send(options(), session);
      expect(generated.statusCode, generated.body).toBe(status);
      expect(generated.headers['x-request-id']).toBeTruthy();
      const id = `req-${randomBase32(10)}`;
      const request = options();
      const echoed = await send({ ...request, headers: { ...(request.headers ?? {}), 'x-request-id': id } }, session);
      expect(echoed.statusCode).toBe(status);
      expect(echoed.headers['x-request-id']).toBe(id);
    }
  });

  it('an insane X-Request-Id is replaced by a generated one', async () => {
    for (const bad of ['has spaces in it', 'x'.repeat(200), '<script>']) {
      const res = await send({ method: 'GET', url: '/api/projects', headers: { 'x-request-id': bad } });
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-request-id']).not.toBe(bad);
    }
  });

  it('a body request_id is echoed (and recorded) when no header is given; the header wins otherwise', async () => {
    const bodyId = `body-${randomBase32(10)}`;
    const res = await send({ method: 'POST', url: '/api/projects', payload: { name: `Body id ${randomBase32(4)}`, request_id: bodyId } });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.headers['x-request-id']).toBe(bodyId);
    const both = await send({ method: 'POST', url: '/api/projects', headers: { 'x-request-id': 'header-id-1' }, payload: { name: `Both ${randomBase32(4)}`, request_id: 'body-id-1' } });
    expect(both.statusCode).toBe(201);
    expect(both.headers['x-request-id']).toBe('header-id-1');
    const failing = await send({ method: 'POST', url: '/api/users', payload: { email: 'bad', password: 'password-123', role: 'viewer', request_id: `${bodyId}-2` } });
    expect(failing.statusCode).toBe(400);
    expect(failing.headers['x-request-id']).toBe(`${bodyId}-2`);
    await flushAudit(t);
    const audit = await send({ method: 'GET', url: '/api/client/v1/audit/logs?action=projects.create&limit=1000' }, t.ownerToken);
    expect(audit.json().data.map((e: { requestId: string }) => e.requestId)).toContain(bodyId);
  });

  // Regression: strict query schemas refused request_id (400), though any request may carry one (interface 1.4).
  it('a query string request_id is the request id when no header or body gave one, and no route refuses it', async () => {
    const queryId = `query-${randomBase32(10)}`;
    for (const url of [`/api/projects?request_id=${queryId}`, `/api/client/v1/analytics/usage?request_id=${queryId}`]) {
      const res = await send({ method: 'GET', url }, url.includes('/client/') ? t.ownerToken : undefined);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['x-request-id']).toBe(queryId);
    }
    const header = await send({ method: 'GET', url: `/api/projects?request_id=${queryId}`, headers: { 'x-request-id': 'header-id-2' } });
    expect(header.headers['x-request-id']).toBe('header-id-2');
  });

  it('POST /api/auth/logout with Content-Type: application/json and an empty body is 200', async () => {
    const res = await send({ method: 'POST', url: '/api/auth/logout', headers: json, payload: '' }, null);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ success: true });
    const withSession = await send({ method: 'POST', url: '/api/auth/logout', headers: json }, t.adminSession);
    expect(withSession.statusCode).toBe(200);
  });

  it('HEAD on a guarded GET route is authenticated like the GET', async () => {
    expect((await send({ method: 'HEAD', url: '/api/client/v1/token' }, null)).statusCode).toBe(401);
    expect((await send({ method: 'HEAD', url: '/api/client/v1/token' }, t.ownerToken)).statusCode).toBe(200);
  });
});
