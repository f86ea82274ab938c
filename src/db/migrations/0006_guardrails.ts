import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../types.js';

/** Guardrail configurations and the record of every evaluation (masked text only). */
export function migration0006Guardrails(dialect: Dialect): Migration {
  const json = sql.raw(dialect === 'postgres' ? 'jsonb' : 'text');
  const bigint = dialect === 'postgres' ? 'bigint' : 'integer';
  const double = sql.raw(dialect === 'postgres' ? 'double precision' : 'real');
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('guardrails')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
        .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('target', 'text', (c) => c.notNull())
        .addColumn('config', json, (c) => c.notNull())
        .addColumn('model_key', 'text')
        .addColumn('fail_mode', 'text', (c) => c.notNull())
        .addColumn('enabled', 'integer', (c) => c.notNull())
        .addColumn('created_at', bigint, (c) => c.notNull())
        .addColumn('updated_at', bigint, (c) => c.notNull())
        .addUniqueConstraint('guardrails_project_key_unique', ['tenant_id', 'project_id', 'key'])
        .execute();

      await db.schema
        .createTable('guardrail_evaluations')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('tenant_id', 'text', (c) => c.notNull())
        .addColumn('project_id', 'text', (c) => c.notNull())
        .addColumn('guardrail_key', 'text', (c) => c.notNull())
        .addColumn('guardrail_type', 'text', (c) => c.notNull())
        // evaluate (the API), input or output (enforced on a model call).
        .addColumn('stage', 'text', (c) => c.notNull())
        .addColumn('model', 'text')
        .addColumn('request_id', 'text', (c) => c.notNull())
        .addColumn('passed', 'integer', (c) => c.notNull())
        .addColumn('action', 'text', (c) => c.notNull())
        // What the evaluation did to the call: blocked, redacted, flagged, or null (passed, or the evaluate API).
        .addColumn('outcome', 'text')
        .addColumn('categories', json, (c) => c.notNull())
        // The start of the evaluated text with every PII finding redacted: never a raw value.
        .addColumn('masked_text', 'text', (c) => c.notNull())
        .addColumn('latency_ms', double, (c) => c.notNull())
        .addColumn('created_at', bigint, (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('guardrail_evaluations_key_time_idx')
        .on('guardrail_evaluations')
        .columns(['tenant_id', 'project_id', 'guardrail_key', 'created_at'])
        .execute();
    },
  };
}
