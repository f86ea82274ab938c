import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, expect } from 'vitest';
import { buildApp } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import { createContext, type Context } from '../../src/context.js';
import { randomBase32 } from '../../src/platform/ids.js';
import { listenOnLoopback } from './net.js';
import { createTestDatabase, TEST_DATABASE_URL } from './postgres.js';

export type Backend = 'sqlite' | 'postgres';

/** SQLite always; PostgreSQL as well when TEST_DATABASE_URL is set (CI sets it). */
export const BACKENDS: Backend[] = TEST_DATABASE_URL ? ['sqlite', 'postgres'] : ['sqlite'];

export const ADMIN_EMAIL = 'admin@example.test';
export const ADMIN_PASSWORD = 'correct-horse-battery';

export interface TestApp {
  app: FastifyInstance;
  ctx: Context;
  config: Config;
  /** Session JWT of the instance admin (owner of tenant default). */
  adminSession: string;
  /** Owner token of project default (WAYGATE_BOOTSTRAP_TOKEN). */
  ownerToken: string;
  /** Log lines the app wrote, for "never logged" assertions. */
  logs: string[];
  close(): Promise<void>;
}

export interface TestAppOptions {
  backend?: Backend;
  env?: Record<string, string>;
  /** Leave readiness in "starting" (default: marked serving like a started server). */
  notServing?: boolean;
  /** Leave the background workers (batch items) stopped (default: started like a server's). */
  noWorkers?: boolean;
}

/** A fully wired app on its own database (temp SQLite file or a fresh PostgreSQL database). */
export async function createTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-test-'));
  const pgDb = options.backend === 'postgres' ? await createTestDatabase() : null;
  const ownerToken = `wgt_${randomBase32(43)}`;
  const config = loadConfig({
    WAYGATE_DATA_DIR: dataDir,
    DATABASE_URL: pgDb ? pgDb.url : `sqlite:${path.join(dataDir, 'waygate.db')}`,
    WAYGATE_ADMIN_EMAIL: ADMIN_EMAIL,
    WAYGATE_ADMIN_PASSWORD: ADMIN_PASSWORD,
    WAYGATE_BOOTSTRAP_TOKEN: ownerToken,
    LOG_LEVEL: 'info',
    // Every test logs in from 127.0.0.1; tests of the per-address limit set their own.
    WAYGATE_LOGIN_MAX_ATTEMPTS_PER_ADDRESS: '1000000',
    ...options.env,
  });
  const logs: string[] = [];
  const logger = pino({ level: config.logLevel }, { write: (line: string) => void logs.push(line) });
  const ctx = await createContext(config, { logger, cachePrefix: `waygate-test:${randomBase32(10)}:` });
  const app = await buildApp(ctx);
  if (!options.noWorkers) await ctx.startWorkers();
  if (!options.notServing) ctx.health.markServing();
  const login = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
  if (login.statusCode !== 200) throw new Error(`test login failed: ${login.body}`);
  return {
    app,
    ctx,
    config,
    adminSession: login.json().token,
    ownerToken,
    logs,
    close: async () => {
      await app.close();
      await pgDb?.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** app.inject with a bearer credential (API token or session JWT). */
export function call(app: FastifyInstance, credential: string | null, options: InjectOptions): Promise<LightMyRequestResponse> {
  const headers = { ...(options.headers ?? {}), ...(credential ? { authorization: `Bearer ${credential}` } : {}) };
  return app.inject({ ...options, headers });
}

/** Creates an API token through the dashboard API and returns its value and id. */
export async function createToken(
  t: Pick<TestApp, 'app' | 'adminSession'>,
  body: Record<string, unknown>,
  session = t.adminSession,
): Promise<{ id: string; value: string }> {
  const res = await call(t.app, session, { method: 'POST', url: '/api/tokens', payload: { name: 'test', projectId: 'default', role: 'member', ...body } });
  if (res.statusCode !== 201) throw new Error(`token create failed: ${res.statusCode} ${res.body}`);
  return { id: res.json().token.id, value: res.json().value };
}

/** A new project of the tenant and an owner token of it: what another project's caller holds. */
export async function otherProject(t: Pick<TestApp, 'app' | 'adminSession'>, name: string): Promise<{ id: string; token: string }> {
  const res = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name } });
  expect(res.statusCode, res.body).toBe(201);
  const id = res.json().project.id as string;
  return { id, token: (await createToken(t, { role: 'owner', projectId: id })).value };
}

/** Creates a user in the admin's tenant and logs in as them. */
export async function createUserSession(t: Pick<TestApp, 'app' | 'adminSession'>, role: string, email = `${role}-${randomBase32(6)}@example.test`): Promise<{ id: string; session: string; email: string }> {
  const password = 'user-password-123';
  const created = await call(t.app, t.adminSession, { method: 'POST', url: '/api/users', payload: { email, password, role } });
  if (created.statusCode !== 201) throw new Error(`user create failed: ${created.body}`);
  const login = await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password } });
  return { id: created.json().user.id, session: login.json().token, email };
}

/** Waits for buffered audit events to reach the database. */
export async function flushAudit(t: Pick<TestApp, 'ctx'>): Promise<void> {
  await t.ctx.services.audit.flush();
}

/** The config of one more instance on a deployment from `tempDeployment`: the test admin, plus `env`. */
export function deploymentConfig(deployment: { dataDir: string; databaseUrl: string }, env: Record<string, string> = {}): Config {
  return loadConfig({
    WAYGATE_DATA_DIR: deployment.dataDir,
    DATABASE_URL: deployment.databaseUrl,
    WAYGATE_ADMIN_EMAIL: ADMIN_EMAIL,
    WAYGATE_ADMIN_PASSWORD: ADMIN_PASSWORD,
    WAYGATE_LOGIN_MAX_ATTEMPTS_PER_ADDRESS: '1000000',
    ...env,
  });
}

/**
 * A data directory and an empty database (a SQLite file in it, or a fresh PostgreSQL database) for tests that
 * build their own contexts; `remove` deletes both.
 */
export async function tempDeployment(backend: Backend): Promise<{ dataDir: string; databaseUrl: string; remove: () => Promise<void> }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-deploy-'));
  const pgDb = backend === 'postgres' ? await createTestDatabase() : null;
  return {
    dataDir,
    databaseUrl: pgDb ? pgDb.url : `sqlite:${path.join(dataDir, 'waygate.db')}`,
    remove: async () => {
      await pgDb?.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A test app listening on a loopback port for a describe block's tests (raw-socket tests); read its fields in tests. */
export function useListeningTestApp(): { t: TestApp; port: number } {
  const listening = {} as { t: TestApp; port: number };
  beforeAll(async () => {
    listening.t = await createTestApp();
    listening.port = await listenOnLoopback(listening.t.app);
  });
  afterAll(async () => listening.t?.close());
  return listening;
}
