import { createRequire } from 'node:module';
import type * as IORedis from 'ioredis';
import type { Redis } from 'ioredis';

const require = createRequire(import.meta.url);

/**
 * A Redis connection for the cache, the bus and the counters. ioredis is loaded on first use, so an instance
 * without REDIS_URL never holds it in memory. While Redis is down a command fails after one reconnection attempt,
 * so requests answer 503 instead of hanging; connection errors surface through failed commands and the health check,
 * and the error listener only stops ioredis' unhandled-event crash.
 */
export function connectRedis(url: string): Redis {
  const { Redis: RedisClient } = require('ioredis') as typeof IORedis;
  const redis = new RedisClient(url, { maxRetriesPerRequest: 1, connectTimeout: 2_000 });
  redis.on('error', () => undefined);
  return redis;
}
