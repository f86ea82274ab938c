import type { Kysely, Migration } from 'kysely';

/**
 * Agents after review: a revision per agent (a change made from a stale read is refused and made again, so concurrent
 * changes never lose one another); versions keep no secrets (a version calls with the agent's current key, so a
 * rotated or removed key is gone from every version at once); conversation tables named for their area.
 */
export const migration0008AgentRevisions: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('agents').addColumn('revision', 'integer', (c) => c.notNull().defaultTo(0)).execute();
    await db.schema.alterTable('agent_versions').dropColumn('secrets').execute();
    await db.schema.alterTable('conversations').renameTo('agent_conversations').execute();
    await db.schema.alterTable('conversation_messages').renameTo('agent_messages').execute();
    // SQLite cannot rename an index; dropped and made again on both databases alike.
    await db.schema.dropIndex('conversations_agent_idx').execute();
    await db.schema.createIndex('agent_conversations_agent_idx').on('agent_conversations').columns(['tenant_id', 'project_id', 'agent_id', 'created_at']).execute();
    // The unique constraints of 0007 stay as they are: agent and conversation ids are unique across projects.
  },
};
