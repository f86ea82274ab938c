import { sql, type Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../../src/db/index.js';
import { migrateToLatest, schemaMigrator } from '../../src/db/migrate.js';
import { BACKENDS } from '../helpers/app.js';
import { tempDatabases } from '../helpers/databases.js';

const database = tempDatabases();

/** The indexes of batch_items by name, with their definitions (SQLite's `sql`, PostgreSQL's `indexdef`). */
async function itemIndexes(handle: DatabaseHandle): Promise<Map<string, string>> {
  const db = handle.db as unknown as Kysely<unknown>;
  const query =
    handle.dialect === 'postgres'
      ? sql<{ name: string; def: string }>`select indexname as name, indexdef as def from pg_indexes where tablename = 'batch_items'`
      : sql<{ name: string; def: string | null }>`select name, sql as def from sqlite_master where type = 'index' and tbl_name = 'batch_items'`;
  const { rows } = await query.execute(db);
  return new Map(rows.map((r) => [r.name, r.def ?? '']));
}

describe.each(BACKENDS)('the running-items lease index on %s', (backend) => {
  it('replaces the index of every item by status in a database made by the first batches release', async () => {
    const handle = await database(backend);
    const { error } = await schemaMigrator(handle.db, handle.dialect).migrateTo('0005_batches');
    expect(error).toBeUndefined();
    expect((await itemIndexes(handle)).has('batch_items_status_lease_idx')).toBe(true);

    await migrateToLatest(handle.db, handle.dialect);

    const indexes = await itemIndexes(handle);
    expect(indexes.has('batch_items_status_lease_idx')).toBe(false);
    expect(indexes.get('batch_items_running_lease_idx')).toMatch(/where.*status.*=\s*'running'/i);
  });

  it('is there, partial, in a new database', async () => {
    const handle = await database(backend);
    await migrateToLatest(handle.db, handle.dialect);
    const indexes = await itemIndexes(handle);
    expect(indexes.has('batch_items_status_lease_idx')).toBe(false);
    expect(indexes.get('batch_items_running_lease_idx')).toMatch(/where.*status.*=\s*'running'/i);
  });
});
