import { sql, type Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../../src/db/index.js';
import { migrateToLatest, schemaMigrator } from '../../src/db/migrate.js';
import { BACKENDS } from '../helpers/app.js';
import { tempDatabases } from '../helpers/databases.js';

/** Tables as they were at 0007, which the current schema types no longer describe. */
type AnySchema = Kysely<Record<string, Record<string, unknown>>>;

const database = tempDatabases();

async function databaseAt0007(backend: (typeof BACKENDS)[number]): Promise<DatabaseHandle> {
  const handle = await database(backend);
  const { error } = await schemaMigrator(handle.db, handle.dialect).migrateTo('0007_agents');
  expect(error).toBeUndefined();
  return handle;
}

/** What a database made by the first agents release holds: an agent, a version with sealed secrets, one turn. */
async function seed0007(db: AnySchema): Promise<void> {
  const json = (value: unknown) => JSON.stringify(value);
  await db.insertInto('tenants').values({ id: 't1', name: 'T', created_at: 1 }).execute();
  await db.insertInto('projects').values({ id: 'p1', tenant_id: 't1', key: 'default', name: 'P', created_at: 1 }).execute();
  await db.insertInto('agents').values({
    id: 'a1', tenant_id: 't1', project_id: 'p1', key: 'helper-abc123', name: 'Helper', status: 'active',
    config: json({ kind: 'native', modelKey: 'local-chat' }), secrets: 'sealed-agent', metadata: json({}), created_at: 1, updated_at: 1,
  }).execute();
  await db.insertInto('agent_versions').values({
    id: 'v1', tenant_id: 't1', project_id: 'p1', agent_id: 'a1', number: 1, name: 'Helper', config: json({ kind: 'native' }), secrets: 'sealed-version', created_at: 2,
  }).execute();
  await db.insertInto('conversations').values({ id: 'c1', tenant_id: 't1', project_id: 'p1', agent_id: 'a1', created_at: 3, updated_at: 3 }).execute();
  await db.insertInto('conversation_messages').values([
    { id: 'm1', tenant_id: 't1', project_id: 'p1', conversation_id: 'c1', seq: 0, role: 'user', content: 'hi', created_at: 3 },
    { id: 'm2', tenant_id: 't1', project_id: 'p1', conversation_id: 'c1', seq: 1, role: 'assistant', content: 'hello', version: 1, created_at: 3 },
  ]).execute();
}

describe.each(BACKENDS)('upgrading agents from migration 0007 on %s', (backend) => {
  it('keeps agents, versions and conversations, gives agents a revision and takes the secrets out of versions', async () => {
    const handle = await databaseAt0007(backend);
    const db = handle.db as unknown as AnySchema;
    await seed0007(db);

    await migrateToLatest(handle.db, handle.dialect);

    expect(await db.selectFrom('agents').select(['id', 'revision', 'secrets']).execute()).toEqual([{ id: 'a1', revision: 0, secrets: 'sealed-agent' }]);
    const versions = await db.selectFrom('agent_versions').selectAll().execute();
    expect(versions).toHaveLength(1);
    expect(versions[0]).toMatchObject({ id: 'v1', number: 1 });
    expect(versions[0]).not.toHaveProperty('secrets');
    expect(await db.selectFrom('agent_conversations').select(['id', 'agent_id']).execute()).toEqual([{ id: 'c1', agent_id: 'a1' }]);
    expect(await db.selectFrom('agent_messages').select(['seq', 'content']).orderBy('seq').execute()).toEqual([
      { seq: 0, content: 'hi' }, { seq: 1, content: 'hello' },
    ]);
    // The renamed tables keep their rules: a message of a conversation that does not exist, or a repeated seq, is refused.
    const message = { tenant_id: 't1', project_id: 'p1', seq: 2, role: 'user', content: 'x', created_at: 4 };
    await expect(db.insertInto('agent_messages').values({ ...message, id: 'm3', conversation_id: 'nope' }).execute()).rejects.toThrow();
    await expect(db.insertInto('agent_messages').values({ ...message, id: 'm4', conversation_id: 'c1', seq: 1 }).execute()).rejects.toThrow();
    await expect(sql`select 1 from conversations`.execute(db)).rejects.toThrow();
  });
});
