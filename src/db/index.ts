import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import type Pg from 'pg';
import type { DatabaseTarget } from '../config.js';
import { settledWithin } from '../platform/time.js';
import { withStatementCache } from './sqlite-statements.js';
import type { Database, Db, Dialect } from './types.js';

/** Below the readiness check's own 2 s, so that a silent connection is replaced before the next check. */
const PING_TIMEOUT_MS = 1_500;

// Only the configured driver is loaded: the other one would just take memory.
const require = createRequire(import.meta.url);

function loadPg(): typeof Pg {
  const pg = require('pg') as typeof Pg;
  // bigint columns hold millisecond timestamps, which fit a JS number exactly.
  pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));
  return pg;
}

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

/**
 * The readiness ping's own connection, outside the pool: waiting behind busy requests for a pooled connection, the
 * ping would report a reachable server as down, and take every instance out of the load balancer at once under load.
 * A connection that fails, or does not answer within PING_TIMEOUT_MS (a failover or a partition can leave it silent),
 * is dropped and made again by the next ping. Pings that overlap share one query.
 */
function healthConnection(url: string): { ping(): Promise<void>; close(): Promise<void> } {
  let client: Promise<Pg.Client> | null = null;
  let pinging: Promise<void> | null = null;
  const drop = (failed: Promise<Pg.Client>) => {
    if (client === failed) client = null;
    void failed.then((c) => c.end()).catch(() => undefined);
  };
  const connect = (): Promise<Pg.Client> => {
    const fresh = new (loadPg().Client)({ connectionString: url, connectionTimeoutMillis: PING_TIMEOUT_MS, keepAlive: true });
    const connecting = fresh.connect().then(() => fresh);
    // Lost while idle (a server restart): dropped, and the next ping connects again.
    fresh.on('error', () => drop(connecting));
    return connecting;
  };
  const pingOnce = async () => {
    const current = (client ??= connect());
    const query = current.then((c) => c.query('select 1'));
    try {
      if (!(await settledWithin(query, PING_TIMEOUT_MS))) throw new Error(`the database did not answer within ${PING_TIMEOUT_MS} ms`);
      await query;
    } catch (err) {
      drop(current);
      throw err;
    }
  };
  return {
    ping: () => (pinging ??= pingOnce().finally(() => (pinging = null))),
    // Bounded: ending a connection the server has gone silent on would wait for the operating system to give up.
    close: async () => {
      const current = client;
      client = null;
      if (current) await settledWithin(current.then((c) => c.end()), PING_TIMEOUT_MS);
    },
  };
}

/** `onError`: the pool lost an idle connection (server restart, failover); it reconnects on next use. */
export function openDatabase(target: DatabaseTarget, onError: (err: Error) => void = () => undefined): DatabaseHandle {
  if (target.kind === 'postgres') {
    // pg applies this bound to connecting and to waiting for a free pooled connection alike: generous enough for a
    // busy pool, bounded so requests, readiness checks and shutdown do not hang on an unreachable server.
    const pool = new (loadPg().Pool)({ connectionString: target.url, max: target.poolSize, connectionTimeoutMillis: 15_000 });
    pool.on('error', onError);
    // The pool listens for errors of idle clients only. A client checked out between two statements of a transaction
    // that loses its server would emit 'error' with nobody listening, which crashes the process; its pending or next
    // statement fails anyway and the pool drops it, so this listener only has to exist.
    pool.on('connect', (client) => client.on('error', () => undefined));
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    const health = healthConnection(target.url);
    return {
      db,
      dialect: 'postgres',
      transaction: (fn) => db.transaction().execute(fn),
      ping: health.ping,
      close: async () => {
        await health.close();
        await db.destroy();
      },
    };
  }
  if (target.file !== ':memory:') fs.mkdirSync(path.dirname(target.file), { recursive: true });
  const SQLite = require('better-sqlite3') as typeof BetterSqlite3;
  const sqlite = new SQLite(target.file);
  // WAL lets readers run beside the single writer; busy_timeout waits for a lock instead of failing.
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('synchronous = NORMAL');
  // SQLite's own lower() folds ASCII letters only; searches that ignore case use this one (PostgreSQL's lower() is
  // Unicode-aware already). No index may use it: an index must not depend on a function the database does not know.
  sqlite.function('unicode_lower', { deterministic: true }, (value: unknown) => (typeof value === 'string' ? value.toLowerCase() : value));
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
  return {
    db,
    dialect: 'sqlite',
    transaction: (fn) => db.transaction().execute(fn),
    ping: async () => void (await sql`select 1`.execute(db)),
    close: () => db.destroy(),
  };
}
