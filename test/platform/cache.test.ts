import { afterAll, describe, expect, it } from 'vitest';
import { createCache, MemoryCache, RedisCache } from '../../src/platform/cache.js';
import { randomBase32 } from '../../src/platform/ids.js';
import { redisReachable, TEST_REDIS_URL } from '../helpers/redis.js';

const REDIS_URL = TEST_REDIS_URL;


const redisUp = await redisReachable();

/** Polls (bounded) until the key has expired on the real clock. */
async function waitUntilGone(cache: RedisCache, key: string): Promise<string | null> {
  let value = await cache.get(key);
  for (let i = 0; i < 100 && value !== null; i++) {
    await new Promise((r) => setTimeout(r, 10));
    value = await cache.get(key);
  }
  return value;
}

describe('MemoryCache with an injected clock', () => {
  let now = 1_000_000;
  const cache = new MemoryCache(() => now);
  afterAll(async () => cache.close());

  it('reports kind memory', () => {
    expect(cache.kind).toBe('memory');
    expect(createCache(undefined).kind).toBe('memory');
  });

  it('get of a missing key is null; set then get returns the value', async () => {
    expect(await cache.get('missing')).toBeNull();
    await cache.set('a', 'one', 100);
    expect(await cache.get('a')).toBe('one');
  });

  it('a value lives until its ttl runs out, then reads as null', async () => {
    await cache.set('ttl', 'v', 100);
    now += 99;
    expect(await cache.get('ttl')).toBe('v');
    now += 1;
    expect(await cache.get('ttl')).toBeNull();
  });

  it('set overwrites the value and restarts the ttl', async () => {
    await cache.set('over', 'first', 50);
    now += 40;
    await cache.set('over', 'second', 50);
    now += 40;
    expect(await cache.get('over')).toBe('second');
    now += 10;
    expect(await cache.get('over')).toBeNull();
  });

  it('del removes a key and deleting a missing key is harmless', async () => {
    await cache.set('gone', 'x', 1_000);
    await cache.del('gone');
    expect(await cache.get('gone')).toBeNull();
    await expect(cache.del('never-set')).resolves.toBeUndefined();
  });

  it('incr counts within a window whose expiry starts at the first hit', async () => {
    expect(await cache.incr('hits', 100)).toEqual({ count: 1, ttlMs: 100 });
    now += 40;
    expect(await cache.incr('hits', 100)).toEqual({ count: 2, ttlMs: 60 });
    now += 59;
    expect(await cache.incr('hits', 100)).toEqual({ count: 3, ttlMs: 1 });
    expect(await cache.get('hits')).toBe('3');
    now += 1;
    expect(await cache.get('hits')).toBeNull();
    expect(await cache.incr('hits', 100)).toEqual({ count: 1, ttlMs: 100 });
  });

  it('keys are independent', async () => {
    await cache.set('k1', 'a', 1_000);
    await cache.set('k2', 'b', 1_000);
    await cache.incr('k3', 1_000);
    expect([await cache.get('k1'), await cache.get('k2'), await cache.get('k3')]).toEqual(['a', 'b', '1']);
  });

  it('close clears everything', async () => {
    const other = new MemoryCache(() => now);
    await other.set('x', 'y', 1_000);
    await other.close();
    expect(await other.get('x')).toBeNull();
  });
});

describe.skipIf(!redisUp)('RedisCache against TEST_REDIS_URL (skipped when Redis is unreachable)', () => {
  const prefix = `waygate-test:cache:${randomBase32(10)}:`;
  const cache = new RedisCache(REDIS_URL, prefix);
  const twin = new RedisCache(REDIS_URL, prefix);
  const stranger = new RedisCache(REDIS_URL, `waygate-test:cache:${randomBase32(10)}:`);

  afterAll(async () => {
    await cache.clearPrefix();
    await stranger.clearPrefix();
    await Promise.all([cache.close(), twin.close(), stranger.close()]);
  });

  it('reports kind redis', () => {
    expect(cache.kind).toBe('redis');
    const made = createCache(REDIS_URL, prefix);
    expect(made.kind).toBe('redis');
    return made.close();
  });

  it('get/set/del round trip', async () => {
    expect(await cache.get('missing')).toBeNull();
    await cache.set('a', 'one', 10_000);
    expect(await cache.get('a')).toBe('one');
    await cache.set('a', 'two', 10_000);
    expect(await cache.get('a')).toBe('two');
    await cache.del('a');
    expect(await cache.get('a')).toBeNull();
  });

  it('a value expires after its ttl', async () => {
    await cache.set('short', 'v', 30);
    expect(await waitUntilGone(cache, 'short')).toBeNull();
  });

  it('incr counts within one window and reports the time left', async () => {
    const first = await cache.incr('hits', 60_000);
    expect(first.count).toBe(1);
    expect(first.ttlMs).toBeGreaterThan(0);
    expect(first.ttlMs).toBeLessThanOrEqual(60_000);
    const second = await cache.incr('hits', 60_000);
    expect(second.count).toBe(2);
    expect(second.ttlMs).toBeLessThanOrEqual(first.ttlMs);
    expect(await cache.get('hits')).toBe('2');
  });

  it('incr does not extend the window on later hits, and a new window starts after expiry', async () => {
    await cache.incr('window', 40);
    const again = await cache.incr('window', 60_000);
    expect(again.count).toBe(2);
    expect(again.ttlMs).toBeLessThanOrEqual(40);
    expect(await waitUntilGone(cache, 'window')).toBeNull();
    expect((await cache.incr('window', 60_000)).count).toBe(1);
  });

  it('two instances with one prefix share state (scale-out); another prefix does not see it', async () => {
    await cache.set('shared', 'from-one', 10_000);
    expect(await twin.get('shared')).toBe('from-one');
    await twin.incr('shared-count', 10_000);
    expect((await cache.incr('shared-count', 10_000)).count).toBe(2);
    expect(await stranger.get('shared')).toBeNull();
  });

  it('clearPrefix removes only this prefix', async () => {
    await stranger.set('mine', 'kept', 10_000);
    await cache.set('temp', 'x', 10_000);
    await cache.clearPrefix();
    expect(await cache.get('temp')).toBeNull();
    expect(await twin.get('shared')).toBeNull();
    expect(await stranger.get('mine')).toBe('kept');
  });
});
