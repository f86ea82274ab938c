import { describe, expect, it } from 'vitest';
import { migrateToLatest, schemaMigrator } from '../../src/db/migrate.js';
import { BACKENDS } from '../helpers/app.js';
import { tableIndexes, tempDatabases } from '../helpers/databases.js';

const database = tempDatabases();

describe.each(BACKENDS)('the running-items lease index on %s', (backend) => {
  it('replaces the index of every item by status in a database made by the first batches release', async () => {
    const handle = await database(backend);
    const { error } = await schemaMigrator(handle.db, handle.dialect).migrateTo('0005_batches');
    expect(error).toBeUndefined();
    expect((await tableIndexes(handle, 'batch_items')).has('batch_items_status_lease_idx')).toBe(true);

    await migrateToLatest(handle.db, handle.dialect);

    const indexes = await tableIndexes(handle, 'batch_items');
    expect(indexes.has('batch_items_status_lease_idx')).toBe(false);
    expect(indexes.get('batch_items_running_lease_idx')).toMatch(/where.*status.*=\s*'running'/i);
  });

  it('is there, partial, in a new database', async () => {
    const handle = await database(backend);
    await migrateToLatest(handle.db, handle.dialect);
    const indexes = await tableIndexes(handle, 'batch_items');
    expect(indexes.has('batch_items_status_lease_idx')).toBe(false);
    expect(indexes.get('batch_items_running_lease_idx')).toMatch(/where.*status.*=\s*'running'/i);
  });
});
