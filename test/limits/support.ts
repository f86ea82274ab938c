import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import { buildApp } from '../../src/app.js';
import { createContext, type Context } from '../../src/context.js';
import { RedisCache } from '../../src/platform/cache.js';
import { randomBase32 } from '../../src/platform/ids.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, BACKENDS, call, createToken, deploymentConfig, tempDeployment, type Backend } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { chatBody, registerModel } from '../helpers/models.js';
import { redisReachable, TEST_REDIS_URL } from '../helpers/redis.js';

/** Shared by the limits tests: deployments of one or two instances, and the calls the tests make. */

export const hasRedis = await redisReachable();

export type CounterStore = 'memory' | 'redis';

/** Database backends x counter stores; Redis ones only when Redis answers. */
export const SETUPS: { backend: Backend; counters: CounterStore }[] = BACKENDS.flatMap((backend) => [
  { backend, counters: 'memory' as const },
  ...(hasRedis ? [{ backend, counters: 'redis' as const }] : []),
]);
if (!hasRedis) console.warn(`limits tests run with in-process counters only: no Redis at ${TEST_REDIS_URL}`);

export interface Instance {
  app: FastifyInstance;
  ctx: Context;
}

/** A database (and data directory) that outlives the instances started on it. */
export interface Deployment {
  backend: Backend;
  instances: Instance[];
  /** Session of the instance admin, valid on every instance. */
  session: string;
  /** Starts one more instance on this deployment: Redis counters under `redisPrefix`, or in-process ones. */
  start(redisPrefix?: string): Promise<Instance>;
  /** Closes every running instance (writing their buffered usage), keeping the database for a restart. */
  stop(): Promise<void>;
  close(): Promise<void>;
}

/** Redis keys a test used: removed when the deployment closes. */
export function newRedisPrefix(): string {
  return `waygate-test:limits:${randomBase32(10)}:`;
}

export async function openDeployment(backend: Backend): Promise<Deployment> {
  const deployment = await tempDeployment(backend);
  const prefixes = new Set<string>();
  const instances: Instance[] = [];
  const logger = pino({ level: 'silent' });
  const result: Deployment = {
    backend,
    instances,
    session: '',
    async start(redisPrefix) {
      const config = deploymentConfig(deployment, redisPrefix ? { REDIS_URL: TEST_REDIS_URL } : {});
      if (redisPrefix) prefixes.add(redisPrefix);
      const ctx = await createContext(config, { logger, cachePrefix: redisPrefix ?? newRedisPrefix() });
      const app = await buildApp(ctx);
      ctx.health.markServing();
      const instance = { app, ctx };
      instances.push(instance);
      if (!result.session) {
        const login = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
        if (login.statusCode !== 200) throw new Error(`login failed: ${login.body}`);
        result.session = login.json().token;
      }
      return instance;
    },
    async stop() {
      // Closing an app closes its context, which writes the buffered usage.
      for (const instance of instances.splice(0)) await instance.app.close();
    },
    async close() {
      await result.stop();
      for (const prefix of prefixes) {
        const cache = new RedisCache(TEST_REDIS_URL, prefix);
        await cache.clearPrefix();
        await cache.close();
      }
      await deployment.remove();
    },
  };
  return result;
}

/** One instance, or `count` instances sharing one Redis prefix (counters: 'redis' is implied for several). */
export async function startDeployment(backend: Backend, counters: CounterStore, count = 1): Promise<Deployment> {
  const deployment = await openDeployment(backend);
  const prefix = counters === 'redis' || count > 1 ? newRedisPrefix() : undefined;
  try {
    for (let i = 0; i < count; i++) await deployment.start(prefix);
  } catch (err) {
    await deployment.close();
    throw err;
  }
  return deployment;
}

export function first(d: Deployment): Instance {
  return d.instances[0]!;
}

/** Registers a model served by the fake upstream (in a project named by key, default `default`). */
export async function fakeModel(d: Deployment, fake: FakeUpstream, extra: Record<string, unknown> = {}, project?: string): Promise<string> {
  return registerModel(
    { app: first(d).app, adminSession: d.session },
    { provider: { type: 'openai-compatible', baseUrl: fake.baseUrl }, upstreamModel: 'fake-model', ...extra },
    project ? { project } : {},
  );
}

export function token(d: Deployment, body: Record<string, unknown>): Promise<{ id: string; value: string }> {
  return createToken({ app: first(d).app, adminSession: d.session }, body);
}

/** A new project with its own budget or rate limit (set through PATCH, like an operator would). */
export async function limitedProject(d: Deployment, limits: Record<string, unknown>): Promise<{ id: string; key: string }> {
  const key = `p-${randomBase32(8).toLowerCase()}`;
  const created = await call(first(d).app, d.session, { method: 'POST', url: '/api/projects', payload: { name: key, key } });
  expect(created.statusCode).toBe(201);
  const patched = await call(first(d).app, d.session, { method: 'PATCH', url: `/api/projects/${key}`, payload: limits });
  expect(patched.statusCode).toBe(200);
  return { id: created.json().project.id, key };
}

/**
 * A chat call. chatBody's single message "Say hello" is estimated at exactly 10 input tokens (3 for the reply,
 * 4 for the message, 3 for the text), the fake's default prompt count: reservations then match real usage.
 */
export function chat(app: FastifyInstance, credential: string, model: string, extra: Record<string, unknown> = { max_tokens: 20 }): Promise<LightMyRequestResponse> {
  return call(app, credential, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody(model, extra) });
}

export function embed(app: FastifyInstance, credential: string, model: string, input: unknown): Promise<LightMyRequestResponse> {
  return call(app, credential, { method: 'POST', url: '/api/client/v1/embeddings', payload: { model, input } });
}

/** A 429 of the given code, with or without Retry-After in a range of seconds. */
export function expectRefused(res: LightMyRequestResponse, code: 'rate_limit_exceeded' | 'budget_exceeded' | 'budget_in_use', retryAfter: [number, number] | null): void {
  expect(res.statusCode, res.body).toBe(429);
  expect(res.json().error).toMatchObject({ type: 'rate_limit_error', code });
  // The OpenAI SDKs wait out any Retry-After before they answer: a used-up budget tells them not to retry.
  expect(res.headers['x-should-retry']).toBe(code === 'budget_exceeded' ? 'false' : undefined);
  const header = res.headers['retry-after'];
  if (retryAfter === null) {
    expect(header).toBeUndefined();
  } else {
    expect(header).toMatch(/^\d+$/);
    expect(Number(header)).toBeGreaterThanOrEqual(retryAfter[0]);
    expect(Number(header)).toBeLessThanOrEqual(retryAfter[1]);
  }
}

/** Stored usage events (after writing what every instance buffered), filtered by token or project. */
export async function storedUsage(d: Deployment, where: { tokenId?: string; projectId?: string }): Promise<{ events: number; tokens: number }> {
  for (const instance of d.instances) await instance.ctx.services.usage.flush();
  let query = first(d).ctx.database.db.selectFrom('usage_events').select(['total_tokens', 'status']);
  if (where.tokenId) query = query.where('token_id', '=', where.tokenId);
  if (where.projectId) query = query.where('project_id', '=', where.projectId);
  const rows = await query.execute();
  return { events: rows.length, tokens: rows.reduce((sum, row) => sum + Number(row.total_tokens), 0) };
}

/** Rate-limit tests need their calls inside one clock minute: wait for the next one when this one is nearly over. */
export async function awayFromMinuteEnd(marginMs = 8_000): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < marginMs) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

/**
 * One fake OpenAI-compatible upstream for a test file, answering 10 prompt and 20 completion tokens unless a test
 * sets other usage. Returns its getter (the server starts in beforeAll).
 */
export function useFakeUpstream(): () => FakeUpstream {
  let fake: FakeUpstream | undefined;
  beforeAll(async () => {
    fake = await startFakeOpenAi();
  });
  afterAll(async () => {
    await fake?.close();
  });
  beforeEach(() => {
    fake!.usage = { prompt: 10, completion: 20 };
  });
  return () => fake!;
}
