import { afterEach } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { openDatabase, type DatabaseHandle } from '../../src/db/index.js';
import { tempDeployment, type Backend } from './app.js';

/**
 * Opens empty databases (a SQLite file, or a fresh PostgreSQL database) with no migration run, for tests that build
 * a schema step by step; each is closed and removed after its test.
 */
export function tempDatabases(): (backend: Backend) => Promise<DatabaseHandle> {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()!();
  });
  return async (backend) => {
    const deployment = await tempDeployment(backend);
    cleanups.push(deployment.remove);
    const handle = openDatabase(loadConfig({ WAYGATE_DATA_DIR: deployment.dataDir, DATABASE_URL: deployment.databaseUrl }).database);
    cleanups.push(() => handle.close());
    return handle;
  };
}
