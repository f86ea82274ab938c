import net from 'node:net';

/** The Redis server tests use: TEST_REDIS_URL (CI sets it) or the local default. */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** True when something answers on the Redis port, so Redis tests can skip with a reason instead of failing. */
export async function redisReachable(url = TEST_REDIS_URL): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port || 6379) });
    socket.setTimeout(1000);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

/** Removes every key under a test run's prefix (each run has its own, so leftovers never change what CI sees). */
export async function clearRedisPrefix(prefix: string, url = TEST_REDIS_URL): Promise<void> {
  const { RedisCache } = await import('../../src/platform/cache.js');
  const cache = new RedisCache(url, prefix);
  await cache.clearPrefix();
  await cache.close();
}
