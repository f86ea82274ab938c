import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect, sql, type CompiledQuery } from 'kysely';
import { describe, expect, it } from 'vitest';
import { AnalyticsStore } from '../../src/areas/analytics/store.js';
import { migrateToLatest, schemaMigrator } from '../../src/db/migrate.js';
import type { Database } from '../../src/db/types.js';
import { BACKENDS } from '../helpers/app.js';
import { tableIndexes, tempDatabases } from '../helpers/databases.js';

const database = tempDatabases();

describe.each(BACKENDS)('the usage session index on %s', (backend) => {
  it('holds only events with a session, in an upgraded database and in a new one', async () => {
    const upgraded = await database(backend);
    expect((await schemaMigrator(upgraded.db, upgraded.dialect).migrateTo('0009_batch_running_index')).error).toBeUndefined();
    expect((await tableIndexes(upgraded, 'usage_events')).get('usage_events_session_idx')).not.toMatch(/where/i);
    await migrateToLatest(upgraded.db, upgraded.dialect);
    for (const handle of [upgraded, await database(backend)]) {
      if (handle !== upgraded) await migrateToLatest(handle.db, handle.dialect);
      const indexes = await tableIndexes(handle, 'usage_events');
      expect(indexes.has('usage_events_session_idx')).toBe(false);
      expect(indexes.get('usage_events_sessions_idx')).toMatch(/where.*session_id.*is not null/i);
    }
  });
});

describe('the session queries on SQLite', () => {
  it('read the partial session index (SQLite uses it only when a query implies its condition)', async () => {
    const handle = await database('sqlite');
    await migrateToLatest(handle.db, handle.dialect);
    const file = (await sql<{ file: string }>`select file from pragma_database_list where name = 'main'`.execute(handle.db)).rows[0]!.file;
    const sqlite = new BetterSqlite3(file);
    const queries: CompiledQuery[] = [];
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }), log: (event) => void queries.push(event.query) });
    try {
      const store = new AnalyticsStore(db, 'sqlite');
      const scope = { tenantId: 'ten_1', projectId: 'prj_1' };
      // No session among the newest events: the session index is grouped.
      await store.recentSessionIds(scope, 0, Date.now(), 10);
      await store.sessions(scope, ['s1', 's2'], 0, Date.now());
      const plans = queries.slice(1).map((q) => sqlite.prepare(`explain query plan ${q.sql}`).all(...(q.parameters as unknown[])).map((row) => (row as { detail: string }).detail).join('; '));
      expect(plans).toHaveLength(2);
      for (const plan of plans) expect(plan).toContain('usage_events_sessions_idx');
    } finally {
      await db.destroy();
    }
  });
});
