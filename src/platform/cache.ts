import type { Redis } from 'ioredis';
import { redisCall } from './errors.js';
import { ExpiringMap } from './expiring-map.js';
import { connectRedis, RedisScript, REDIS_KEY_PREFIX } from './redis.js';

// DECR on a missing key would create it without an expiry: only an existing window above zero is decremented.
const DECREMENT_EXISTING = new RedisScript("if redis.call('EXISTS', KEYS[1]) == 1 and tonumber(redis.call('GET', KEYS[1])) > 0 then return redis.call('DECR', KEYS[1]) end return 0");

/**
 * Shared key/value state with expiry: in-process by default, Redis when REDIS_URL is set so that
 * several instances see one set of counters (login attempts, later rate limits and budgets).
 */
export interface Cache {
  readonly kind: 'memory' | 'redis';
  get(key: string): Promise<string | null>;
  set(key: string, value: string, ttlMs: number): Promise<void>;
  del(key: string): Promise<void>;
  /** Adds one and returns the new count; the expiry starts with the first increment of a window. */
  incr(key: string, ttlMs: number): Promise<{ count: number; ttlMs: number }>;
  /** Takes one back (never below zero), keeping the window's expiry. */
  decr(key: string): Promise<void>;
  close(): Promise<void>;
}

export class MemoryCache implements Cache {
  readonly kind = 'memory';
  private readonly entries: ExpiringMap<string>;

  constructor(now: () => number = () => Date.now()) {
    this.entries = new ExpiringMap(now);
  }

  async get(key: string): Promise<string | null> {
    return this.entries.get(key)?.value ?? null;
  }

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    this.entries.set(key, value, this.entries.now() + ttlMs);
  }

  async del(key: string): Promise<void> {
    this.entries.delete(key);
  }

  async incr(key: string, ttlMs: number): Promise<{ count: number; ttlMs: number }> {
    const entry = this.entries.get(key);
    if (!entry) {
      this.entries.set(key, '1', this.entries.now() + ttlMs);
      return { count: 1, ttlMs };
    }
    entry.value = String(Number(entry.value) + 1);
    return { count: Number(entry.value), ttlMs: entry.expiresAt - this.entries.now() };
  }

  async decr(key: string): Promise<void> {
    const entry = this.entries.get(key);
    if (entry) entry.value = String(Math.max(0, Number(entry.value) - 1));
  }

  async close(): Promise<void> {
    this.entries.close();
  }
}

export class RedisCache implements Cache {
  readonly kind = 'redis';
  private readonly redis: Redis;

  /** `prefix` keeps keys of one deployment (or one test run) apart from everything else in the server. */
  constructor(url: string, private readonly prefix = REDIS_KEY_PREFIX) {
    this.redis = connectRedis(url);
  }

  private call<T>(operation: () => Promise<T>): Promise<T> {
    return redisCall(operation);
  }

  async get(key: string): Promise<string | null> {
    return this.call(() => this.redis.get(this.prefix + key));
  }

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    await this.call(() => this.redis.set(this.prefix + key, value, 'PX', ttlMs));
  }

  async del(key: string): Promise<void> {
    await this.call(() => this.redis.del(this.prefix + key));
  }

  async incr(key: string, ttlMs: number): Promise<{ count: number; ttlMs: number }> {
    const full = this.prefix + key;
    // One round trip: increment, set the window's expiry only on its first hit, read what is left.
    const [[, count], , [, left]] = (await this.call(() => this.redis.multi().incr(full).pexpire(full, ttlMs, 'NX').pttl(full).exec())) as [
      [null, number],
      [null, number],
      [null, number],
    ];
    return { count, ttlMs: left > 0 ? left : ttlMs };
  }

  async decr(key: string): Promise<void> {
    await this.call(() => DECREMENT_EXISTING.run(this.redis, [this.prefix + key], []));
  }

  /** Removes every key under this cache's prefix (test clean-up). */
  async clearPrefix(): Promise<void> {
    let cursor = '0';
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', `${this.prefix}*`, 'COUNT', 500);
      if (keys.length > 0) await this.redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

export function createCache(redisUrl: string | undefined, prefix?: string): Cache {
  return redisUrl ? new RedisCache(redisUrl, prefix) : new MemoryCache();
}
