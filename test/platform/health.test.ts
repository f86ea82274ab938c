import net from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryCache, type RedisCache } from '../../src/platform/cache.js';
import { cacheCheck } from '../../src/platform/core-checks.js';
import { openDatabase } from '../../src/db/index.js';
import { HealthRegistry } from '../../src/platform/health.js';
import { BACKENDS, createTestApp, type TestApp } from '../helpers/app.js';
import { redisReachable, TEST_REDIS_URL } from '../helpers/redis.js';

const redisUp = await redisReachable();

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

async function ready(t: TestApp) {
  const res = await t.app.inject({ method: 'GET', url: '/api/health/ready' });
  return { status: res.statusCode, body: res.json() };
}

/** Runs `fn` against a fresh app so lifecycle and registered checks do not leak between tests. */
async function withApp(options: Parameters<typeof createTestApp>[0], fn: (t: TestApp) => Promise<void>): Promise<void> {
  const t = await createTestApp(options);
  try {
    await fn(t);
  } finally {
    await t.close();
  }
}

describe.each(BACKENDS)('health probes on %s', (backend) => {
  const other = backend === 'sqlite' ? 'postgres' : 'sqlite';
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend });
  });
  afterAll(async () => t.close());

  it('GET /api/health/live: 200 {status: ok, uptime}, no auth needed', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/health/live' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['status', 'uptime']);
    expect(body.status).toBe('ok');
    expect(body.uptime).toBeGreaterThan(0);
    expect(res.headers['x-request-id']).toEqual(expect.any(String));
  });

  it('GET /api/health/ready: report per interface 2.14 with the database and cache checks', async () => {
    const { status, body } = await ready(t);
    expect(status).toBe(200);
    expect(Object.keys(body).sort()).toEqual(['checks', 'status', 'timestamp', 'uptime']);
    expect(body.status).toBe('ok');
    expect(body.uptime).toBeGreaterThan(0);
    expect(body.timestamp).toMatch(ISO);
    expect(Math.abs(Date.parse(body.timestamp) - Date.now())).toBeLessThan(60_000);
    expect(Object.keys(body.checks).sort()).toEqual(['cache', 'queue', backend].sort());
    expect(body.checks[other]).toBeUndefined();
    expect(body.checks[backend]).toMatchObject({ status: 'ok', latencyMs: expect.any(Number) });
    expect(body.checks.cache).toMatchObject({ status: 'ok', latencyMs: expect.any(Number), details: { kind: 'memory' } });
    expect(body.checks.queue).toMatchObject({ status: 'ok', details: { pending: 0, running: 0, oldestPendingAgeSeconds: 0, liveWorkers: 1 } });
    for (const check of Object.values(body.checks) as Array<Record<string, unknown>>) {
      expect(['ok', 'degraded', 'down']).toContain(check.status);
      expect(Object.keys(check).every((k) => ['status', 'latencyMs', 'message', 'details'].includes(k))).toBe(true);
    }
  });

  it('503 status down while start-up has not finished; 200 once serving; live stays 200', async () => {
    await withApp({ backend, notServing: true }, async (s) => {
      const before = await ready(s);
      expect(before.status).toBe(503);
      expect(before.body.status).toBe('down');
      expect(before.body.checks[backend].status).toBe('ok');
      expect((await s.app.inject({ method: 'GET', url: '/api/health/live' })).statusCode).toBe(200);
      s.ctx.health.markServing();
      const after = await ready(s);
      expect(after.status).toBe(200);
      expect(after.body.status).toBe('ok');
    });
  });

  it('503 status down once shutdown begins (markStopping)', async () => {
    await withApp({ backend }, async (s) => {
      expect((await ready(s)).status).toBe(200);
      s.ctx.health.markStopping();
      const { status, body } = await ready(s);
      expect(status).toBe(503);
      expect(body.status).toBe('down');
    });
  });

  it('a registered degraded check: 200 with overall status degraded', async () => {
    await withApp({ backend }, async (s) => {
      s.ctx.health.register('automations', async () => ({ status: 'degraded', message: 'backlog of 900 jobs', details: { backlog: 900 } }));
      const { status, body } = await ready(s);
      expect(status).toBe(200);
      expect(body.status).toBe('degraded');
      expect(body.checks.automations).toMatchObject({ status: 'degraded', message: 'backlog of 900 jobs', details: { backlog: 900 } });
      expect(body.checks[backend].status).toBe('ok');
    });
  });

  it('a registered down check: 503 with overall status down (worst wins over degraded)', async () => {
    await withApp({ backend }, async (s) => {
      s.ctx.health.register('automations', async () => ({ status: 'degraded' }));
      s.ctx.health.register('browser-runtime', async () => ({ status: 'down', message: 'chromium missing' }));
      const { status, body } = await ready(s);
      expect(status).toBe(503);
      expect(body.status).toBe('down');
      expect(body.checks['browser-runtime']).toMatchObject({ status: 'down', message: 'chromium missing' });
      expect(body.checks.automations.status).toBe('degraded');
    });
  });

  it('a check that throws is reported down with its message', async () => {
    await withApp({ backend }, async (s) => {
      s.ctx.health.register('cluster', async () => {
        throw new Error('lease table unreachable');
      });
      const { status, body } = await ready(s);
      expect(status).toBe(503);
      expect(body.status).toBe('down');
      expect(body.checks.cluster).toMatchObject({ status: 'down', message: 'lease table unreachable', latencyMs: expect.any(Number) });
    });
  });

  it('HEALTH_ENDPOINT_ENABLED=false: both probes answer 404 with {error}', async () => {
    await withApp({ backend, env: { HEALTH_ENDPOINT_ENABLED: 'false' } }, async (s) => {
      for (const url of ['/api/health/live', '/api/health/ready']) {
        const res = await s.app.inject({ method: 'GET', url });
        expect(res.statusCode).toBe(404);
        expect(res.json().error).toMatchObject({ type: 'not_found_error' });
      }
    });
  });

  it.skipIf(!redisUp)('with REDIS_URL the cache check reports kind redis (skipped when Redis is unreachable)', async () => {
    await withApp({ backend, env: { REDIS_URL: TEST_REDIS_URL } }, async (s) => {
      expect(s.ctx.cache.kind).toBe('redis');
      const { status, body } = await ready(s);
      expect(status).toBe(200);
      expect(body.checks.cache).toMatchObject({ status: 'ok', details: { kind: 'redis' } });
      await (s.ctx.cache as RedisCache).clearPrefix();
    });
  });
});

describe.runIf(BACKENDS.includes('postgres'))('readiness with a busy PostgreSQL pool', () => {
  it('a pool whose connections are all taken is not a database that is down: postgres ok, queue degraded, 200', async () => {
    await withApp({ backend: 'postgres', env: { WAYGATE_DATABASE_POOL_SIZE: '2' } }, async (t) => {
      // Both pooled connections busy for 3 s, longer than a check may take (2 s).
      const busy = [0, 1].map(() => sql`select pg_sleep(3)`.execute(t.ctx.database.db));
      await new Promise((resolve) => setTimeout(resolve, 100));
      const { status, body } = await ready(t);
      expect(status).toBe(200);
      expect(body.checks.postgres.status).toBe('ok');
      expect(body.checks.queue).toMatchObject({ status: 'degraded', message: 'check timed out after 2000 ms' });
      await Promise.all(busy);
    });
  });
});

describe.runIf(BACKENDS.includes('postgres'))('the PostgreSQL readiness ping', () => {
  it('replaces its connection when the server goes silent on it (a failover or a partition), instead of waiting for the OS', async () => {
    const target = new URL(process.env.TEST_DATABASE_URL!);
    // A TCP proxy in front of PostgreSQL that can stop passing data on the connections it has.
    const pairs: { client: net.Socket; server: net.Socket }[] = [];
    const proxy = net.createServer((client) => {
      const server = net.connect(Number(target.port || 5432), target.hostname);
      client.pipe(server).pipe(client);
      client.on('error', () => server.destroy());
      server.on('error', () => client.destroy());
      pairs.push({ client, server });
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const url = new URL(target);
    url.host = `127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
    const handle = openDatabase({ kind: 'postgres', url: url.toString(), poolSize: 1 });
    try {
      await handle.ping();
      for (const { client, server } of pairs.splice(0)) {
        client.unpipe(server);
        server.unpipe(client);
      }
      await expect(handle.ping()).rejects.toThrow(/did not answer/);
      await handle.ping(); // a new connection, through the proxy as before
    } finally {
      await handle.close();
      for (const { client, server } of pairs) {
        client.destroy();
        server.destroy();
      }
      proxy.close();
    }
  });
});

describe('HealthRegistry', () => {
  it('a check registered with slowIs degraded that does not answer in time is degraded; others are down', async () => {
    const registry = new HealthRegistry();
    registry.markServing();
    const never = () => new Promise<never>(() => undefined);
    registry.register('queue', never, { slowIs: 'degraded' });
    registry.register('postgres', never);
    const report = await registry.report();
    expect(report.checks.queue).toMatchObject({ status: 'degraded', message: 'check timed out after 2000 ms' });
    expect(report.checks.postgres).toMatchObject({ status: 'down', message: 'check timed out after 2000 ms' });
  });

  it('refuses a second check under the same name', () => {
    const registry = new HealthRegistry();
    registry.register('cache', async () => ({ status: 'ok' }));
    expect(() => registry.register('cache', async () => ({ status: 'ok' }))).toThrow(/already registered/);
  });

  it('an empty serving registry is ok; stopping adds a lifecycle check that is down', async () => {
    const registry = new HealthRegistry();
    registry.markServing();
    expect(registry.serving).toBe(true);
    expect(await registry.report()).toMatchObject({ status: 'ok', checks: {} });
    registry.markStopping();
    expect(registry.serving).toBe(false);
    const report = await registry.report();
    expect(report.status).toBe('down');
    expect(report.checks.lifecycle).toMatchObject({ status: 'down', message: 'shutting down' });
  });

  it('a non-Error throw becomes a string message', async () => {
    const registry = new HealthRegistry();
    registry.markServing();
    registry.register('automations', () => Promise.reject('scheduler stopped'));
    const report = await registry.report();
    expect(report.checks.automations).toMatchObject({ status: 'down', message: 'scheduler stopped' });
  });
});

describe('the cache check', () => {
  // Regression: every run wrote one key per instance, so a probe whose read came after another probe's write read
  // that probe's value and reported the cache degraded.
  it('overlapping runs each read back their own value', async () => {
    const cache = new MemoryCache();
    const later = () => new Promise((resolve) => setTimeout(resolve, 2));
    // Round trips that take a while, as a remote Redis's do.
    const slow = Object.assign(Object.create(cache) as MemoryCache, {
      set: async (key: string, value: string, ttlMs: number) => (await later(), cache.set(key, value, ttlMs)),
      get: async (key: string) => (await later(), cache.get(key)),
    });
    const check = cacheCheck(slow);
    // Started a millisecond apart, so that each run writes a value of its own.
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => new Promise((resolve) => setTimeout(resolve, i)).then(check)));
    expect(results.map((r) => r.status)).toEqual(Array(10).fill('ok'));
    await cache.close();
  });
});
