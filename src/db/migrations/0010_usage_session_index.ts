import { sql, type Kysely, type Migration } from 'kysely';

/**
 * The session index of usage events holds only events that belong to a session (0003's indexed every event). Most
 * calls name no session, and each indexed event was one more b-tree insert on the metering path: about a fifth of
 * SQLite's work per event, and a fifth of the table's size on disk. Queries that use it must imply `session_id is
 * not null` (`is not null` itself, or `session_id in (...)`): SQLite uses a partial index only then.
 * The new index is built first, under a new name, and the old one dropped after: on PostgreSQL dropping an index
 * locks its table against reads too, and so only for a moment at the end, not for the whole build.
 */
export const migration0010UsageSessionIndex: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createIndex('usage_events_sessions_idx')
      .ifNotExists()
      .on('usage_events')
      .columns(['tenant_id', 'project_id', 'session_id', 'created_at'])
      .where(sql.ref('session_id'), 'is not', null)
      .execute();
    await db.schema.dropIndex('usage_events_session_idx').ifExists().execute();
  },
};
