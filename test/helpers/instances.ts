import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../src/app.js';
import type { Context } from '../../src/context.js';
import { createContext } from '../../src/context.js';
import { RedisCache } from '../../src/platform/cache.js';
import { randomBase32 } from '../../src/platform/ids.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, call, deploymentConfig, tempDeployment, type Backend } from './app.js';
import { TEST_REDIS_URL } from './redis.js';

export interface TwoInstances {
  a: FastifyInstance;
  b: FastifyInstance;
  contexts: [Context, Context];
  /** Closes both apps, removes the Redis keys and the deployment. */
  close(): Promise<void>;
}

/** Two instances on one fresh database and one Redis key prefix, as behind a load balancer; `env` adds settings. */
export async function twoInstances(backend: Backend, env: Record<string, string> = {}): Promise<TwoInstances> {
  const deployment = await tempDeployment(backend);
  const prefix = `waygate-test:${randomBase32(10)}:`;
  const config = deploymentConfig(deployment, { REDIS_URL: TEST_REDIS_URL, ...env });
  const logger = pino({ level: 'silent' });
  const contexts: [Context, Context] = [await createContext(config, { logger, cachePrefix: prefix }), await createContext(config, { logger, cachePrefix: prefix })];
  const [a, b] = [await buildApp(contexts[0]), await buildApp(contexts[1])];
  return {
    a,
    b,
    contexts,
    async close() {
      await a.close();
      await b.close();
      const cache = new RedisCache(TEST_REDIS_URL, prefix);
      await cache.clearPrefix();
      await cache.close();
      await deployment.remove();
    },
  };
}

export type SignedInInstances = TwoInstances & { session: string; token: string };

/** Two instances, the admin's session (logged in on the first) and a member token of project default. */
export async function twoInstancesSignedIn(backend: Backend): Promise<SignedInInstances> {
  const instances = await twoInstances(backend);
  const login = await instances.a.inject({ method: 'POST', url: '/api/auth/login', payload: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
  if (login.statusCode !== 200) throw new Error(`login failed: ${login.body}`);
  const session = login.json().token as string;
  const created = await call(instances.a, session, { method: 'POST', url: '/api/tokens', payload: { name: 'shared', projectId: 'default', role: 'member' } });
  if (created.statusCode !== 201) throw new Error(created.body);
  return { ...instances, session, token: created.json().value as string };
}
