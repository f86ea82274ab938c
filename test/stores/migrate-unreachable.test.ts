import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/index.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { freePort } from '../helpers/net.js';

describe('migrations against a database that cannot be reached', () => {
  // Regression: the message named "migration unknown" as if one migration had failed.
  it('say the migrations could not run, with the reason, and name no migration', async () => {
    const port = await freePort();
    const database = openDatabase({ kind: 'postgres', url: `postgres://postgres@127.0.0.1:${port}/none`, poolSize: 1 });
    try {
      await expect(migrateToLatest(database.db, database.dialect)).rejects.toThrow(/^Database migrations could not run: .*ECONNREFUSED/);
    } finally {
      await database.close();
    }
  });
});
