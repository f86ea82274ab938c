import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../types.js';

/** Agents, their published versions, and the conversations held with them. */
export function migration0007Agents(dialect: Dialect): Migration {
  const json = sql.raw(dialect === 'postgres' ? 'jsonb' : 'text');
  const bigint = dialect === 'postgres' ? 'bigint' : 'integer';
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('agents')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
        .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('description', 'text')
        .addColumn('status', 'text', (c) => c.notNull())
        // The configuration without its secrets; those are sealed (AES-256-GCM) apart and never selected for views.
        .addColumn('config', json, (c) => c.notNull())
        .addColumn('secrets', 'text')
        .addColumn('metadata', json, (c) => c.notNull())
        .addColumn('created_at', bigint, (c) => c.notNull())
        .addColumn('updated_at', bigint, (c) => c.notNull())
        // Deleted agents answer 404 but keep their versions and conversations (for audit).
        .addColumn('deleted_at', bigint)
        .addUniqueConstraint('agents_project_key_unique', ['tenant_id', 'project_id', 'key'])
        .execute();

      await db.schema
        .createTable('agent_versions')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('tenant_id', 'text', (c) => c.notNull())
        .addColumn('project_id', 'text', (c) => c.notNull())
        .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id'))
        .addColumn('number', 'integer', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('description', 'text')
        .addColumn('config', json, (c) => c.notNull())
        .addColumn('secrets', 'text')
        .addColumn('changelog', 'text')
        .addColumn('created_at', bigint, (c) => c.notNull())
        .addUniqueConstraint('agent_versions_number_unique', ['agent_id', 'number'])
        .execute();

      await db.schema
        .createTable('conversations')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('tenant_id', 'text', (c) => c.notNull())
        .addColumn('project_id', 'text', (c) => c.notNull())
        .addColumn('agent_id', 'text', (c) => c.notNull().references('agents.id'))
        // What an external agent calls this conversation (an A2A contextId), to continue it there.
        .addColumn('remote_context', 'text')
        .addColumn('created_at', bigint, (c) => c.notNull())
        .addColumn('updated_at', bigint, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('conversations_agent_idx').on('conversations').columns(['tenant_id', 'project_id', 'agent_id', 'created_at']).execute();

      await db.schema
        .createTable('conversation_messages')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('tenant_id', 'text', (c) => c.notNull())
        .addColumn('project_id', 'text', (c) => c.notNull())
        .addColumn('conversation_id', 'text', (c) => c.notNull().references('conversations.id'))
        .addColumn('seq', 'integer', (c) => c.notNull())
        .addColumn('role', 'text', (c) => c.notNull())
        .addColumn('content', 'text', (c) => c.notNull())
        .addColumn('input_tokens', 'integer')
        .addColumn('output_tokens', 'integer')
        // The published version that answered (assistant messages).
        .addColumn('version', 'integer')
        .addColumn('created_at', bigint, (c) => c.notNull())
        .addUniqueConstraint('conversation_messages_seq_unique', ['conversation_id', 'seq'])
        .execute();
    },
  };
}
