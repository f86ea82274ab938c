import { afterAll, describe, expect, it, vi } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { connectRedis, RedisScript } from '../../src/platform/redis.js';
import { clearRedisPrefix, redisReachable, TEST_REDIS_URL } from '../helpers/redis.js';

const hasRedis = await redisReachable();
if (!hasRedis) console.warn(`skipping RedisScript tests: no Redis at ${TEST_REDIS_URL}`);

/** Every Redis key of this run lives under this prefix, removed after the run. */
const PREFIX = `waygate-test:script:${randomBase32(10)}:`;

/**
 * A script no Redis has seen: its text carries this run's own comment. (Each run leaves its two small scripts in the
 * server's script cache: SCRIPT FLUSH would clear every other user's too.)
 */
const unseen = (lua: string) => new RedisScript(`-- ${randomBase32(16)}\n${lua}`);

describe.skipIf(!hasRedis)('RedisScript', () => {
  const redis = connectRedis(TEST_REDIS_URL);
  afterAll(async () => {
    redis.disconnect();
    await clearRedisPrefix(PREFIX);
  });

  const isLoaded = async (script: RedisScript) => {
    const [loaded] = (await redis.script('EXISTS', script.sha)) as number[];
    return loaded === 1;
  };

  it('runs a script Redis does not hold (new, or forgotten in a restart) once from its text, and by its hash afterwards', async () => {
    const script = unseen("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    const key = `${PREFIX}count`;
    const byHash = vi.spyOn(redis, 'evalsha');
    const byText = vi.spyOn(redis, 'eval');
    try {
      expect(await isLoaded(script)).toBe(false);
      expect(await script.run(redis, [key], ['5'])).toBe(5);
      expect([byHash.mock.calls.length, byText.mock.calls.length]).toEqual([1, 1]);
      expect(await isLoaded(script)).toBe(true);
      expect(await script.run(redis, [key], ['2'])).toBe(7);
      expect([byHash.mock.calls.length, byText.mock.calls.length]).toEqual([2, 1]);
    } finally {
      byHash.mockRestore();
      byText.mockRestore();
    }
  });

  it("passes the script's own error on without running it again", async () => {
    const script = unseen("redis.call('INCR', KEYS[1]) return redis.error_reply('refused here')");
    const key = `${PREFIX}ran`;
    await expect(script.run(redis, [key], [])).rejects.toThrow('refused here');
    expect(await redis.get(key)).toBe('1');
    await expect(script.run(redis, [key], [])).rejects.toThrow('refused here');
    expect(await redis.get(key)).toBe('2');
  });
});
