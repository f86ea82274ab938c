import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { isUniqueViolation } from '../../db/errors.js';
import { ERRORS } from '../../http/errors.js';
import type { ProjectScope } from '../../http/principal.js';
import { newId, timeOrderedId } from '../../platform/ids.js';
import { DAY_MS, HOUR_MS, pageSize } from '../../platform/time.js';
import type { BucketRecord, FileStore, ObjectRecord } from './store.js';
import type { BlobStorage, StorageKind } from './storage/types.js';

/** Lower-case letters, digits, `.`, `_` and `-`, starting with a letter or digit: safe in any URL path. */
export const BUCKET_KEY_PATTERN = '^[a-z0-9][a-z0-9._-]{0,62}$';
const BUCKET_KEY = new RegExp(BUCKET_KEY_PATTERN);
/** In UTF-8 bytes, as S3 counts them; it also keeps PostgreSQL's unique index on keys (at most 2,704 bytes) whole. */
const MAX_OBJECT_KEY_BYTES = 1024;
const MAX_CONTENT_TYPE_LENGTH = 255;
/** Control characters (C0, DEL and C1: U+0000-U+001F, U+007F-U+009F) have no business in a key and break log lines and headers. */
function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) return true;
  }
  return false;
}
/** A header value is sent back as it came only when it is visible ASCII (and spaces): Node reads other bytes as Latin-1 and writes them back otherwise. */
const VISIBLE_ASCII = /^[\x20-\x7e]*$/;
const DEFAULT_CONTENT_TYPE = 'application/octet-stream';
/** Bytes of an upload that never became an object are removed once it started this long ago: no upload lasts a day. */
export const ORPHAN_AGE_MS = DAY_MS;

export interface FilesSettings {
  /** Where new objects are written. */
  storage: StorageKind;
  /** Largest object accepted, in bytes. */
  maxObjectBytes: number;
}

export interface NewObject {
  contentType: string | undefined;
  /** Content-Length, when the client sent one: a body announced too large is refused before it is read. */
  declaredLength: number | undefined;
  body: AsyncIterable<Buffer>;
  /** Largest size accepted; default the upload limit. Objects Waygate writes itself (batch results) have none. */
  maxBytes?: number;
}

function validObjectKey(key: string): string {
  if (key.length === 0) throw ERRORS.validation('The object key is empty');
  if (Buffer.byteLength(key) > MAX_OBJECT_KEY_BYTES) throw ERRORS.validation(`The object key is longer than ${MAX_OBJECT_KEY_BYTES} bytes in UTF-8`);
  if (hasControlCharacter(key)) throw ERRORS.validation('The object key contains a control character');
  // HTTP clients rewrite "." and ".." segments and the router drops a trailing "/": such keys could not be read back.
  if (key.split('/').some((segment) => segment === '' || segment === '.' || segment === '..')) {
    throw ERRORS.validation('The object key has an empty, "." or ".." segment (a leading, trailing or double "/" included)');
  }
  return key;
}

/**
 * The project's document store: buckets of objects (any bytes, any content type), streamed in and out. Batches read
 * their input JSONL from here and write their results here.
 */
export class FileService {
  private sweepTimer: NodeJS.Timeout | null = null;
  /** The sweep under way, if any: close() waits for it rather than close the database under it. */
  private sweeping: Promise<void> | null = null;

  constructor(
    private readonly store: FileStore,
    private readonly storages: Record<StorageKind, BlobStorage>,
    private readonly settings: FilesSettings,
    private readonly log: Logger,
  ) {}

  /** Sweeps orphaned bytes now (in the background) and every hour. Safe on every instance at once. */
  start(): void {
    if (this.sweepTimer) return;
    const sweep = () => {
      this.sweeping ??= this.sweepOrphans()
        .then(() => undefined)
        .catch((err: unknown) => this.log.warn({ err }, 'document store: sweeping orphaned bytes failed'))
        .finally(() => (this.sweeping = null));
    };
    sweep();
    this.sweepTimer = setInterval(sweep, HOUR_MS);
    this.sweepTimer.unref();
  }

  async close(): Promise<void> {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    await this.sweeping;
  }

  /** Removes bytes of uploads a crash cut short (started more than ORPHAN_AGE_MS before `now`). */
  async sweepOrphans(now = Date.now()): Promise<number> {
    let removed = 0;
    for (const storage of Object.values(this.storages)) removed += await storage.sweep(now - ORPHAN_AGE_MS);
    if (removed > 0) this.log.info({ removed }, 'document store: removed bytes of unfinished uploads');
    return removed;
  }

  async createBucket(scope: ProjectScope, input: { key: string; name?: string }): Promise<BucketRecord> {
    if (!BUCKET_KEY.test(input.key)) {
      throw ERRORS.validation(`Bucket key "${input.key}" must be 1-63 lower-case letters, digits, ".", "_" or "-", starting with a letter or digit`);
    }
    const record: BucketRecord = { id: newId('bkt'), ...scope, key: input.key, name: input.name ?? input.key, createdAt: Date.now() };
    try {
      await this.store.insertBucket(record);
    } catch (err) {
      if (isUniqueViolation(err)) throw ERRORS.conflict(`Bucket "${input.key}" already exists in this project`);
      throw err;
    }
    return record;
  }

  listBuckets(scope: ProjectScope): Promise<BucketRecord[]> {
    return this.store.listBuckets(scope);
  }

  /** Another project's bucket is a 404 like a missing one. */
  async bucket(scope: ProjectScope, key: string): Promise<BucketRecord> {
    const bucket = await this.store.findBucket(scope, key);
    if (!bucket) throw ERRORS.notFound('Bucket', key);
    return bucket;
  }

  /**
   * Streams the body to storage while counting and hashing it; stores (or replaces) the object only once every byte
   * is written. Beyond the size limit: 413, and nothing is kept.
   */
  async putObject(scope: ProjectScope, bucketKey: string, objectKey: string, input: NewObject): Promise<{ bucket: BucketRecord; object: ObjectRecord }> {
    const bucket = await this.bucket(scope, bucketKey);
    validObjectKey(objectKey);
    const limit = input.maxBytes ?? this.settings.maxObjectBytes;
    if (input.declaredLength !== undefined && input.declaredLength > limit) throw ERRORS.bodyTooLarge(limit);
    if (input.contentType !== undefined && input.contentType.length > MAX_CONTENT_TYPE_LENGTH) {
      throw ERRORS.validation(`Content-Type is longer than ${MAX_CONTENT_TYPE_LENGTH} characters`);
    }
    if (input.contentType !== undefined && !VISIBLE_ASCII.test(input.contentType)) {
      throw ERRORS.validation('Content-Type may hold only visible ASCII characters and spaces');
    }
    const hash = createHash('sha256');
    let size = 0;
    async function* measured(): AsyncGenerator<Buffer> {
      for await (const chunk of input.body) {
        size += chunk.length;
        if (size > limit) throw ERRORS.bodyTooLarge(limit);
        hash.update(chunk);
        yield chunk;
      }
    }
    const storage = this.storages[this.settings.storage];
    const blobId = timeOrderedId('blob');
    await storage.write(blobId, measured());
    const object: ObjectRecord = {
      id: newId('obj'),
      bucketId: bucket.id,
      key: objectKey,
      size,
      contentType: input.contentType ?? DEFAULT_CONTENT_TYPE,
      sha256: hash.digest('hex'),
      storage: storage.kind,
      blobId,
      createdAt: Date.now(),
    };
    let replaced: ObjectRecord | null;
    try {
      replaced = await this.store.putObject(object);
    } catch (err) {
      await storage.remove(blobId).catch(() => undefined);
      throw err;
    }
    if (replaced) await this.removeBytes(replaced);
    return { bucket, object };
  }

  async object(scope: ProjectScope, bucketKey: string, objectKey: string): Promise<{ bucket: BucketRecord; object: ObjectRecord }> {
    const bucket = await this.bucket(scope, bucketKey);
    const object = await this.store.findObject(bucket.id, validObjectKey(objectKey));
    if (!object) throw ERRORS.notFound('Object', objectKey);
    return { bucket, object };
  }

  /** The object and its bytes, streamed from wherever they were stored; 404 when it is gone by the time it is opened. */
  async open(scope: ProjectScope, bucketKey: string, objectKey: string): Promise<{ object: ObjectRecord; body: Readable }> {
    const { object } = await this.object(scope, bucketKey, objectKey);
    const body = await this.storages[object.storage].open(object.blobId, object.size);
    if (!body) throw ERRORS.notFound('Object', objectKey);
    return { object, body };
  }

  /** The object row is gone (committed); leftover bytes only cost space, so a failure here is logged, not thrown. */
  private async removeBytes(object: ObjectRecord): Promise<void> {
    try {
      await this.storages[object.storage].remove(object.blobId);
    } catch (err) {
      this.log.error({ err, blobId: object.blobId }, 'document store: could not remove the bytes of a replaced or deleted object');
    }
  }

  /** A page of the bucket's objects by key: `limit` defaults to 100 and is clamped to 1-1000. */
  async listObjects(scope: ProjectScope, bucketKey: string, query: { prefix?: string; after?: string; limit?: number }): Promise<{ bucket: BucketRecord; objects: ObjectRecord[]; hasMore: boolean }> {
    const bucket = await this.bucket(scope, bucketKey);
    const limit = pageSize(query.limit, 100, 1000);
    const rows = await this.store.listObjects(bucket.id, { prefix: query.prefix, after: query.after, limit });
    return { bucket, objects: rows.slice(0, limit), hasMore: rows.length > limit };
  }

  async deleteObject(scope: ProjectScope, bucketKey: string, objectKey: string): Promise<{ bucket: BucketRecord; object: ObjectRecord }> {
    const bucket = await this.bucket(scope, bucketKey);
    const object = await this.store.deleteObject(bucket.id, validObjectKey(objectKey));
    if (!object) throw ERRORS.notFound('Object', objectKey);
    await this.removeBytes(object);
    return { bucket, object };
  }
}
