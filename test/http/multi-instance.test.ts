import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, BACKENDS, call } from '../helpers/app.js';
import { twoInstances, type TwoInstances } from '../helpers/instances.js';
import { redisReachable, TEST_REDIS_URL } from '../helpers/redis.js';

const hasRedis = await redisReachable();
if (!hasRedis) console.warn(`skipping multi-instance tests: no Redis at ${TEST_REDIS_URL}`);

/** Two instances on one database and one Redis key prefix, as in a scaled-out deployment. */
describe.skipIf(!hasRedis).each(BACKENDS)('two instances sharing %s and Redis', (backend) => {
  let a: FastifyInstance;
  let b: FastifyInstance;
  let instances: TwoInstances;

  beforeAll(async () => {
    instances = await twoInstances(backend, { WAYGATE_LOGIN_MAX_ATTEMPTS: '3' });
    ({ a, b } = instances);
  });

  afterAll(async () => {
    await instances?.close();
  });

  async function login(app: FastifyInstance, password = ADMIN_PASSWORD) {
    return app.inject({ method: 'POST', url: '/api/auth/login', payload: { email: ADMIN_EMAIL, password } });
  }

  it('a token revoked on one instance stops working on the other at once, although it was cached there', async () => {
    const session = (await login(a)).json().token as string;
    const created = await call(a, session, { method: 'POST', url: '/api/tokens', payload: { name: 'shared', projectId: 'default', role: 'member' } });
    const { value } = created.json();
    const id = created.json().token.id;
    expect((await call(b, value, { method: 'GET', url: '/api/client/v1/token' })).statusCode).toBe(200); // now cached on b

    expect((await call(a, session, { method: 'DELETE', url: `/api/tokens/${id}` })).statusCode).toBe(200);
    let status = 0;
    for (let attempt = 0; attempt < 40; attempt++) {
      status = (await call(b, value, { method: 'GET', url: '/api/client/v1/token' })).statusCode;
      if (status === 401) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(status).toBe(401);
  });

  it('a chosen token value that one instance saw as unknown works there as soon as another instance creates it', async () => {
    const value = `wgt_${randomBase32(43)}`;
    expect((await call(b, value, { method: 'GET', url: '/api/client/v1/token' })).statusCode).toBe(401); // remembered as unknown on b
    const ctxA = instances.contexts[0];
    await ctxA.services.tokens.ensure(ctxA.bootstrap.tenantId, { name: 'chosen', projectId: ctxA.bootstrap.projectId, role: 'viewer' }, value);
    let status = 0;
    for (let attempt = 0; attempt < 40 && status !== 200; attempt++) {
      status = (await call(b, value, { method: 'GET', url: '/api/client/v1/token' })).statusCode;
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(status).toBe(200);
  });

  it('a session from one instance is accepted by the other', async () => {
    const session = (await login(a)).json().token as string;
    const me = await call(b, session, { method: 'GET', url: '/api/auth/me' });
    expect(me.statusCode).toBe(200);
    expect(me.json().user.email).toBe(ADMIN_EMAIL);
  });

  it('failed logins count across instances', async () => {
    for (let i = 0; i < 3; i++) expect((await login(i % 2 === 0 ? a : b, 'wrong-password')).statusCode).toBe(401);
    const blocked = await login(b);
    expect(blocked.statusCode).toBe(429);
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
  });
});
