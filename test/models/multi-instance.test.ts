import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { BACKENDS, call } from '../helpers/app.js';
import { twoInstancesSignedIn, type SignedInInstances } from '../helpers/instances.js';
import { chatBody } from '../helpers/models.js';
import { redisReachable, TEST_REDIS_URL } from '../helpers/redis.js';

const hasRedis = await redisReachable();
if (!hasRedis) console.warn(`skipping model cache tests: no Redis at ${TEST_REDIS_URL}`);

/**
 * Each instance caches a project's models for 30 s; a change on one instance clears the copy on every other one
 * through the Redis bus. The checks below poll for a few seconds at most, far less than the cache lifetime, so a
 * missing notice fails them; the control test shows that a change which bypasses the service is not seen.
 */
const POLL_ATTEMPTS = 100;
const POLL_PAUSE_MS = 50;

async function eventually(request: () => Promise<LightMyRequestResponse>, done: (res: LightMyRequestResponse) => boolean): Promise<LightMyRequestResponse> {
  let res = await request();
  for (let attempt = 0; attempt < POLL_ATTEMPTS && !done(res); attempt++) {
    await new Promise((resolve) => setTimeout(resolve, POLL_PAUSE_MS));
    res = await request();
  }
  return res;
}

const replyOf = (res: LightMyRequestResponse) => (res.statusCode === 200 ? (res.json().choices[0].message.content as string) : `status ${res.statusCode}`);

describe.skipIf(!hasRedis).each(BACKENDS)('model changes across two instances sharing %s and Redis', (backend) => {
  let a: FastifyInstance;
  let b: FastifyInstance;
  let instances: SignedInInstances;
  let session: string;
  let token: string;

  beforeAll(async () => {
    instances = await twoInstancesSignedIn(backend);
    ({ a, b, session, token } = instances);
  });

  afterAll(async () => {
    await instances?.close();
  });

  const chatOnB = (key: string) => () => call(b, token, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody(key) });
  const clientListOnB = () => call(b, token, { method: 'GET', url: '/api/client/v1/models' });
  const idsOf = (res: LightMyRequestResponse) => (res.json().data as { id: string }[]).map((m) => m.id);

  it('a model created, patched and deleted on instance 1 is seen at once on instance 2, which had cached the project', async () => {
    const key = `m-${randomBase32(8).toLowerCase()}`;
    // Instance 2 loads and caches the project's models, and has no such model.
    expect(idsOf(await clientListOnB())).not.toContain(key);
    expect((await chatOnB(key)()).statusCode).toBe(404);

    const created = await call(a, session, { method: 'POST', url: '/api/models', payload: { key, provider: { type: 'mock', mock: { reply: 'first' } }, capabilities: ['chat'] } });
    expect(created.statusCode, created.body).toBe(201);
    expect(replyOf(await eventually(chatOnB(key), (res) => res.statusCode === 200))).toBe('first');
    expect(idsOf(await clientListOnB())).toContain(key);

    const patched = await call(a, session, { method: 'PATCH', url: `/api/models/${key}`, payload: { provider: { mock: { reply: 'second' } } } });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(replyOf(await eventually(chatOnB(key), (res) => replyOf(res) === 'second'))).toBe('second');

    const deleted = await call(a, session, { method: 'DELETE', url: `/api/models/${key}` });
    expect(deleted.statusCode).toBe(200);
    expect((await eventually(chatOnB(key), (res) => res.statusCode === 404)).statusCode).toBe(404);
    expect(idsOf(await clientListOnB())).not.toContain(key);
  });

  it('control: instance 2 serves its cached copy, so only the change notice explains the tests above', async () => {
    const key = `m-${randomBase32(8).toLowerCase()}`;
    const created = await call(a, session, { method: 'POST', url: '/api/models', payload: { key, provider: { type: 'mock', mock: { reply: 'cached' } }, capabilities: ['chat'] } });
    expect(created.statusCode).toBe(201);
    expect(replyOf(await eventually(chatOnB(key), (res) => res.statusCode === 200))).toBe('cached');

    // Removed behind the services' back: no notice, so instance 2 still has it.
    await instances.contexts[0].database.db.deleteFrom('models').where('key', '=', key).execute();
    expect(replyOf(await chatOnB(key)())).toBe('cached');

    // Any change through the API clears the project's copy everywhere; the removal then shows.
    const other = await call(a, session, { method: 'POST', url: '/api/models', payload: { key: `${key}-2`, provider: { type: 'mock' }, capabilities: ['chat'] } });
    expect(other.statusCode).toBe(201);
    expect((await eventually(chatOnB(key), (res) => res.statusCode === 404)).statusCode).toBe(404);
  });

  it('a change on instance 2 reaches instance 1 the same way', async () => {
    const key = `m-${randomBase32(8).toLowerCase()}`;
    const chatOnA = () => call(a, token, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody(key) });
    expect((await chatOnA()).statusCode).toBe(404);
    const created = await call(b, session, { method: 'POST', url: '/api/models', payload: { key, provider: { type: 'mock', mock: { reply: 'from b' } }, capabilities: ['chat'] } });
    expect(created.statusCode).toBe(201);
    expect(replyOf(await eventually(chatOnA, (res) => res.statusCode === 200))).toBe('from b');
  });
});
