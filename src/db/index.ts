import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import type { DatabaseTarget } from '../config.js';
import type { Database, Db, Dialect } from './types.js';

// bigint columns hold millisecond timestamps, which fit a JS number exactly.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

/** Runs `fn` in one transaction; services pass the transaction on to the services whose rows it writes. */
export type Transactor = <T>(fn: (trx: Db) => Promise<T>) => Promise<T>;

export interface DatabaseHandle {
  db: Db;
  dialect: Dialect;
  transaction: Transactor;
  /** One round trip, for the readiness check. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** `onError`: the pool lost an idle connection (server restart, failover); it reconnects on next use. */
export function openDatabase(target: DatabaseTarget, onError: (err: Error) => void = () => undefined): DatabaseHandle {
  if (target.kind === 'postgres') {
    // pg applies this bound to connecting and to waiting for a free pooled connection alike: generous enough for a
    // busy pool, bounded so requests, readiness checks and shutdown do not hang on an unreachable server.
    const pool = new pg.Pool({ connectionString: target.url, max: target.poolSize, connectionTimeoutMillis: 15_000 });
    pool.on('error', onError);
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    return {
      db,
      dialect: 'postgres',
      transaction: (fn) => db.transaction().execute(fn),
      ping: async () => void (await sql`select 1`.execute(db)),
      close: () => db.destroy(),
    };
  }
  if (target.file !== ':memory:') fs.mkdirSync(path.dirname(target.file), { recursive: true });
  const sqlite = new SQLite(target.file);
  // WAL lets readers run beside the single writer; busy_timeout waits for a lock instead of failing.
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('synchronous = NORMAL');
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
  return {
    db,
    dialect: 'sqlite',
    transaction: (fn) => db.transaction().execute(fn),
    ping: async () => void (await sql`select 1`.execute(db)),
    close: () => db.destroy(),
  };
}
