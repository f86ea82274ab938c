import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type * as IORedis from 'ioredis';
import type { Redis } from 'ioredis';

const require = createRequire(import.meta.url);

/** What every Redis key (and channel) of Waygate starts with, unless a caller (a test run) gives its own. */
export const REDIS_KEY_PREFIX = 'waygate:';

/** A command Redis has not answered within this time fails (503): a silent Redis must not hang requests. */
const COMMAND_TIMEOUT_MS = 2_000;

/**
 * A Redis connection for the cache, the bus and the counters. ioredis is loaded on first use, so an instance
 * without REDIS_URL never holds it in memory. While Redis is down a command fails after one reconnection attempt,
 * and a command that gets no answer fails after COMMAND_TIMEOUT_MS, so requests answer 503 instead of hanging.
 * Commands in flight when a connection drops are not sent again: the counters' scripts add to counters, and a
 * second run would count (or release) a reservation twice. Connection errors surface through failed commands and
 * the health check; the error listener only stops ioredis' unhandled-event crash. `subscriber`: a connection that
 * only listens (the bus) has no command timeout, since its subscription never answers.
 */
export function connectRedis(url: string, options: { subscriber?: boolean } = {}): Redis {
  const { Redis: RedisClient } = require('ioredis') as typeof IORedis;
  const redis = new RedisClient(url, {
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    autoResendUnfulfilledCommands: false,
    ...(options.subscriber ? {} : { commandTimeout: COMMAND_TIMEOUT_MS }),
  });
  redis.on('error', () => undefined);
  return redis;
}

/**
 * A Lua script run by its SHA-1 (EVALSHA), so that its text crosses the wire and is hashed by Redis only when Redis
 * does not hold it: first use, a restart, SCRIPT FLUSH, or (from Redis 8 and Valkey 8) more than 500 scripts that
 * came by EVAL. EVAL would send and hash the whole text on every call. NOSCRIPT means the script did not run, so
 * running it with EVAL then runs it once. (ioredis' defineCommand does the same, but its commands are untyped and it
 * falls back on any error text that mentions NOSCRIPT.)
 */
export class RedisScript {
  /** What Redis knows the script by. */
  readonly sha: string;

  constructor(readonly lua: string) {
    this.sha = createHash('sha1').update(lua).digest('hex');
  }

  async run(redis: Redis, keys: string[], args: string[]): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error && err.message.startsWith('NOSCRIPT'))) throw err;
      return redis.eval(this.lua, keys.length, ...keys, ...args);
    }
  }
}
