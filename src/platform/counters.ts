import type { Redis } from 'ioredis';
import { redisCall } from './errors.js';
import { ExpiringMap } from './expiring-map.js';
import { connectRedis } from './redis.js';

/**
 * One limit to check and reserve against, in integers (requests, tokens, nano-dollars). A counter takes `base`
 * plus `perUnit` for each unit of the call's allowance (output tokens); the allowance is the largest that fits.
 */
export interface CounterReservation {
  key: string;
  base: number;
  perUnit: number;
  limit: number;
  /** Expiry given to a new counter; 0 keeps it forever. */
  ttlMs: number;
  /** A counter that must be seeded (from stored usage) before first use, instead of starting at zero. */
  seeded: boolean;
}

/** How many units (output tokens) a call would like, and the fewest it can do with. */
export interface AllowanceRequest {
  desired: number;
  minimum: number;
}

export type ReserveOutcome = { ok: true; allowance: number } | { ok: false; index: number; reason: 'limit' | 'unseeded' };

/**
 * Shared integer counters for rate limits and budgets: all-or-nothing reservation across several counters
 * (so N concurrent requests cannot together pass a limit), later adjustment by the real amount.
 * In-process by default; Redis (one Lua script per call) so that several instances enforce one limit.
 */
export interface Counters {
  reserve(counters: CounterReservation[], allowance: AllowanceRequest): Promise<ReserveOutcome>;
  /** Adds (or, negative, gives back) amounts to counters that still exist; expired windows are left alone. */
  adjust(changes: { key: string; amount: number }[]): Promise<void>;
  /** Sets a counter's starting value unless another caller already did. */
  seed(key: string, value: number, ttlMs: number): Promise<void>;
  close(): Promise<void>;
}

export class MemoryCounters implements Counters {
  private readonly entries = new ExpiringMap<number>();

  // Synchronous from check to increment: nothing else runs in between on this event loop.
  async reserve(counters: CounterReservation[], request: AllowanceRequest): Promise<ReserveOutcome> {
    const now = Date.now();
    let allowance = request.desired;
    for (const [index, counter] of counters.entries()) {
      const entry = this.entries.get(counter.key, now);
      if (!entry && counter.seeded) return { ok: false, index, reason: 'unseeded' };
      const headroom = counter.limit - (entry?.value ?? 0) - counter.base;
      if (headroom < 0) return { ok: false, index, reason: 'limit' };
      if (counter.perUnit > 0) allowance = Math.min(allowance, Math.floor(headroom / counter.perUnit));
      if (allowance < request.minimum) return { ok: false, index, reason: 'limit' };
    }
    for (const counter of counters) {
      const amount = counter.base + counter.perUnit * allowance;
      const entry = this.entries.get(counter.key, now);
      if (entry) entry.value += amount;
      else this.entries.set(counter.key, amount, counter.ttlMs > 0 ? now + counter.ttlMs : Infinity);
    }
    return { ok: true, allowance };
  }

  async adjust(changes: { key: string; amount: number }[]): Promise<void> {
    const now = Date.now();
    for (const change of changes) {
      const entry = this.entries.get(change.key, now);
      if (entry) entry.value += change.amount;
    }
  }

  async seed(key: string, value: number, ttlMs: number): Promise<void> {
    const now = Date.now();
    if (!this.entries.get(key, now)) this.entries.set(key, value, ttlMs > 0 ? now + ttlMs : Infinity);
  }

  async close(): Promise<void> {
    this.entries.close();
  }
}

// KEYS: the counters. ARGV[1], ARGV[2]: desired and minimum allowance; then base, perUnit, limit, ttl, seeded for
// each counter. Returns {1, allowance} or {0 | -1 (unseeded), index}. Mirrors MemoryCounters.reserve.
const RESERVE_SCRIPT = `
local allowance = tonumber(ARGV[1])
local minimum = tonumber(ARGV[2])
for i = 1, #KEYS do
  local a = 2 + (i - 1) * 5
  local current = redis.call('GET', KEYS[i])
  if not current then
    if ARGV[a + 5] == '1' then return {-1, i} end
    current = 0
  end
  local headroom = tonumber(ARGV[a + 3]) - tonumber(current) - tonumber(ARGV[a + 1])
  if headroom < 0 then return {0, i} end
  local perUnit = tonumber(ARGV[a + 2])
  if perUnit > 0 then allowance = math.min(allowance, math.floor(headroom / perUnit)) end
  if allowance < minimum then return {0, i} end
end
for i = 1, #KEYS do
  local a = 2 + (i - 1) * 5
  redis.call('INCRBY', KEYS[i], string.format('%d', tonumber(ARGV[a + 1]) + tonumber(ARGV[a + 2]) * allowance))
  local ttl = tonumber(ARGV[a + 4])
  if ttl > 0 and redis.call('PTTL', KEYS[i]) < 0 then redis.call('PEXPIRE', KEYS[i], ttl) end
end
return {1, allowance}`;

// INCRBY keeps a key's expiry; counters that expired meanwhile are not brought back.
const ADJUST_SCRIPT = `
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('INCRBY', KEYS[i], ARGV[i]) end
end
return 0`;

export class RedisCounters implements Counters {
  private readonly redis: Redis;

  constructor(url: string, private readonly prefix = 'waygate:') {
    this.redis = connectRedis(url);
  }

  private call<T>(operation: () => Promise<T>): Promise<T> {
    return redisCall(operation);
  }

  async reserve(counters: CounterReservation[], request: AllowanceRequest): Promise<ReserveOutcome> {
    if (counters.length === 0) return { ok: true, allowance: request.desired };
    const keys = counters.map((c) => this.prefix + c.key);
    const args = counters.flatMap((c) => [c.base, c.perUnit, c.limit, c.ttlMs, c.seeded ? 1 : 0]);
    const [status, value] = (await this.call(() =>
      this.redis.eval(RESERVE_SCRIPT, keys.length, ...keys, ...[request.desired, request.minimum, ...args].map(String)),
    )) as [number, number];
    if (status === 1) return { ok: true, allowance: value };
    return { ok: false, index: value - 1, reason: status === -1 ? 'unseeded' : 'limit' };
  }

  async adjust(changes: { key: string; amount: number }[]): Promise<void> {
    const live = changes.filter((c) => c.amount !== 0);
    if (live.length === 0) return;
    await this.call(() => this.redis.eval(ADJUST_SCRIPT, live.length, ...live.map((c) => this.prefix + c.key), ...live.map((c) => String(c.amount))));
  }

  async seed(key: string, value: number, ttlMs: number): Promise<void> {
    await this.call(() => (ttlMs > 0 ? this.redis.set(this.prefix + key, String(value), 'PX', ttlMs, 'NX') : this.redis.set(this.prefix + key, String(value), 'NX')));
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

export function createCounters(redisUrl: string | undefined, prefix?: string): Counters {
  return redisUrl ? new RedisCounters(redisUrl, prefix) : new MemoryCounters();
}
