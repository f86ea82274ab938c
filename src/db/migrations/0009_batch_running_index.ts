import { sql, type Kysely, type Migration } from 'kysely';

/**
 * Expired leases are looked up in a partial index of running items (a few per worker), instead of 0005's index of
 * every item by status: the thousands of pending and finished items cost nothing to keep indexed. Queries must spell
 * out status = 'running' literally for SQLite to use it. Guarded both ways: a database made between the first batches
 * release and this migration may already have the partial index (0005 briefly created it) and not the old one.
 */
export const migration0009BatchRunningIndex: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.dropIndex('batch_items_status_lease_idx').ifExists().execute();
    await db.schema.createIndex('batch_items_running_lease_idx').ifNotExists().on('batch_items').column('locked_until').where(sql.ref('status'), '=', 'running').execute();
  },
};
