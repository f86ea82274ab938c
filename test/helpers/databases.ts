import { sql, type Kysely } from 'kysely';
import { afterEach } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { openDatabase, type DatabaseHandle } from '../../src/db/index.js';
import { tempDeployment, type Backend } from './app.js';

/**
 * Opens empty databases (a SQLite file, or a fresh PostgreSQL database) with no migration run, for tests that build
 * a schema step by step; each is closed and removed after its test.
 */
export function tempDatabases(): (backend: Backend) => Promise<DatabaseHandle> {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()!();
  });
  return async (backend) => {
    const deployment = await tempDeployment(backend);
    cleanups.push(deployment.remove);
    const handle = openDatabase(loadConfig({ WAYGATE_DATA_DIR: deployment.dataDir, DATABASE_URL: deployment.databaseUrl }).database);
    cleanups.push(() => handle.close());
    return handle;
  };
}

/** The indexes of a table by name, with their definitions (SQLite's `sql`, PostgreSQL's `indexdef`). */
export async function tableIndexes(handle: DatabaseHandle, table: string): Promise<Map<string, string>> {
  const db = handle.db as unknown as Kysely<unknown>;
  const query =
    handle.dialect === 'postgres'
      ? sql<{ name: string; def: string }>`select indexname as name, indexdef as def from pg_indexes where tablename = ${table}`
      : sql<{ name: string; def: string | null }>`select name, sql as def from sqlite_master where type = 'index' and tbl_name = ${table}`;
  const { rows } = await query.execute(db);
  return new Map(rows.map((r) => [r.name, r.def ?? '']));
}
