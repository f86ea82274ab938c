import { afterEach, describe, expect, it, vi } from 'vitest';
import { LimitService, type Estimate, type LimitSubject } from '../../src/areas/limits/service.js';
import type { UsageService } from '../../src/areas/usage/service.js';
import { DAY_MS } from '../../src/platform/time.js';
import { MemoryCounters } from '../../src/platform/counters.js';

/**
 * Calls in flight across the end of a budget period. A call's usage event is stamped when it ends, so stored usage
 * puts it in the new period; its counted usage must go there too, or the new period's counter (started from stored
 * usage before the call was stored) never sees it.
 */

const DAY_END = Date.parse('2026-03-01T00:00:00.000Z');
const ESTIMATE: Estimate = { inputTokens: 10, desiredOutput: 50, minimumOutput: 1, inputPricePerToken: 0, outputPricePerToken: 0 };
const subject: LimitSubject = { kind: 'token', scope: { tenantId: 'ten_1', projectId: 'prj_1', tokenId: 'tok_1' }, version: 0, budget: { maxTokens: 100, period: 'day' }, rateLimit: null };
const total: LimitSubject = { ...subject, budget: { maxTokens: 100, period: 'total' } };

const opened: MemoryCounters[] = [];

/** Limits on in-memory counters whose stored usage is `storedTokens`; `reads` counts how often it was read. */
function limitsOver(storedTokens = 0): { limits: LimitService; reads: () => number } {
  const counters = new MemoryCounters();
  opened.push(counters);
  let reads = 0;
  const usage = { totalsSince: async () => (reads++, { tokens: storedTokens, cost: 0 }) } as unknown as UsageService;
  return { limits: new LimitService(counters, usage), reads: () => reads };
}

describe('budget periods and calls that span their end', () => {
  afterEach(async () => {
    vi.restoreAllMocks();
    for (const counters of opened.splice(0)) await counters.close();
  });

  // Regression (found in review): a call admitted at 23:59:59 and settled after midnight stayed in yesterday's counter.
  it("a call admitted before midnight and ended after it counts in the new day's budget", async () => {
    // Stored usage is empty until the first call is written, which is after the second call started the new day.
    const { limits } = limitsOver();
    const clock = vi.spyOn(Date, 'now');
    clock.mockReturnValue(DAY_END - 1_000);
    const before = await limits.admit([subject], ESTIMATE);
    clock.mockReturnValue(DAY_END + 1_000);
    const after = await limits.admit([subject], ESTIMATE);
    expect(after?.allowance).toBe(50);
    // The first call used 60 tokens, now stamped in the new day: 120 of 100 are spent there.
    await limits.settle(before, { tokens: 60, cost: 0 });
    await expect(limits.admit([subject], ESTIMATE)).rejects.toMatchObject({ statusCode: 429 });
    // Yesterday's counter no longer holds it.
    clock.mockReturnValue(DAY_END - 500);
    expect((await limits.admit([subject], ESTIMATE))?.allowance).toBe(50);
  });

  it('a call settled in the period it was admitted in is settled as before', async () => {
    const { limits } = limitsOver();
    const clock = vi.spyOn(Date, 'now').mockReturnValue(DAY_END + 1_000);
    const first = await limits.admit([subject], ESTIMATE);
    clock.mockReturnValue(DAY_END + 2_000);
    await limits.settle(first, { tokens: 30, cost: 0 });
    // 30 used: 70 left, 10 of them for the input.
    expect((await limits.admit([subject], { ...ESTIMATE, desiredOutput: 1_000 }))?.allowance).toBe(60);
  });

  it("a call running when a total budget's counter is started again counts in the new counter", async () => {
    const { limits } = limitsOver();
    const clock = vi.spyOn(Date, 'now');
    clock.mockReturnValue(DAY_END - 1_000);
    const before = await limits.admit([total], ESTIMATE);
    clock.mockReturnValue(DAY_END + 1_000);
    expect((await limits.admit([total], ESTIMATE))?.allowance).toBe(50);
    await limits.settle(before, { tokens: 60, cost: 0 });
    await expect(limits.admit([total], ESTIMATE)).rejects.toMatchObject({ statusCode: 429 });
  });

  // A total budget's counter used to stay forever, in memory and in Redis, after its token was deleted.
  it("a total budget's counter is started again from stored usage a day after it started", async () => {
    const { limits, reads } = limitsOver(40);
    const clock = vi.spyOn(Date, 'now').mockReturnValue(DAY_END);
    const first = await limits.admit([total], ESTIMATE);
    await limits.settle(first, { tokens: 20, cost: 0 });
    expect(reads()).toBe(1);
    clock.mockReturnValue(DAY_END + DAY_MS - 1);
    // 40 stored + 20 counted: 40 left, 10 of them for the input.
    expect((await limits.admit([total], ESTIMATE))?.allowance).toBe(30);
    expect(reads()).toBe(1);
    clock.mockReturnValue(DAY_END + DAY_MS);
    // Started again from stored usage alone (which, by then, holds what was counted).
    expect((await limits.admit([total], ESTIMATE))?.allowance).toBe(50);
    expect(reads()).toBe(2);
  });

  // Regression (review): each refusal wrote the usage buffer and ran an aggregate; a client hammering a used-up
  // budget made as many queries as requests.
  it('refusals of a used-up budget read stored usage at most once a second', async () => {
    const { limits, reads } = limitsOver(100);
    const clock = vi.spyOn(Date, 'now').mockReturnValue(DAY_END + 1_000);
    for (let i = 0; i < 50; i++) await expect(limits.admit([subject], ESTIMATE)).rejects.toMatchObject({ statusCode: 429, code: 'budget_exceeded' });
    // One read seeded the counter, one told the refusals apart.
    expect(reads()).toBe(2);
    clock.mockReturnValue(DAY_END + 2_001);
    await expect(limits.admit([subject], ESTIMATE)).rejects.toMatchObject({ code: 'budget_exceeded' });
    expect(reads()).toBe(3);
  });
});
