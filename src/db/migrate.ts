import { setTimeout as sleep } from 'node:timers/promises';
import { Migrator, type Migration, type MigrationProvider } from 'kysely';
import type { Db, Dialect } from './types.js';
import { migration0001Identity } from './migrations/0001_identity.js';
import { migration0002SessionVersion } from './migrations/0002_session_version.js';
import { migration0003Inference } from './migrations/0003_inference.js';
import { migration0004Files } from './migrations/0004_files.js';
import { migration0005Batches } from './migrations/0005_batches.js';
import { migration0006Guardrails } from './migrations/0006_guardrails.js';
import { migration0007Agents } from './migrations/0007_agents.js';
import { migration0008AgentRevisions } from './migrations/0008_agent_revisions.js';
import { migration0009BatchRunningIndex } from './migrations/0009_batch_running_index.js';
import { migration0010UsageSessionIndex } from './migrations/0010_usage_session_index.js';
import { migration0011UserEmailNfc } from './migrations/0011_user_email_nfc.js';
import { migration0012ModelGuardrailLinks } from './migrations/0012_model_guardrail_links.js';

/** Forward-only migrations, the same files for SQLite and PostgreSQL, applied in name order. */
function migrations(dialect: Dialect): Record<string, Migration> {
  return {
    '0001_identity': migration0001Identity(dialect),
    '0002_session_version': migration0002SessionVersion,
    '0003_inference': migration0003Inference(dialect),
    '0004_files': migration0004Files(dialect),
    '0005_batches': migration0005Batches(dialect),
    '0006_guardrails': migration0006Guardrails(dialect),
    '0007_agents': migration0007Agents(dialect),
    '0008_agent_revisions': migration0008AgentRevisions,
    '0009_batch_running_index': migration0009BatchRunningIndex,
    '0010_usage_session_index': migration0010UsageSessionIndex,
    '0011_user_email_nfc': migration0011UserEmailNfc,
    '0012_model_guardrail_links': migration0012ModelGuardrailLinks,
  };
}

const SQLITE_ATTEMPTS = 3;

/** The migrator of Waygate's schema (tests also use it to stop at an older migration and upgrade from there). */
export function schemaMigrator(db: Db, dialect: Dialect): Migrator {
  const provider: MigrationProvider = { getMigrations: async () => migrations(dialect) };
  return new Migrator({
    db,
    provider,
    migrationTableName: 'waygate_migrations',
    migrationLockTableName: 'waygate_migrations_lock',
    // Names are ASCII; Kysely's default localeCompare loads ICU collation data, about 6 MB of memory for good.
    nameComparator: (a, b) => (a < b ? -1 : a > b ? 1 : 0),
  });
}

export async function migrateToLatest(db: Db, dialect: Dialect): Promise<void> {
  const migrator = schemaMigrator(db, dialect);
  for (let attempt = 1; ; attempt++) {
    const { error, results } = await migrator.migrateToLatest();
    if (!error) return;
    // Kysely's SQLite migration lock only guards one connection. When two processes start on one file, the loser's
    // transaction fails after the winner commits; reading the migration table again then finds the work done.
    if (dialect === 'sqlite' && attempt < SQLITE_ATTEMPTS) {
      await sleep(50 * attempt);
      continue;
    }
    const failed = results?.find((r) => r.status === 'Error')?.migrationName;
    const reason = error instanceof Error ? error.message : String(error);
    // Without a failed migration the database was not reached (or refused the migration table) at all.
    throw new Error(failed ? `Database migration ${failed} failed: ${reason}` : `Database migrations could not run: ${reason}`);
  }
}
