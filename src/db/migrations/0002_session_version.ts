import type { Kysely, Migration } from 'kysely';

/** users.session_version: sessions carry it, and bumping it (logout, password reset) ends them all. */
export const migration0002SessionVersion: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('users').addColumn('session_version', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  },
};
