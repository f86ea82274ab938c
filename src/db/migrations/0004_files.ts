import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../types.js';

/** The document store: buckets, the objects in them, and object bytes for the database storage. */
export function migration0004Files(dialect: Dialect): Migration {
  const bigint = dialect === 'postgres' ? 'bigint' : 'integer';
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('file_buckets')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
        .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('created_at', bigint, (c) => c.notNull())
        .addUniqueConstraint('file_buckets_project_key_unique', ['tenant_id', 'project_id', 'key'])
        .execute();

      await db.schema
        .createTable('file_objects')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('bucket_id', 'text', (c) => c.notNull().references('file_buckets.id'))
        .addColumn('object_key', 'text', (c) => c.notNull())
        .addColumn('size', bigint, (c) => c.notNull())
        .addColumn('content_type', 'text', (c) => c.notNull())
        .addColumn('sha256', 'text', (c) => c.notNull())
        // Where the bytes are (`disk` or `database`) and under which blob id: objects stay readable when the
        // configured storage changes.
        .addColumn('storage', 'text', (c) => c.notNull())
        .addColumn('blob_id', 'text', (c) => c.notNull())
        .addColumn('created_at', bigint, (c) => c.notNull())
        .addUniqueConstraint('file_objects_bucket_key_unique', ['bucket_id', 'object_key'])
        .execute();

      await db.schema
        .createTable('file_blobs')
        .addColumn('blob_id', 'text', (c) => c.notNull())
        .addColumn('seq', 'integer', (c) => c.notNull())
        .addColumn('data', dialect === 'postgres' ? 'bytea' : 'blob', (c) => c.notNull())
        .addPrimaryKeyConstraint('file_blobs_pk', ['blob_id', 'seq'])
        .execute();
    },
  };
}
