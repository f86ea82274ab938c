import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import pino from 'pino';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type { AuditEvent } from '../../src/areas/audit/store.js';
import { createContext } from '../../src/context.js';
import { newId, randomBase32 } from '../../src/platform/ids.js';
import { BACKENDS, call, createTestApp } from '../helpers/app.js';
import { freePort } from '../helpers/net.js';

describe.each(BACKENDS)('in-process shutdown on %s', (backend) => {
  it('app.close() flushes buffered audit events; a reopened context finds them all', async () => {
    const t = await createTestApp({ backend });
    try {
      const res = await call(t.app, t.adminSession, {
        method: 'POST', url: '/api/projects', headers: { 'x-request-id': `close-http-${backend}` }, payload: { name: 'Before Close' },
      });
      expect(res.statusCode).toBe(201);
      const audit = t.ctx.services.audit;
      const ids = Array.from({ length: 25 }, () => newId('aud'));
      for (const id of ids) {
        const event: AuditEvent = {
          id, tenantId: t.ctx.bootstrap.tenantId, projectId: t.ctx.bootstrap.projectId, requestId: `close-${id}`, actorType: 'system',
          actorUserId: null, apiTokenId: null, service: 'projects', action: 'projects.create', method: 'POST', path: '/api/projects',
          statusCode: 201, outcome: 'success', ipAddress: null, userAgent: null, resourceType: null, resourceId: null, createdAt: Date.now(),
        };
        audit.record(event);
      }
      // Checked synchronously after record(): nothing could have flushed them yet.
      expect(audit.pending).toBeGreaterThanOrEqual(ids.length);
      await t.app.close();

      const reopened = await createContext(t.config, { logger: pino({ level: 'silent' }) });
      try {
        const { db } = reopened.database;
        const found = await db.selectFrom('audit_events').select('id').where('id', 'in', ids).execute();
        expect(found.map((r) => r.id).sort()).toEqual([...ids].sort());
        const viaHttp = await db.selectFrom('audit_events').selectAll().where('request_id', '=', `close-http-${backend}`).execute();
        expect(viaHttp).toHaveLength(1);
        expect(viaHttp[0]).toMatchObject({ action: 'projects.create', status_code: 201 });
      } finally {
        await reopened.close();
      }
    } finally {
      await t.close();
    }
  });
});

// ---- real process: `waygate serve`, SIGTERM, then read the SQLite file ----

const ROOT = path.resolve(import.meta.dirname, '../..');
const tempDirs: string[] = [];
afterAll(() => tempDirs.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })));

const ADMIN = { email: 'admin@example.test', password: 'shutdown-admin-password' };

interface Server {
  child: ChildProcess;
  port: number;
  dir: string;
  exit: Promise<number | null>;
  output: () => string;
}

function stop(child: ChildProcess): void {
  if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) process.kill(child.pid, 'SIGKILL');
}

async function startServe(): Promise<Server> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-shutdown-'));
  tempDirs.push(dir);
  const port = await freePort();
  const env = {
    PATH: process.env.PATH, HOME: process.env.HOME, PORT: String(port), HOST: '127.0.0.1', WAYGATE_DATA_DIR: dir,
    DATABASE_URL: `sqlite:${path.join(dir, 'waygate.db')}`, WAYGATE_ADMIN_EMAIL: ADMIN.email, WAYGATE_ADMIN_PASSWORD: ADMIN.password,
    WAYGATE_BOOTSTRAP_TOKEN: `wgt_${randomBase32(43)}`, LOG_LEVEL: 'warn',
  };
  const child = spawn(process.execPath, [inject('cliEntry'), 'serve'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`serve exited early: ${output}`);
    const res = await fetch(`http://127.0.0.1:${port}/api/health/ready`).catch(() => null);
    if (res?.status === 200) return { child, port, dir, exit, output: () => output };
    await new Promise((r) => setTimeout(r, 100));
  }
  stop(child);
  throw new Error(`serve did not become ready: ${output}`);
}

async function exitCode(server: Server): Promise<number | null> {
  return Promise.race([server.exit, new Promise<null>((_, reject) => setTimeout(() => reject(new Error(`no exit after SIGTERM: ${server.output()}`)), 20_000))]);
}

async function login(port: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/api/auth/login`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': 'sd-login' }, body: JSON.stringify(ADMIN),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { token: string }).token;
}

/** Bounded: resolves once the port refuses new connections (the server stopped listening). */
async function waitUntilRefused(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port });
      socket.once('connect', () => (socket.destroy(), resolve(false)));
      socket.once('error', () => resolve(true));
    });
    if (refused) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('the server kept accepting connections after SIGTERM');
}

function auditRows(dir: string): Array<{ request_id: string; action: string; status_code: number }> {
  const db = new SQLite(path.join(dir, 'waygate.db'));
  try {
    return db.prepare('select request_id, action, status_code from audit_events').all() as Array<{ request_id: string; action: string; status_code: number }>;
  } finally {
    db.close();
  }
}

describe('waygate serve: graceful shutdown', { timeout: 90_000 }, () => {
  it.each(['SIGTERM', 'SIGINT'] as const)('flushes every audit event written just before %s and exits 0', async (signal) => {
    const server = await startServe();
    try {
      const session = await login(server.port);
      const base = `http://127.0.0.1:${server.port}`;
      const headers = (id: string) => ({ 'content-type': 'application/json', authorization: `Bearer ${session}`, 'x-request-id': id });
      const projectIds = Array.from({ length: 8 }, (_, i) => `sd-project-${i}`);
      const responses = await Promise.all([
        ...projectIds.map((id, i) => fetch(`${base}/api/projects`, { method: 'POST', headers: headers(id), body: JSON.stringify({ name: `Shutdown ${i}` }) })),
        fetch(`${base}/api/tokens`, { method: 'POST', headers: headers('sd-token'), body: JSON.stringify({ name: 'sd', projectId: 'default', role: 'member' }) }),
        fetch(`${base}/api/client/v1/audit/logs`, { headers: { 'x-request-id': 'sd-401' } }),
      ]);
      expect(responses.map((r) => r.status)).toEqual([...projectIds.map(() => 201), 201, 401]);
      process.kill(server.child.pid!, signal);
      expect(await exitCode(server)).toBe(0);

      const rows = auditRows(server.dir);
      for (const id of ['sd-login', ...projectIds, 'sd-token', 'sd-401']) {
        expect(rows.filter((r) => r.request_id === id), id).toHaveLength(1);
      }
      expect(rows.find((r) => r.request_id === 'sd-401')).toMatchObject({ action: 'audit.list', status_code: 401 });
    } finally {
      stop(server.child);
    }
  });

  it('a request in flight when SIGTERM arrives completes (not a connection reset) and is audited', async () => {
    const server = await startServe();
    try {
      const session = await login(server.port);
      const body = JSON.stringify({ name: 'Slow Project' });
      const req = http.request({
        host: '127.0.0.1', port: server.port, method: 'POST', path: '/api/projects',
        headers: {
          'content-type': 'application/json', 'content-length': Buffer.byteLength(body), authorization: `Bearer ${session}`,
          'x-request-id': 'sd-slow', expect: '100-continue',
        },
      });
      const response = new Promise<{ status: number; text: string; connection: string | undefined }>((resolve, reject) => {
        req.once('response', (res) => {
          let text = '';
          res.on('data', (chunk) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode!, text, connection: res.headers.connection }));
        });
        req.once('error', reject);
      });
      // "100 Continue" proves the server has parsed the headers: the request is in flight, not an idle socket.
      const continued = new Promise<void>((resolve) => req.once('continue', resolve));
      req.flushHeaders();
      await continued;
      req.write(body.slice(0, 5));

      process.kill(server.child.pid!, 'SIGTERM');
      await waitUntilRefused(server.port);
      req.end(body.slice(5));

      const res = await response;
      expect(res.status, res.text).toBe(201);
      expect(JSON.parse(res.text).project).toMatchObject({ name: 'Slow Project' });
      // A response served while shutting down must not invite the client to keep the connection open: with
      // "keep-alive, timeout=72" the server waits for the client to hang up before it can flush and exit.
      expect.soft(res.connection, 'Connection header of a response served during shutdown').toBe('close');
      expect(await exitCode(server)).toBe(0);
      expect(auditRows(server.dir).filter((r) => r.request_id === 'sd-slow')).toEqual([{ request_id: 'sd-slow', action: 'projects.create', status_code: 201 }]);
    } finally {
      stop(server.child);
    }
  });
});
