import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { BlobStorage } from './types.js';

/**
 * Object bytes as files under `<dataDir>/files`: written to `tmp/`, flushed to disk, then renamed into `blobs/`,
 * so a reader (or a crash) never sees half a file. One instance only: other instances cannot read these files.
 */
export class DiskBlobStorage implements BlobStorage {
  readonly kind = 'disk';

  constructor(private readonly root: string) {}

  private blobPath(blobId: string): string {
    // Two levels of fan-out keep directories small with millions of objects.
    return path.join(this.root, 'blobs', blobId.slice(-2), blobId);
  }

  async write(blobId: string, chunks: AsyncIterable<Buffer>): Promise<void> {
    const tempDir = path.join(this.root, 'tmp');
    await fs.promises.mkdir(tempDir, { recursive: true });
    const temp = path.join(tempDir, `${blobId}.part`);
    const handle = await fs.promises.open(temp, 'wx');
    try {
      for await (const chunk of chunks) await handle.write(chunk);
      await handle.sync();
      await handle.close();
      const target = this.blobPath(blobId);
      await fs.promises.mkdir(path.dirname(target), { recursive: true });
      await fs.promises.rename(temp, target);
    } catch (err) {
      await handle.close().catch(() => undefined);
      await fs.promises.rm(temp, { force: true });
      throw err;
    }
  }

  async open(blobId: string): Promise<Readable | null> {
    try {
      // An open file stays readable even if a replace or delete unlinks it meanwhile.
      const handle = await fs.promises.open(this.blobPath(blobId), 'r');
      return handle.createReadStream();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  async remove(blobId: string): Promise<void> {
    await fs.promises.rm(this.blobPath(blobId), { force: true });
  }

  /** Temporary files left by uploads cut short by a crash (a finished upload renames its file away). */
  async sweep(before: number): Promise<number> {
    const tempDir = path.join(this.root, 'tmp');
    let removed = 0;
    for (const name of await fs.promises.readdir(tempDir).catch(() => [] as string[])) {
      const file = path.join(tempDir, name);
      const stat = await fs.promises.stat(file).catch(() => null);
      if (stat && stat.mtimeMs < before) {
        await fs.promises.rm(file, { force: true });
        removed++;
      }
    }
    return removed;
  }
}
