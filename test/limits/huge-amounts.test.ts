import { afterAll, describe, expect, it } from 'vitest';
import { LimitService, type Estimate, type LimitSubject } from '../../src/areas/limits/service.js';
import type { UsageService } from '../../src/areas/usage/service.js';
import { MemoryCounters, RedisCounters, type Counters } from '../../src/platform/counters.js';
import { randomBase32 } from '../../src/platform/ids.js';
import { clearRedisPrefix, redisReachable, TEST_REDIS_URL } from '../helpers/redis.js';

/**
 * Costs the registry allows (10^12 USD per million tokens) reach 10^21 nano-dollars and more. Regression: Redis got
 * such an amount as "1e+21", INCRBY refused it, and the whole settle failed: the call stayed counted at its estimate.
 */

const hasRedis = await redisReachable();
const PREFIX = `waygate-test:huge:${randomBase32(10)}:`;
const opened: Counters[] = [];
afterAll(async () => {
  for (const counters of opened) await counters.close();
  if (hasRedis) await clearRedisPrefix(PREFIX);
});

const COUNTERS: [string, () => Counters, boolean][] = [
  ['memory', () => new MemoryCounters(), false],
  ['redis', () => new RedisCounters(TEST_REDIS_URL, PREFIX), !hasRedis],
];

describe.each(COUNTERS)('settling huge amounts on %s counters', (_name, make, skip) => {
  it.skipIf(skip)('a call costing 10^12 USD settles, and the budget is then used up', async () => {
    const counters = make();
    opened.push(counters);
    let spent = { tokens: 0, cost: 0 };
    const usage = { totalsSince: async () => spent } as unknown as UsageService;
    const limits = new LimitService(counters, usage);
    const subject: LimitSubject = {
      kind: 'token',
      scope: { tenantId: 'ten_1', projectId: 'prj_1', tokenId: `tok_${randomBase32(8)}` },
      version: 0,
      budget: { maxTokens: 1e15, maxCostUsd: 9_000_000, period: 'total' },
      rateLimit: null,
    };
    const estimate: Estimate = { inputTokens: 10, desiredOutput: 5, minimumOutput: 1, inputPricePerToken: 1e-6, outputPricePerToken: 1e-6 };
    const reservation = await limits.admit([subject], estimate);
    expect(reservation).not.toBeNull();
    await limits.settle(reservation, { tokens: 2e6, cost: 1e12 });
    spent = { tokens: 2e6, cost: 1e12 };
    await expect(limits.admit([subject], estimate)).rejects.toMatchObject({ statusCode: 429, code: 'budget_exceeded' });
  });
});
