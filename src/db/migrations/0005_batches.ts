import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../types.js';

/** Batches, their items (durable rows that workers claim with leases) and the registry of batch workers. */
export function migration0005Batches(dialect: Dialect): Migration {
  const json = sql.raw(dialect === 'postgres' ? 'jsonb' : 'text');
  const bigint = dialect === 'postgres' ? 'bigint' : 'integer';
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('batches')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
        .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
        .addColumn('endpoint', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('completion_window', 'text', (c) => c.notNull())
        .addColumn('input_bucket_key', 'text')
        .addColumn('input_object_key', 'text')
        .addColumn('output_bucket_key', 'text')
        .addColumn('output_object_key', 'text')
        .addColumn('error_message', 'text')
        .addColumn('metadata', json, (c) => c.notNull())
        // The submitting token (its budget is consumed) and its creator, for usage attribution.
        .addColumn('token_id', 'text')
        .addColumn('user_id', 'text')
        // request_counts and usage, kept in the same transactions as the item states they count.
        .addColumn('total', 'integer', (c) => c.notNull())
        .addColumn('completed', 'integer', (c) => c.notNull())
        .addColumn('failed', 'integer', (c) => c.notNull())
        .addColumn('cancelled', 'integer', (c) => c.notNull())
        .addColumn('input_tokens', bigint, (c) => c.notNull())
        .addColumn('output_tokens', bigint, (c) => c.notNull())
        // Who writes the output of a finished batch, until when: one instance finalizes, a crashed one is replaced.
        .addColumn('finalizer', 'text')
        .addColumn('finalizer_until', bigint)
        .addColumn('created_at', bigint, (c) => c.notNull())
        .addColumn('started_at', bigint)
        .addColumn('completed_at', bigint)
        .addColumn('cancelled_at', bigint)
        .execute();
      await db.schema.createIndex('batches_project_created_idx').on('batches').columns(['tenant_id', 'project_id', 'created_at', 'id']).execute();
      // Workers look for the few batches that still have work; terminal batches are the bulk of the table.
      await db.schema.createIndex('batches_status_idx').on('batches').columns(['status', 'created_at']).execute();

      await db.schema
        .createTable('batch_items')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('batch_id', 'text', (c) => c.notNull().references('batches.id'))
        .addColumn('tenant_id', 'text', (c) => c.notNull())
        .addColumn('project_id', 'text', (c) => c.notNull())
        .addColumn('idx', 'integer', (c) => c.notNull())
        .addColumn('custom_id', 'text')
        // JSON text: passed to the model as it was submitted, never queried inside.
        .addColumn('request_body', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull())
        // Not before this moment (retry backoff, rate-limit waits).
        .addColumn('run_after', bigint, (c) => c.notNull())
        // The worker running the item and until when its lease holds; an expired lease puts the item back.
        .addColumn('locked_by', 'text')
        .addColumn('locked_until', bigint)
        .addColumn('response_status_code', 'integer')
        // The model's JSON answer as text, byte for byte what the provider returned.
        .addColumn('response_body', 'text')
        .addColumn('error_message', 'text')
        .addColumn('input_tokens', 'integer')
        .addColumn('output_tokens', 'integer')
        .addColumn('started_at', bigint)
        .addColumn('ended_at', bigint)
        .addUniqueConstraint('batch_items_batch_idx_unique', ['batch_id', 'idx'])
        .execute();
      // Claims (pending by position), item lists with a status filter, results.
      await db.schema.createIndex('batch_items_batch_status_idx').on('batch_items').columns(['batch_id', 'status', 'idx']).execute();
      // Expired leases across every batch, and the queue health check.
      await db.schema.createIndex('batch_items_status_lease_idx').on('batch_items').columns(['status', 'locked_until']).execute();

      await db.schema
        .createTable('batch_workers')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('hostname', 'text', (c) => c.notNull())
        .addColumn('pid', 'integer', (c) => c.notNull())
        .addColumn('concurrency', 'integer', (c) => c.notNull())
        .addColumn('started_at', bigint, (c) => c.notNull())
        .addColumn('heartbeat_at', bigint, (c) => c.notNull())
        .execute();
    },
  };
}
