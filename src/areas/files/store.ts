import type { Selectable } from 'kysely';
import type { Transactor } from '../../db/index.js';
import type { Db, Dialect, FileBucketsTable, FileObjectsTable } from '../../db/types.js';
import type { ProjectScope } from '../../http/principal.js';
import type { StorageKind } from './storage/types.js';

export interface BucketRecord {
  id: string;
  tenantId: string;
  projectId: string;
  key: string;
  name: string;
  createdAt: number;
}

export interface ObjectRecord {
  id: string;
  bucketId: string;
  key: string;
  size: number;
  contentType: string;
  sha256: string;
  storage: StorageKind;
  blobId: string;
  createdAt: number;
}

export interface ObjectPage {
  prefix?: string;
  /** Only keys after this one (the last key of the previous page). */
  after?: string;
  limit: number;
}

function toBucket(row: Selectable<FileBucketsTable>): BucketRecord {
  return { id: row.id, tenantId: row.tenant_id, projectId: row.project_id, key: row.key, name: row.name, createdAt: Number(row.created_at) };
}

function toObject(row: Selectable<FileObjectsTable>): ObjectRecord {
  return {
    id: row.id,
    bucketId: row.bucket_id,
    key: row.object_key,
    size: Number(row.size),
    contentType: row.content_type,
    sha256: row.sha256,
    storage: row.storage as StorageKind,
    blobId: row.blob_id,
    createdAt: Number(row.created_at),
  };
}

function objectRow(record: ObjectRecord): FileObjectsTable {
  return {
    id: record.id,
    bucket_id: record.bucketId,
    object_key: record.key,
    size: record.size,
    content_type: record.contentType,
    sha256: record.sha256,
    storage: record.storage,
    blob_id: record.blobId,
    created_at: record.createdAt,
  };
}

const PUT_ATTEMPTS = 5;

/** Bucket and object metadata; the bytes are a BlobStorage's. */
export class FileStore {
  constructor(private readonly db: Db, private readonly dialect: Dialect, private readonly transaction: Transactor) {}

  /** Throws the database's unique violation when the project already has the key. */
  async insertBucket(record: BucketRecord): Promise<void> {
    await this.db
      .insertInto('file_buckets')
      .values({ id: record.id, tenant_id: record.tenantId, project_id: record.projectId, key: record.key, name: record.name, created_at: record.createdAt })
      .execute();
  }

  async findBucket(scope: ProjectScope, key: string): Promise<BucketRecord | null> {
    const row = await this.db
      .selectFrom('file_buckets')
      .selectAll()
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('key', '=', key)
      .executeTakeFirst();
    return row ? toBucket(row) : null;
  }

  async listBuckets(scope: ProjectScope): Promise<BucketRecord[]> {
    const rows = await this.db
      .selectFrom('file_buckets')
      .selectAll()
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .orderBy('key')
      .execute();
    return rows.map(toBucket);
  }

  async findObject(bucketId: string, key: string): Promise<ObjectRecord | null> {
    const row = await this.db.selectFrom('file_objects').selectAll().where('bucket_id', '=', bucketId).where('object_key', '=', key).executeTakeFirst();
    return row ? toObject(row) : null;
  }

  /** Up to `limit + 1` objects in key order, so the caller can tell whether there are more. */
  async listObjects(bucketId: string, page: ObjectPage): Promise<ObjectRecord[]> {
    let query = this.db.selectFrom('file_objects').selectAll().where('bucket_id', '=', bucketId);
    // substr counts characters (code points) in both databases, like [...text] and unlike text.length.
    if (page.prefix) query = query.where((eb) => eb(eb.fn('substr', ['object_key', eb.val(1), eb.val([...page.prefix!].length)]), '=', page.prefix!));
    if (page.after !== undefined) query = query.where('object_key', '>', page.after);
    const rows = await query.orderBy('object_key').limit(page.limit + 1).execute();
    return rows.map(toObject);
  }

  /**
   * Points the key at a new object (inserted, or replacing the one stored under it) in one transaction and returns
   * the replaced object, whose bytes the caller removes after the commit.
   */
  async putObject(record: ObjectRecord): Promise<ObjectRecord | null> {
    return this.transaction(async (trx) => {
      // A DELETE can remove the row between the insert that found it and the select: then insert again.
      for (let attempt = 1; ; attempt++) {
        const inserted = await trx
          .insertInto('file_objects')
          .values(objectRow(record))
          .onConflict((oc) => oc.columns(['bucket_id', 'object_key']).doNothing())
          .executeTakeFirst();
        if (Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0) return null;
        const previous = await trx
          .selectFrom('file_objects')
          .selectAll()
          .where('bucket_id', '=', record.bucketId)
          .where('object_key', '=', record.key)
          // SQLite has no row locks (its one writer is the lock).
          .$if(this.dialect === 'postgres', (qb) => qb.forUpdate())
          .executeTakeFirst();
        if (!previous) {
          if (attempt < PUT_ATTEMPTS) continue;
          throw new Error(`object ${record.key} kept vanishing while being replaced`);
        }
        const { id: _id, bucket_id: _bucket, object_key: _key, ...changes } = objectRow(record);
        await trx.updateTable('file_objects').set(changes).where('id', '=', previous.id).execute();
        return toObject(previous);
      }
    });
  }

  /** Removes the object row and returns it (its bytes are the caller's to remove), or null when there was none. */
  async deleteObject(bucketId: string, key: string): Promise<ObjectRecord | null> {
    return this.transaction(async (trx) => {
      const row = await trx
        .selectFrom('file_objects')
        .selectAll()
        .where('bucket_id', '=', bucketId)
        .where('object_key', '=', key)
        .$if(this.dialect === 'postgres', (qb) => qb.forUpdate())
        .executeTakeFirst();
      if (!row) return null;
      await trx.deleteFrom('file_objects').where('id', '=', row.id).execute();
      return toObject(row);
    });
  }
}
