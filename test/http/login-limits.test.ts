import { afterEach, describe, expect, it } from 'vitest';
import { ADMIN_EMAIL, ADMIN_PASSWORD, createTestApp, type TestApp } from '../helpers/app.js';

let t: TestApp | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

function login(app: TestApp['app'], email: string, password: string) {
  return app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password } });
}

describe('login limits', () => {
  it('parallel guesses are counted before any password is checked: at most the limit get an answer', async () => {
    t = await createTestApp({ env: { WAYGATE_LOGIN_MAX_ATTEMPTS: '3' } });
    const app = t.app;
    const guesses = Array.from({ length: 40 }, (_, i) => login(app, ADMIN_EMAIL, `guess-${i}`));
    const statuses = (await Promise.all(guesses)).map((r) => r.statusCode);
    // One attempt of the limit was spent by the test helper's own successful login, which reset the count.
    expect(statuses.filter((s) => s === 401)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(37);
    expect((await login(app, ADMIN_EMAIL, ADMIN_PASSWORD)).statusCode).toBe(429);
  });

  it('the right password sent among parallel guesses past the limit is refused too', async () => {
    t = await createTestApp({ env: { WAYGATE_LOGIN_MAX_ATTEMPTS: '2' } });
    const app = t.app;
    const wrong = Array.from({ length: 10 }, (_, i) => login(app, ADMIN_EMAIL, `guess-${i}`));
    await Promise.all(wrong);
    expect((await login(app, ADMIN_EMAIL, ADMIN_PASSWORD)).statusCode).toBe(429);
  });

  it('one client address trying many accounts is stopped by the per-address limit', async () => {
    t = await createTestApp({ env: { WAYGATE_LOGIN_MAX_ATTEMPTS_PER_ADDRESS: '5' } });
    const app = t.app;
    for (let i = 0; i < 5; i++) expect((await login(app, `user${i}@example.test`, 'spray-password')).statusCode).toBe(401);
    const blocked = await login(app, 'someone-else@example.test', 'spray-password');
    expect(blocked.statusCode).toBe(429);
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
    expect((await login(app, ADMIN_EMAIL, ADMIN_PASSWORD)).statusCode).toBe(429);
  });

  it('successful logins do not use up the per-address budget (many people behind one address)', async () => {
    t = await createTestApp({ env: { WAYGATE_LOGIN_MAX_ATTEMPTS_PER_ADDRESS: '3' } });
    for (let i = 0; i < 10; i++) expect((await login(t.app, ADMIN_EMAIL, ADMIN_PASSWORD)).statusCode).toBe(200);
  });
});
