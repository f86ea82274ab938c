import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../types.js';

/** The model registry, project budgets and rate limits, usage events and their hourly rollups. */
export function migration0003Inference(dialect: Dialect): Migration {
  const json = sql.raw(dialect === 'postgres' ? 'jsonb' : 'text');
  const bigint = dialect === 'postgres' ? 'bigint' : 'integer';
  const double = sql.raw(dialect === 'postgres' ? 'double precision' : 'real');
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('models')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
        .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('provider_type', 'text', (c) => c.notNull())
        .addColumn('provider', json, (c) => c.notNull())
        // AES-256-GCM sealed JSON of the API key and header values; never selected for views.
        .addColumn('provider_secrets', 'text')
        .addColumn('upstream_model', 'text', (c) => c.notNull())
        .addColumn('capabilities', json, (c) => c.notNull())
        .addColumn('pricing', json)
        .addColumn('guardrails', json, (c) => c.notNull())
        .addColumn('fallbacks', json, (c) => c.notNull())
        .addColumn('created_at', bigint, (c) => c.notNull())
        .addColumn('updated_at', bigint, (c) => c.notNull())
        .addUniqueConstraint('models_project_key_unique', ['tenant_id', 'project_id', 'key'])
        .execute();

      await db.schema.alterTable('projects').addColumn('budget', json).execute();
      await db.schema.alterTable('projects').addColumn('rate_limit', json).execute();
      // Budget counters are keyed by it, so a changed budget starts again from the stored usage.
      await db.schema.alterTable('projects').addColumn('limits_updated_at', bigint, (c) => c.notNull().defaultTo(0)).execute();

      await db.schema
        .createTable('usage_events')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('tenant_id', 'text', (c) => c.notNull())
        .addColumn('project_id', 'text', (c) => c.notNull())
        .addColumn('token_id', 'text')
        .addColumn('user_id', 'text')
        .addColumn('model', 'text', (c) => c.notNull())
        .addColumn('provider', 'text', (c) => c.notNull())
        .addColumn('service', 'text', (c) => c.notNull())
        .addColumn('endpoint', 'text', (c) => c.notNull())
        .addColumn('input_tokens', 'integer', (c) => c.notNull())
        .addColumn('output_tokens', 'integer', (c) => c.notNull())
        .addColumn('total_tokens', 'integer', (c) => c.notNull())
        .addColumn('cost', double, (c) => c.notNull())
        .addColumn('currency', 'text', (c) => c.notNull())
        .addColumn('latency_ms', double, (c) => c.notNull())
        .addColumn('upstream_latency_ms', double, (c) => c.notNull())
        .addColumn('status', 'integer', (c) => c.notNull())
        .addColumn('request_id', 'text', (c) => c.notNull())
        .addColumn('session_id', 'text')
        .addColumn('streamed', 'integer', (c) => c.notNull())
        .addColumn('created_at', bigint, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('usage_events_project_time_idx').on('usage_events').columns(['tenant_id', 'project_id', 'created_at']).execute();
      await db.schema
        .createIndex('usage_events_session_idx')
        .on('usage_events')
        .columns(['tenant_id', 'project_id', 'session_id', 'created_at'])
        .execute();

      // One row per project, period and attribution, hourly and daily: analytics read these instead of every event.
      for (const [table, column] of [['usage_hourly', 'hour'], ['usage_daily', 'day']] as const) {
        await db.schema
          .createTable(table)
          .addColumn('tenant_id', 'text', (c) => c.notNull())
          .addColumn('project_id', 'text', (c) => c.notNull())
          .addColumn(column, bigint, (c) => c.notNull())
          .addColumn('model', 'text', (c) => c.notNull())
          .addColumn('service', 'text', (c) => c.notNull())
          .addColumn('token_id', 'text', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('requests', bigint, (c) => c.notNull())
          .addColumn('errors', bigint, (c) => c.notNull())
          .addColumn('input_tokens', bigint, (c) => c.notNull())
          .addColumn('output_tokens', bigint, (c) => c.notNull())
          .addColumn('cost', double, (c) => c.notNull())
          .addColumn('latency_ms', double, (c) => c.notNull())
          .addColumn('upstream_latency_ms', double, (c) => c.notNull())
          .addPrimaryKeyConstraint(`${table}_pk`, ['tenant_id', 'project_id', column, 'model', 'service', 'token_id', 'user_id'])
          .execute();
      }
    },
  };
}
