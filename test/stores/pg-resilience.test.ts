import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import pino from 'pino';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createContext } from '../../src/context.js';
import { createTestDatabase, TEST_DATABASE_URL } from '../helpers/postgres.js';

describe.skipIf(!TEST_DATABASE_URL)('PostgreSQL connection loss', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it('an idle pooled connection killed by the server neither crashes the process nor breaks later queries', async () => {
    const database = await createTestDatabase();
    cleanups.push(database.drop);
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-pgloss-'));
    cleanups.push(async () => fs.rmSync(dataDir, { recursive: true, force: true }));
    const lines: string[] = [];
    const ctx = await createContext(loadConfig({ WAYGATE_DATA_DIR: dataDir, DATABASE_URL: database.url }), {
      logger: pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) }),
    });
    cleanups.push(() => ctx.close());
    await ctx.database.ping();

    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    const name = new URL(database.url).pathname.slice(1);
    const killed = await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [name]);
    await admin.end();
    expect(killed.rowCount).toBeGreaterThan(0);

    for (let attempt = 0; attempt < 50 && !lines.some((l) => l.includes('database connection lost')); attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(lines.some((l) => l.includes('database connection lost'))).toBe(true);
    // Several pooled connections may have been killed; let the pool notice all of them before the next query.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const result = await sql<{ n: number }>`select 1 as n`.execute(ctx.database.db);
    expect(result.rows[0]!.n).toBe(1);
  });

  it('a connection killed in the middle of a transaction fails that transaction, not the process', async () => {
    const database = await createTestDatabase();
    cleanups.push(database.drop);
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-pgloss-'));
    cleanups.push(async () => fs.rmSync(dataDir, { recursive: true, force: true }));
    const ctx = await createContext(loadConfig({ WAYGATE_DATA_DIR: dataDir, DATABASE_URL: database.url }), { logger: pino({ level: 'silent' }) });
    cleanups.push(() => ctx.close());
    let inside!: () => void;
    const started = new Promise<void>((resolve) => (inside = resolve));
    // Between its two statements the transaction's client is checked out of the pool, with no query running.
    const transaction = ctx.database.transaction(async (trx) => {
      await sql`select 1`.execute(trx);
      inside();
      await new Promise((resolve) => setTimeout(resolve, 300));
      await sql`select 2`.execute(trx);
    });
    await started;
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [new URL(database.url).pathname.slice(1)]);
    await admin.end();
    await expect(transaction).rejects.toThrow();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const result = await sql<{ n: number }>`select 1 as n`.execute(ctx.database.db);
    expect(result.rows[0]!.n).toBe(1);
  });
});
