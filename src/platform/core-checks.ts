import path from 'node:path';
import type { DatabaseTarget } from '../config.js';
import type { DatabaseHandle } from '../db/index.js';
import type { Cache } from './cache.js';
import type { HealthCheck } from './health.js';
import { randomBase32 } from './ids.js';

/** `sqlite` or `postgres`: one round trip to the database. */
export function databaseCheck(database: DatabaseHandle, target: DatabaseTarget): HealthCheck {
  const details = target.kind === 'sqlite' ? { file: path.basename(target.file) } : {};
  return async () => {
    await database.ping();
    return { status: 'ok', details };
  };
}

/**
 * `cache`: a write and read-back of a key of this check run's own: probes that overlap (a load balancer and an
 * orchestrator) must not read each other's value, and instances may share one Redis. The key is removed after, and
 * expires anyway.
 */
export function cacheCheck(cache: Cache): HealthCheck {
  return async () => {
    const key = `health:${randomBase32(16)}`;
    const value = String(Date.now());
    await cache.set(key, value, 10_000);
    const read = await cache.get(key);
    await cache.del(key);
    if (read !== value) return { status: 'degraded', message: 'cache read back a different value', details: { kind: cache.kind } };
    return { status: 'ok', details: { kind: cache.kind } };
  };
}
