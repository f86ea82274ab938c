import { Readable } from 'node:stream';
import { sql } from 'kysely';
import type { Db, Dialect } from '../../../db/types.js';
import { timeOrderedId } from '../../../platform/ids.js';
import type { BlobStorage } from './types.js';

/** Bytes per row: large enough for few round trips, small enough that reading or writing holds little memory. */
const ROW_BYTES = 1024 * 1024;

/**
 * Object bytes as numbered rows of `file_blobs` in the database, so that every instance sharing the database reads
 * them. Rows are written one by one, outside a transaction, so a slow upload never holds a write lock; the object
 * row that points at them is written only after the last one.
 */
export class DatabaseBlobStorage implements BlobStorage {
  readonly kind = 'database';

  constructor(private readonly db: Db, private readonly dialect: Dialect) {}

  async write(blobId: string, chunks: AsyncIterable<Buffer>): Promise<void> {
    let seq = 0;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    const flush = async () => {
      if (pendingBytes === 0) return;
      const data = Buffer.concat(pending, pendingBytes);
      pending = [];
      pendingBytes = 0;
      await this.db.insertInto('file_blobs').values({ blob_id: blobId, seq: seq++, data }).execute();
    };
    try {
      for await (const chunk of chunks) {
        pending.push(chunk);
        pendingBytes += chunk.length;
        if (pendingBytes >= ROW_BYTES) await flush();
      }
      await flush();
    } catch (err) {
      await this.remove(blobId).catch(() => undefined);
      throw err;
    }
  }

  async open(blobId: string, size: number): Promise<Readable | null> {
    const first = size > 0 ? await this.row(blobId, 0) : Buffer.alloc(0);
    if (!first) return null;
    // Not in object mode, so the stream buffers about one row ahead of a slow client, not 16.
    return Readable.from(this.rows(blobId, first, size), { objectMode: false, highWaterMark: ROW_BYTES });
  }

  private async row(blobId: string, seq: number): Promise<Buffer | null> {
    const row = await this.db.selectFrom('file_blobs').select('data').where('blob_id', '=', blobId).where('seq', '=', seq).executeTakeFirst();
    return row ? Buffer.from(row.data) : null;
  }

  /** Fails when rows end before `size` bytes: the object was replaced or deleted mid-read, and must not look whole. */
  private async *rows(blobId: string, first: Buffer, size: number): AsyncGenerator<Buffer> {
    let sent = first.length;
    if (first.length > 0) yield first;
    for (let seq = 1; sent < size; seq++) {
      const data = await this.row(blobId, seq);
      if (!data) throw new Error(`blob ${blobId} ended after ${sent} of ${size} bytes (replaced or deleted while read)`);
      sent += data.length;
      yield data;
    }
  }

  async remove(blobId: string): Promise<void> {
    await this.db.deleteFrom('file_blobs').where('blob_id', '=', blobId).execute();
  }

  /**
   * Rows no object points at, of blobs started before `before`. Blob ids begin with their start time, so "started
   * before" is a text comparison (byte order: PostgreSQL is told so, its default collation may differ).
   */
  async sweep(before: number): Promise<number> {
    const cutoff = timeOrderedId('blob', before).slice(0, 'blob_'.length + 9);
    const blobId = this.dialect === 'postgres' ? sql<string>`blob_id collate "C"` : sql<string>`blob_id`;
    const orphans = await this.db
      .selectFrom('file_blobs')
      .select('blob_id')
      .distinct()
      .where(blobId, '<', cutoff)
      .where('blob_id', 'not in', (eb) => eb.selectFrom('file_objects').select('blob_id').where('storage', '=', this.kind))
      .execute();
    for (const { blob_id } of orphans) await this.remove(blob_id);
    return orphans.length;
  }
}
