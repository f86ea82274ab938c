import type { Redis } from 'ioredis';
import { redisCall } from './errors.js';
import { ExpiringMap } from './expiring-map.js';
import { connectRedis, RedisScript, REDIS_KEY_PREFIX } from './redis.js';

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
  /**
   * Whether the call's settlement adjusts this counter by its real amount: such a counter has a generation. A
   * request-count window does not settle: it has none (its generation reads as ''), which spares Redis a key and a
   * read per call. A key is one or the other for its whole life.
   */
  settles: boolean;
}

/** How many units (output tokens) a call would like, and the fewest it can do with. */
export interface AllowanceRequest {
  desired: number;
  minimum: number;
}

/**
 * `generations`: each counter's generation, which changes when the counter is started again (seeded, or created
 * anew after it was lost: a Redis restart, an eviction). A settlement names it, so that a reservation is taken back
 * only from the counter that holds it. '' for a counter that does not settle.
 */
export type ReserveOutcome = { ok: true; allowance: number; generations: string[] } | { ok: false; index: number; reason: 'limit' | 'unseeded' };

/**
 * A change to one counter: `amount` when it is still of `generation` (or none is named), else `otherwise`: a counter
 * started again since the reservation never held it, and gets only what the call used.
 */
export interface CounterChange {
  key: string;
  amount: number;
  generation?: string;
  otherwise?: number;
}

/**
 * Shared integer counters for rate limits and budgets: all-or-nothing reservation across several counters
 * (so N concurrent requests cannot together pass a limit), later adjustment by the real amount.
 * In-process by default; Redis (one Lua script per call) so that several instances enforce one limit.
 */
export interface Counters {
  reserve(counters: CounterReservation[], allowance: AllowanceRequest): Promise<ReserveOutcome>;
  /** Adds (or, negative, gives back) amounts to counters that still exist; expired windows are left alone. */
  adjust(changes: CounterChange[]): Promise<void>;
  /** Sets a counter's starting value unless another caller already did. */
  seed(key: string, value: number, ttlMs: number): Promise<void>;
  close(): Promise<void>;
}

interface MemoryCounter {
  value: number;
  generation: string;
}

export class MemoryCounters implements Counters {
  private readonly entries = new ExpiringMap<MemoryCounter>();
  private created = 0;

  private start(key: string, value: number, ttlMs: number, now: number): MemoryCounter {
    const counter = { value, generation: String(++this.created) };
    this.entries.set(key, counter, ttlMs > 0 ? now + ttlMs : Infinity);
    return counter;
  }

  // Synchronous from check to increment: nothing else runs in between on this event loop.
  async reserve(counters: CounterReservation[], request: AllowanceRequest): Promise<ReserveOutcome> {
    const now = Date.now();
    let allowance = request.desired;
    for (const [index, counter] of counters.entries()) {
      const entry = this.entries.get(counter.key, now);
      if (!entry && counter.seeded) return { ok: false, index, reason: 'unseeded' };
      const headroom = counter.limit - (entry?.value.value ?? 0) - counter.base;
      if (headroom < 0) return { ok: false, index, reason: 'limit' };
      if (counter.perUnit > 0) allowance = Math.min(allowance, Math.floor(headroom / counter.perUnit));
      if (allowance < request.minimum) return { ok: false, index, reason: 'limit' };
    }
    const generations: string[] = [];
    for (const counter of counters) {
      const amount = counter.base + counter.perUnit * allowance;
      const existing = this.entries.get(counter.key, now)?.value;
      if (existing) existing.value += amount;
      const held = existing ?? this.start(counter.key, amount, counter.ttlMs, now);
      generations.push(counter.settles ? held.generation : '');
    }
    return { ok: true, allowance, generations };
  }

  async adjust(changes: CounterChange[]): Promise<void> {
    const now = Date.now();
    for (const change of changes) {
      const counter = this.entries.get(change.key, now)?.value;
      if (!counter) continue;
      const same = change.generation === undefined || change.generation === counter.generation;
      counter.value += same ? change.amount : (change.otherwise ?? 0);
    }
  }

  async seed(key: string, value: number, ttlMs: number): Promise<void> {
    const now = Date.now();
    if (!this.entries.get(key, now)) this.start(key, value, ttlMs, now);
  }

  async close(): Promise<void> {
    this.entries.close();
  }
}

// A counter's generation lives beside it (KEY..':g', with the same expiry): the server's time when the counter was
// started. A counter from before generations has none, read as ''.
const GENERATION = `
local function generation()
  local t = redis.call('TIME')
  return t[1] .. '.' .. t[2]
end
local function start(key, ttl)
  local g = generation()
  if ttl > 0 then redis.call('SET', key .. ':g', g, 'PX', ttl) else redis.call('SET', key .. ':g', g) end
  return g
end
local function generationOf(key)
  return redis.call('GET', key .. ':g') or ''
end
`;

// KEYS: the counters. ARGV[1], ARGV[2]: desired and minimum allowance; then base, perUnit, limit, ttl, seeded and
// settles for each counter. Returns {1, allowance, generation...} or {0 | -1 (unseeded), index}. Mirrors
// MemoryCounters.reserve.
const RESERVE_SCRIPT = new RedisScript(`${GENERATION}
local allowance = tonumber(ARGV[1])
local minimum = tonumber(ARGV[2])
local fresh = {}
for i = 1, #KEYS do
  local a = 2 + (i - 1) * 6
  local current = redis.call('GET', KEYS[i])
  fresh[i] = not current
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
local result = {1, allowance}
for i = 1, #KEYS do
  local a = 2 + (i - 1) * 6
  local ttl = tonumber(ARGV[a + 4])
  redis.call('INCRBY', KEYS[i], string.format('%d', tonumber(ARGV[a + 1]) + tonumber(ARGV[a + 2]) * allowance))
  if ttl > 0 and redis.call('PTTL', KEYS[i]) < 0 then redis.call('PEXPIRE', KEYS[i], ttl) end
  if ARGV[a + 6] ~= '1' then result[#result + 1] = ''
  elseif fresh[i] then result[#result + 1] = start(KEYS[i], ttl)
  else result[#result + 1] = generationOf(KEYS[i]) end
end
return result`);

// ARGV[1], ARGV[2]: the value and the expiry (0: none). Sets the counter only when it is missing, as a new generation.
const SEED_SCRIPT = new RedisScript(`${GENERATION}
local ttl = tonumber(ARGV[2])
local set
if ttl > 0 then set = redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl, 'NX') else set = redis.call('SET', KEYS[1], ARGV[1], 'NX') end
if set then start(KEYS[1], ttl) end
return 0`);

// ARGV: amount, generation ('*': any) and the amount otherwise, for each counter. INCRBY keeps a key's expiry;
// counters that expired meanwhile are not brought back.
const ADJUST_SCRIPT = new RedisScript(`${GENERATION}
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    local a = (i - 1) * 3
    local same = ARGV[a + 2] == '*' or ARGV[a + 2] == generationOf(KEYS[i])
    redis.call('INCRBY', KEYS[i], same and ARGV[a + 1] or ARGV[a + 3])
  end
end
return 0`);

export class RedisCounters implements Counters {
  private readonly redis: Redis;

  constructor(url: string, private readonly prefix = REDIS_KEY_PREFIX) {
    this.redis = connectRedis(url);
  }

  private call<T>(operation: () => Promise<T>): Promise<T> {
    return redisCall(operation);
  }

  async reserve(counters: CounterReservation[], request: AllowanceRequest): Promise<ReserveOutcome> {
    if (counters.length === 0) return { ok: true, allowance: request.desired, generations: [] };
    const keys = counters.map((c) => this.prefix + c.key);
    // Pushed one by one: flatMap and map(String) over the arguments cost more than the rest of the reservation.
    const args = [String(request.desired), String(request.minimum)];
    for (const c of counters) args.push(String(c.base), String(c.perUnit), String(c.limit), String(c.ttlMs), c.seeded ? '1' : '0', c.settles ? '1' : '0');
    const [status, value, ...generations] = (await this.call(() => RESERVE_SCRIPT.run(this.redis, keys, args))) as [number, number, ...string[]];
    if (status === 1) return { ok: true, allowance: value, generations };
    return { ok: false, index: value - 1, reason: status === -1 ? 'unseeded' : 'limit' };
  }

  async adjust(changes: CounterChange[]): Promise<void> {
    const live = changes.filter((c) => c.amount !== 0 || (c.otherwise ?? 0) !== 0);
    if (live.length === 0) return;
    const args: string[] = [];
    for (const c of live) args.push(String(c.amount), c.generation ?? '*', String(c.otherwise ?? 0));
    await this.call(() => ADJUST_SCRIPT.run(this.redis, live.map((c) => this.prefix + c.key), args));
  }

  async seed(key: string, value: number, ttlMs: number): Promise<void> {
    await this.call(() => SEED_SCRIPT.run(this.redis, [this.prefix + key], [String(value), String(ttlMs)]));
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

export function createCounters(redisUrl: string | undefined, prefix?: string): Counters {
  return redisUrl ? new RedisCounters(redisUrl, prefix) : new MemoryCounters();
}
