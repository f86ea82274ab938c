import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createContext } from '../../src/context.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, call, createTestApp, createToken, flushAudit } from '../helpers/app.js';

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

describe('backing services down', () => {
  it('logins answer 503, not 500, while Redis is unreachable', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-outage-'));
    cleanups.push(async () => fs.rmSync(dataDir, { recursive: true, force: true }));
    // Nothing listens on port 1 of loopback: every Redis command fails.
    const config = loadConfig({
      WAYGATE_DATA_DIR: dataDir,
      REDIS_URL: 'redis://127.0.0.1:1',
      WAYGATE_ADMIN_EMAIL: ADMIN_EMAIL,
      WAYGATE_ADMIN_PASSWORD: ADMIN_PASSWORD,
    });
    const app = await buildApp(await createContext(config, { logger: pino({ level: 'silent' }) }));
    cleanups.push(() => app.close());
    const res = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
    expect(res.statusCode).toBe(503);
    expect(res.json().error.message).toContain('Redis');
  });
});

describe('refused tokens in the audit log', () => {
  it('a revoked or expired token is recorded in its own tenant, visible to the tenant owner', async () => {
    const t = await createTestApp();
    cleanups.push(() => t.close());
    const token = await createToken(t, { role: 'viewer' });
    expect((await call(t.app, token.value, { method: 'GET', url: '/api/client/v1/token' })).statusCode).toBe(200);
    expect((await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/tokens/${token.id}` })).statusCode).toBe(200);
    const refused = await call(t.app, token.value, { method: 'GET', url: '/api/client/v1/token' });
    expect(refused.statusCode).toBe(401);
    await flushAudit(t);
    const logs = await call(t.app, t.ownerToken, { method: 'GET', url: `/api/client/v1/audit/logs?q=${refused.headers['x-request-id']}` });
    const events = logs.json().data;
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      tenantId: t.ctx.bootstrap.tenantId,
      projectId: t.ctx.bootstrap.projectId,
      actorType: 'api_token',
      apiTokenId: token.id,
      outcome: 'failure',
      statusCode: 401,
    });
  });

  it('JSON with __proto__ or constructor.prototype keys is refused with 400', async () => {
    const t = await createTestApp();
    cleanups.push(() => t.close());
    for (const payload of ['{"name":"x","__proto__":{"isInstanceAdmin":true}}', '{"name":"x","constructor":{"prototype":{"polluted":true}}}']) {
      const res = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload, headers: { 'content-type': 'application/json' } });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe('invalid_json');
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
