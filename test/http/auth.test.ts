import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, BACKENDS, call, createTestApp, createUserSession, type TestApp } from '../helpers/app.js';

const MAX_ATTEMPTS = 3;

function login(t: TestApp, payload: unknown, headers: Record<string, string> = {}) {
  return t.app.inject({ method: 'POST', url: '/api/auth/login', payload: payload as Record<string, unknown>, headers });
}

function setCookieHeaders(res: { headers: Record<string, unknown> }): string[] {
  const raw = res.headers['set-cookie'];
  return Array.isArray(raw) ? (raw as string[]) : typeof raw === 'string' ? [raw] : [];
}

describe.each(BACKENDS)('login, logout and /api/auth/me on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend, env: { WAYGATE_LOGIN_MAX_ATTEMPTS: String(MAX_ATTEMPTS), WAYGATE_LOGIN_WINDOW_SECONDS: '600' } });
  });
  afterAll(async () => t.close());

  it('login returns {token, expiresAt, user} and sets an HttpOnly SameSite=Strict cookie', async () => {
    const res = await login(t, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(typeof body.token).toBe('string');
    expect(body.token.split('.')).toHaveLength(3);
    expect(Date.parse(body.expiresAt)).toBeGreaterThan(Date.now());
    expect(body.user).toMatchObject({ email: ADMIN_EMAIL, role: 'owner', isInstanceAdmin: true });
    expect(body.user.passwordHash).toBeUndefined();
    expect(res.body).not.toContain(ADMIN_PASSWORD);
    const cookie = setCookieHeaders(res).find((c) => c.startsWith('waygate_session='));
    expect(cookie).toBeDefined();
    expect(cookie).toContain(`waygate_session=${body.token}`);
    expect(cookie).toMatch(/;\s*HttpOnly/i);
    expect(cookie).toMatch(/;\s*SameSite=Strict/i);
    // The token it returned is a working session.
    const me = await call(t.app, body.token, { method: 'GET', url: '/api/auth/me' });
    expect(me.statusCode).toBe(200);
    expect(me.json().user.email).toBe(ADMIN_EMAIL);
  });

  it('login accepts the email in another case', async () => {
    const res = await login(t, { email: ADMIN_EMAIL.toUpperCase(), password: ADMIN_PASSWORD });
    expect(res.statusCode).toBe(200);
  });

  it('wrong password and unknown email are both 401 with the same body', async () => {
    const wrong = await login(t, { email: ADMIN_EMAIL, password: 'not-the-password' });
    const unknown = await login(t, { email: `nobody-${randomBase32(6)}@example.test`, password: 'not-the-password' });
    expect(wrong.statusCode).toBe(401);
    expect(unknown.statusCode).toBe(401);
    expect(wrong.json()).toEqual(unknown.json());
    expect(wrong.json().error).toMatchObject({ type: 'authentication_error', code: 'invalid_credentials' });
    expect(setCookieHeaders(wrong).some((c) => c.startsWith('waygate_session='))).toBe(false);
    // Clear the admin's failure counter for later tests.
    expect((await login(t, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD })).statusCode).toBe(200);
  });

  it.each([
    ['missing password', { email: ADMIN_EMAIL }, 'password'],
    ['missing email', { password: ADMIN_PASSWORD }, 'email'],
    ['email of the wrong type', { email: 42, password: ADMIN_PASSWORD }, 'email'],
    ['password of the wrong type', { email: ADMIN_EMAIL, password: ['x'] }, 'password'],
    ['an email that is not an email', { email: 'not-an-email', password: ADMIN_PASSWORD }, 'email'],
    ['an unknown field', { email: ADMIN_EMAIL, password: ADMIN_PASSWORD, remember: true }, 'remember'],
    ['an empty password', { email: ADMIN_EMAIL, password: '' }, 'password'],
  ])('login with %s -> 400 naming the field', async (_name, payload, field) => {
    const res = await login(t, payload);
    expect(res.statusCode).toBe(400);
    expect(res.json().error.type).toBe('invalid_request_error');
    expect(res.json().error.message).toContain(field);
  });

  it(`after ${MAX_ATTEMPTS} failures the next attempt is 429 with Retry-After, even with the right password`, async () => {
    const user = await createUserSession(t, 'member');
    for (let i = 0; i < MAX_ATTEMPTS; i++) {
      const res = await login(t, { email: user.email, password: `wrong-${i}` });
      expect(res.statusCode, `attempt ${i + 1}`).toBe(401);
    }
    const blocked = await login(t, { email: user.email, password: 'user-password-123' });
    expect(blocked.statusCode).toBe(429);
    expect(blocked.json().error).toMatchObject({ type: 'rate_limit_error' });
    const retryAfter = Number(blocked.headers['retry-after']);
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(600);
    expect(setCookieHeaders(blocked).some((c) => c.startsWith('waygate_session='))).toBe(false);
    const stillBlocked = await login(t, { email: user.email, password: 'wrong-again' });
    expect(stillBlocked.statusCode).toBe(429);
    expect(stillBlocked.headers['retry-after']).toBeDefined();
    // Another account from the same address is not affected.
    expect((await login(t, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD })).statusCode).toBe(200);
  });

  it('an unknown email is limited the same way', async () => {
    const email = `ghost-${randomBase32(6)}@example.test`;
    for (let i = 0; i < MAX_ATTEMPTS; i++) expect((await login(t, { email, password: 'whatever-pw' })).statusCode).toBe(401);
    expect((await login(t, { email, password: 'whatever-pw' })).statusCode).toBe(429);
  });

  describe('with a moved clock', () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it('Retry-After counts down with the window rather than restating its full length', async () => {
      const user = await createUserSession(t, 'viewer');
      vi.useFakeTimers({ toFake: ['Date'] });
      for (let i = 0; i < MAX_ATTEMPTS; i++) expect((await login(t, { email: user.email, password: 'wrong-pw' })).statusCode).toBe(401);
      vi.setSystemTime(Date.now() + 300_000);
      const blocked = await login(t, { email: user.email, password: 'user-password-123' });
      expect(blocked.statusCode).toBe(429);
      expect(Number(blocked.headers['retry-after'])).toBeLessThanOrEqual(300);
      expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
      // Once the window has passed, the right password works again.
      vi.setSystemTime(Date.now() + 301_000);
      expect((await login(t, { email: user.email, password: 'user-password-123' })).statusCode).toBe(200);
    });
  });

  it('a successful login resets the failure count', async () => {
    const user = await createUserSession(t, 'viewer');
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < MAX_ATTEMPTS - 1; i++) expect((await login(t, { email: user.email, password: 'wrong-pw' })).statusCode).toBe(401);
      expect((await login(t, { email: user.email, password: 'user-password-123' })).statusCode).toBe(200);
    }
  });

  it('logout clears the cookie, ends every session of the user, and answers 200 without a session', async () => {
    const user = await createUserSession(t, 'viewer');
    const other = (await login(t, { email: user.email, password: 'user-password-123' })).json().token as string;
    const res = await t.app.inject({ method: 'POST', url: '/api/auth/logout', cookies: { waygate_session: user.session } });
    expect(res.statusCode).toBe(200);
    for (const session of [user.session, other]) {
      expect((await call(t.app, session, { method: 'GET', url: '/api/auth/me' })).statusCode).toBe(401);
    }
    const again = (await login(t, { email: user.email, password: 'user-password-123' })).json().token as string;
    expect((await call(t.app, again, { method: 'GET', url: '/api/auth/me' })).statusCode).toBe(200);
    expect((await call(t.app, t.adminSession, { method: 'GET', url: '/api/auth/me' })).statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true });
    const cookie = setCookieHeaders(res).find((c) => c.startsWith('waygate_session='));
    expect(cookie).toBeDefined();
    expect(cookie).toMatch(/^waygate_session=;/);
    expect(cookie).toMatch(/Expires=Thu, 01 Jan 1970|Max-Age=0/i);
    expect(cookie).toMatch(/Path=\/api/);
    const bare = await t.app.inject({ method: 'POST', url: '/api/auth/logout' });
    expect(bare.statusCode).toBe(200);
  });

  it('/api/auth/me returns the user, tenant and default project', async () => {
    const res = await call(t.app, t.adminSession, { method: 'GET', url: '/api/auth/me' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.user).toMatchObject({ email: ADMIN_EMAIL, role: 'owner', isInstanceAdmin: true });
    expect(body.tenantId).toBe(t.ctx.bootstrap.tenantId);
    expect(body.projectId).toBe(t.ctx.bootstrap.projectId);
  });

  it('X-Waygate-Project switches the project by id or key', async () => {
    const created = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: 'Switch target', key: `switch-${randomBase32(5)}` } });
    expect(created.statusCode).toBe(201);
    const project = created.json().project;
    for (const ref of [project.id, project.key]) {
      const res = await call(t.app, t.adminSession, { method: 'GET', url: '/api/auth/me', headers: { 'x-waygate-project': ref } });
      expect(res.statusCode).toBe(200);
      expect(res.json().projectId).toBe(project.id);
    }
    const back = await call(t.app, t.adminSession, { method: 'GET', url: '/api/auth/me', headers: { 'x-waygate-project': 'default' } });
    expect(back.json().projectId).toBe(t.ctx.bootstrap.projectId);
  });

  it('an unknown or foreign project in X-Waygate-Project is 404', async () => {
    const unknown = await call(t.app, t.adminSession, { method: 'GET', url: '/api/auth/me', headers: { 'x-waygate-project': 'prj_doesnotexist' } });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error.type).toBe('not_found_error');

    const email = `foreign-owner-${randomBase32(6)}@example.test`;
    const tenant = await call(t.app, t.adminSession, { method: 'POST', url: '/api/tenants', payload: { name: 'Foreign', ownerEmail: email, ownerPassword: 'foreign-owner-pw' } });
    expect(tenant.statusCode).toBe(201);
    const foreignProjectId = tenant.json().project.id;
    const foreign = await call(t.app, t.adminSession, { method: 'GET', url: '/api/auth/me', headers: { 'x-waygate-project': foreignProjectId } });
    expect(foreign.statusCode).toBe(404);
    expect(foreign.json().error).toMatchObject({ type: unknown.json().error.type, code: unknown.json().error.code });
    // And the other way round: tenant B's owner cannot select tenant A's project.
    const b = (await login(t, { email, password: 'foreign-owner-pw' })).json().token;
    const reverse = await call(t.app, b, { method: 'GET', url: '/api/auth/me', headers: { 'x-waygate-project': t.ctx.bootstrap.projectId } });
    expect(reverse.statusCode).toBe(404);
    const own = await call(t.app, b, { method: 'GET', url: '/api/auth/me' });
    expect(own.json().projectId).toBe(foreignProjectId);
  });
});
