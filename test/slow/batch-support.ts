import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { inject } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import type { Backend } from '../helpers/app.js';
import type { FakeUpstream } from '../helpers/fake-upstream.js';
import { freePort } from '../helpers/net.js';
import { createTestDatabase } from '../helpers/postgres.js';

/**
 * Real `waygate serve` processes for the batch crash and multi-instance tests: a deployment (data directories and one
 * database), processes started on it and stopped by PID, the client API over loopback, and direct reads of the
 * batch tables.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const ADMIN = { email: 'admin@example.test', password: 'batch-slow-admin-password' };

export interface Server {
  child: ChildProcess;
  pid: number;
  base: string;
  output: () => string;
}

export interface Deployment {
  backend: Backend;
  databaseUrl: string;
  /** Owner token of project default (WAYGATE_BOOTSTRAP_TOKEN). */
  token: string;
  /** Data directory of instance `n` (SQLite: one shared directory, next to the database file). */
  dataDir(n: number): string;
  /** Starts `waygate serve` (instance `n`) and waits until it is ready. */
  start(n?: number): Promise<Server>;
  /** Rows of a query on the deployment's database; `?` placeholders on both backends. */
  rows<T = Record<string, unknown>>(query: string, params?: unknown[]): Promise<T[]>;
  /** SIGKILLs every process still running (by PID), drops the database, removes the directories. */
  remove(): Promise<void>;
}

export function isRunning(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

/** Resolves when `child` has exited, or rejects after `ms`. */
function exited(child: ChildProcess, ms: number): Promise<void> {
  if (!isRunning(child)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`process ${child.pid} did not exit after SIGKILL`)), ms);
    child.once('exit', () => (clearTimeout(timer), resolve()));
  });
}

/** SIGKILL by PID and wait (bounded) until the process is gone. */
export async function kill(server: Server): Promise<void> {
  const gone = exited(server.child, 20_000);
  if (isRunning(server.child)) process.kill(server.pid, 'SIGKILL');
  await gone;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * A fresh deployment. `env` is given to every instance (WAYGATE_BATCH_* settings, for instance); all instances share
 * the database, the bootstrap token and the secrets, as instances behind one load balancer do.
 */
export async function deployment(backend: Backend, env: Record<string, string>): Promise<Deployment> {
  const dirs: string[] = [];
  const pgDb = backend === 'postgres' ? await createTestDatabase() : null;
  const dataDir = (n: number) => {
    const i = backend === 'sqlite' ? 0 : n;
    while (dirs.length <= i) dirs.push(fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-batch-slow-')));
    return dirs[i]!;
  };
  const databaseUrl = pgDb ? pgDb.url : `sqlite:${path.join(dataDir(0), 'waygate.db')}`;
  const token = `wgt_${randomBase32(43)}`;
  const secrets = { WAYGATE_SECRET_KEY: randomBase32(48), WAYGATE_SESSION_SECRET: randomBase32(48) };
  const children: ChildProcess[] = [];

  async function start(n = 0): Promise<Server> {
    const port = await freePort();
    const childEnv = {
      PATH: process.env.PATH, HOME: process.env.HOME, PORT: String(port), HOST: '127.0.0.1', WAYGATE_DATA_DIR: dataDir(n), DATABASE_URL: databaseUrl,
      WAYGATE_ADMIN_EMAIL: ADMIN.email, WAYGATE_ADMIN_PASSWORD: ADMIN.password, WAYGATE_BOOTSTRAP_TOKEN: token, LOG_LEVEL: 'warn', ...secrets, ...env,
    };
    const child = spawn(process.execPath, [inject('cliEntry'), 'serve'], { cwd: ROOT, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let output = '';
    child.stdout!.on('data', (chunk) => (output += chunk));
    child.stderr!.on('data', (chunk) => (output += chunk));
    const server: Server = { child, pid: child.pid!, base: `http://127.0.0.1:${port}`, output: () => output };
    for (let i = 0; i < 300; i++) {
      if (!isRunning(child)) throw new Error(`serve exited early: ${output}`);
      const res = await fetch(`${server.base}/api/health/ready`, { signal: AbortSignal.timeout(5_000) }).catch(() => null);
      if (res?.status === 200) return server;
      await sleep(100);
    }
    await kill(server);
    throw new Error(`serve did not become ready: ${output}`);
  }

  async function rows<T>(query: string, params: unknown[] = []): Promise<T[]> {
    if (!pgDb) {
      const db = new SQLite(path.join(dataDir(0), 'waygate.db'), { readonly: true, fileMustExist: true });
      try {
        return db.prepare(query).all(...params) as T[];
      } finally {
        db.close();
      }
    }
    let n = 0;
    const client = new pg.Client({ connectionString: pgDb.url });
    await client.connect();
    try {
      return (await client.query(query.replace(/\?/g, () => `$${++n}`), params)).rows as T[];
    } finally {
      await client.end();
    }
  }

  return {
    backend,
    databaseUrl,
    token,
    dataDir,
    start,
    rows,
    async remove() {
      const gone = Promise.all(children.map((child) => exited(child, 20_000)));
      for (const child of children) if (isRunning(child)) process.kill(child.pid!, 'SIGKILL');
      await gone;
      await pgDb?.drop();
      for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A JSON call to an instance; throws with the body unless the status is the expected one. */
export async function api<T = Record<string, unknown>>(
  server: Server,
  credential: string | null,
  method: string,
  url: string,
  body?: unknown,
  expected = 200,
): Promise<T> {
  const headers: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json' };
  if (credential) headers.authorization = `Bearer ${credential}`;
  const res = await fetch(`${server.base}${url}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
  const text = await res.text();
  if (res.status !== expected) throw new Error(`${method} ${url}: ${res.status} (expected ${expected}) ${text}`);
  const type = res.headers.get('content-type') ?? '';
  return (type.startsWith('application/json') && !type.startsWith('application/jsonl') ? JSON.parse(text) : text) as T;
}

/** Logs in as the admin and registers model `fake` (chat, embeddings) on the fake upstream in project default. */
export async function registerFakeModel(server: Server, fake: FakeUpstream): Promise<void> {
  const { token: session } = await api<{ token: string }>(server, null, 'POST', '/api/auth/login', ADMIN);
  await api(server, session, 'POST', '/api/models', {
    key: 'fake', provider: { type: 'openai-compatible', baseUrl: fake.baseUrl, apiKey: 'sk-x' }, upstreamModel: 'gpt-upstream', capabilities: ['chat', 'embeddings'],
  }, 201);
}

export interface BatchView {
  id: string;
  status: string;
  request_counts: { total: number; completed: number; failed: number; cancelled: number };
  usage: { input_tokens: number; output_tokens: number; total_tokens: number };
}

export interface ItemView {
  id: string;
  index: number;
  custom_id: string | null;
  status: string;
}

export interface ResultLine {
  id: string;
  custom_id: string | null;
  response: { status_code: number; body: Record<string, unknown> | null };
  error: { code: string; message: string } | null;
}

/** A chat batch of `size` inline lines, custom ids c0..c<size-1>. */
export function createBatch(server: Server, token: string, size: number): Promise<BatchView> {
  const requests = Array.from({ length: size }, (_, i) => ({ custom_id: `c${i}`, body: { model: 'fake', messages: [{ role: 'user', content: String(i) }] } }));
  return api<BatchView>(server, token, 'POST', '/api/client/v1/batches', { endpoint: '/v1/chat/completions', requests }, 201);
}

export function getBatch(server: Server, token: string, id: string): Promise<BatchView> {
  return api<BatchView>(server, token, 'GET', `/api/client/v1/batches/${id}`);
}

/** Polls the batch (bounded) until `done` holds for it; returns the batch then. */
export async function waitForBatch(server: Server, token: string, id: string, done: (batch: BatchView) => boolean, what: string, timeoutMs = 45_000): Promise<BatchView> {
  const deadline = Date.now() + timeoutMs;
  let last: BatchView | null = null;
  while (Date.now() < deadline) {
    if (!isRunning(server.child)) throw new Error(`the server died while waiting for ${what}: ${server.output()}`);
    last = await getBatch(server, token, id);
    if (done(last)) return last;
    await sleep(25);
  }
  throw new Error(`timed out waiting for ${what}; last seen: ${JSON.stringify(last?.request_counts)} ${last?.status}\n${server.output()}`);
}

/** Every item of the batch through the client API, page by page. */
export async function listItems(server: Server, token: string, id: string): Promise<ItemView[]> {
  const items: ItemView[] = [];
  for (let page = 0; page < 100; page++) {
    const { data } = await api<{ data: ItemView[] }>(server, token, 'GET', `/api/client/v1/batches/${id}/items?limit=1000&skip=${items.length}`);
    items.push(...data);
    if (data.length < 1000) return items;
  }
  throw new Error('too many item pages');
}

/** The JSONL results as text and as parsed lines. */
export async function results(server: Server, token: string, id: string): Promise<{ text: string; lines: ResultLine[] }> {
  const text = await api<string>(server, token, 'GET', `/api/client/v1/batches/${id}/results`);
  return { text, lines: text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as ResultLine) };
}

export interface ItemRow {
  id: string;
  status: string;
  attempts: number;
  locked_by: string | null;
  ended_at: number | null;
}

/** The batch's items straight from batch_items. */
export async function itemRows(d: Deployment, batchId: string): Promise<ItemRow[]> {
  const rows = await d.rows<Record<string, unknown>>('select id, status, attempts, locked_by, ended_at from batch_items where batch_id = ? order by idx', [batchId]);
  return rows.map((r) => ({
    id: String(r.id), status: String(r.status), attempts: Number(r.attempts), locked_by: r.locked_by === null ? null : String(r.locked_by), ended_at: r.ended_at === null ? null : Number(r.ended_at),
  }));
}

/** The counters of the batches row next to the counts of item states in batch_items. */
export async function countersAndStates(d: Deployment, batchId: string): Promise<{ counters: Record<string, number>; states: Record<string, number> }> {
  const [row] = await d.rows<Record<string, unknown>>('select total, completed, failed, cancelled from batches where id = ?', [batchId]);
  const grouped = await d.rows<{ status: string; n: unknown }>('select status, count(*) as n from batch_items where batch_id = ? group by status', [batchId]);
  const count = (status: string) => Number(grouped.find((g) => g.status === status)?.n ?? 0);
  return {
    counters: { total: Number(row!.total), completed: Number(row!.completed), failed: Number(row!.failed), cancelled: Number(row!.cancelled) },
    states: {
      total: grouped.reduce((sum, g) => sum + Number(g.n), 0), completed: count('succeeded'), failed: count('failed'), cancelled: count('cancelled'),
    },
  };
}

/** How often each `batch_req_<item id>` reached the fake upstream. */
export function upstreamCalls(fake: FakeUpstream): Map<string, number> {
  const calls = new Map<string, number>();
  for (const request of fake.requests) {
    const id = request.headers['x-request-id'];
    if (typeof id === 'string' && id.startsWith('batch_req_')) calls.set(id, (calls.get(id) ?? 0) + 1);
  }
  return calls;
}
