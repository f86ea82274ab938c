import type { Readable } from 'node:stream';

export const STORAGE_KINDS = ['disk', 'database'] as const;
export type StorageKind = (typeof STORAGE_KINDS)[number];

/** Where object bytes live. Metadata (key, size, sha256) is the store's; a storage only keeps bytes by blob id. */
export interface BlobStorage {
  readonly kind: StorageKind;
  /** Stores every chunk under a new blob id; on failure (a chunk source that throws included) nothing is left behind. */
  write(blobId: string, chunks: AsyncIterable<Buffer>): Promise<void>;
  /**
   * The bytes, streamed (never the whole object in memory), or null when the blob is gone (the object was replaced
   * or deleted since it was looked up). `size` is what the object row says.
   */
  open(blobId: string, size: number): Promise<Readable | null>;
  /** Idempotent: removing a missing blob is not an error. */
  remove(blobId: string): Promise<void>;
  /**
   * Removes bytes of uploads that never became an object (the process died between writing bytes and the object
   * row) and were started before `before` (epoch ms). Returns how many blobs went.
   */
  sweep(before: number): Promise<number>;
}
