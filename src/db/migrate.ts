import { Migrator, type Migration, type MigrationProvider } from 'kysely';
import type { Db, Dialect } from './types.js';
import { migration0001Identity } from './migrations/0001_identity.js';

/** Forward-only migrations, the same files for SQLite and PostgreSQL, applied in name order. */
function migrations(dialect: Dialect): Record<string, Migration> {
  return {
    '0001_identity': migration0001Identity(dialect),
  };
}

export async function migrateToLatest(db: Db, dialect: Dialect): Promise<void> {
  const provider: MigrationProvider = { getMigrations: async () => migrations(dialect) };
  const migrator = new Migrator({ db, provider, migrationTableName: 'waygate_migrations', migrationLockTableName: 'waygate_migrations_lock' });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new Error(`Database migration ${failed} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}
