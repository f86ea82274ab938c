import net from 'node:net';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { MemoryCounters, RedisCounters, type CounterReservation, type Counters } from '../../src/platform/counters.js';
import { DependencyUnavailableError, redisCall } from '../../src/platform/errors.js';
import { randomBase32 } from '../../src/platform/ids.js';
import { connectRedis } from '../../src/platform/redis.js';
import { clearRedisPrefix, redisReachable, TEST_REDIS_URL } from '../helpers/redis.js';

const hasRedis = await redisReachable();
if (!hasRedis) console.warn(`skipping RedisCounters tests: no Redis at ${TEST_REDIS_URL}`);

/** Every Redis key of this run lives under this prefix, removed after the run. */
const PREFIX = `waygate-test:counters:${randomBase32(10)}:`;
const opened: Counters[] = [];

afterAll(async () => {
  for (const counters of opened) await counters.close();
  if (hasRedis) await clearRedisPrefix(PREFIX);
});

type Make = () => Counters;
const makeMemory: Make = () => {
  const counters = new MemoryCounters();
  opened.push(counters);
  return counters;
};
const makeRedis: Make = () => {
  const counters = new RedisCounters(TEST_REDIS_URL, PREFIX);
  opened.push(counters);
  return counters;
};

const BIG = 1e15;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const fresh = () => `k-${randomBase32(12)}`;

function counter(key: string, fields: Partial<CounterReservation> = {}): CounterReservation {
  return { key, base: 1, perUnit: 0, limit: 10, ttlMs: 0, seeded: false, settles: true, ...fields };
}

/**
 * A counter's value without changing it: null when the key is missing (or expired). Reserves the whole headroom
 * below BIG on a seeded counter (refused as unseeded when missing), then gives it back. Works for negative values.
 */
async function peek(counters: Counters, key: string): Promise<number | null> {
  const outcome = await counters.reserve([{ key, base: 0, perUnit: 1, limit: BIG, ttlMs: 0, seeded: true, settles: true }], { desired: 2 * BIG, minimum: 0 });
  if (!outcome.ok) {
    if (outcome.reason !== 'unseeded') throw new Error(`peek refused: ${JSON.stringify(outcome)}`);
    return null;
  }
  await counters.adjust([{ key, amount: -outcome.allowance }]);
  return BIG - outcome.allowance;
}

const BACKENDS: { name: string; make: Make; skip: boolean }[] = [
  { name: 'MemoryCounters', make: makeMemory, skip: false },
  { name: 'RedisCounters', make: makeRedis, skip: !hasRedis },
];

for (const backend of BACKENDS) {
  describe.skipIf(backend.skip)(backend.name, () => {
    const counters = backend.make();

    it('reserves on every counter or on none: one counter over its limit leaves the others untouched', async () => {
      const [a, b, c] = [fresh(), fresh(), fresh()];
      expect(await counters.reserve([counter(b, { base: 5, limit: 5 })], { desired: 0, minimum: 0 })).toMatchObject({ ok: true, allowance: 0 });
      const refused = await counters.reserve([counter(a, { base: 3 }), counter(b, { base: 1, limit: 5 }), counter(c, { base: 2 })], { desired: 0, minimum: 0 });
      expect(refused).toEqual({ ok: false, index: 1, reason: 'limit' });
      expect(await peek(counters, a)).toBeNull();
      expect(await peek(counters, b)).toBe(5);
      expect(await peek(counters, c)).toBeNull();

      expect(await counters.reserve([counter(a, { base: 3 }), counter(c, { base: 2 })], { desired: 0, minimum: 0 })).toMatchObject({ ok: true, allowance: 0 });
      expect(await peek(counters, a)).toBe(3);
      expect(await peek(counters, c)).toBe(2);
    });

    it('gives the largest allowance every counter has room for, at most the desired one, and reserves base + perUnit x allowance', async () => {
      const [a, b, r] = [fresh(), fresh(), fresh()];
      const planned = [counter(a, { base: 10, perUnit: 1, limit: 1000 }), counter(b, { base: 4, perUnit: 3, limit: 100 }), counter(r, { base: 1, perUnit: 0, limit: 5 })];
      // b: floor((100 - 4) / 3) = 32; a: 990; r does not constrain.
      expect(await counters.reserve(planned, { desired: 50, minimum: 1 })).toMatchObject({ ok: true, allowance: 32 });
      expect(await peek(counters, a)).toBe(10 + 32);
      expect(await peek(counters, b)).toBe(4 + 3 * 32);
      expect(await peek(counters, r)).toBe(1);
      // The desired allowance wins when it is smaller.
      const c = fresh();
      expect(await counters.reserve([counter(c, { base: 0, perUnit: 2, limit: 1000 })], { desired: 7, minimum: 1 })).toMatchObject({ ok: true, allowance: 7 });
      expect(await peek(counters, c)).toBe(14);
    });

    it('refuses when the allowance would fall below the minimum, reserving nothing', async () => {
      const [a, b] = [fresh(), fresh()];
      // b has 5 of headroom after its base: floor(5 / 3) = 1 unit.
      const planned = [counter(a, { base: 2, perUnit: 1, limit: 100 }), counter(b, { base: 5, perUnit: 3, limit: 10 })];
      expect(await counters.reserve(planned, { desired: 20, minimum: 2 })).toEqual({ ok: false, index: 1, reason: 'limit' });
      expect(await peek(counters, a)).toBeNull();
      expect(await peek(counters, b)).toBeNull();
      expect(await counters.reserve(planned, { desired: 20, minimum: 1 })).toMatchObject({ ok: true, allowance: 1 });
      expect(await peek(counters, b)).toBe(8);
      // Exactly at the limit with no units needed still fits; one more does not.
      const c = fresh();
      expect(await counters.reserve([counter(c, { base: 10, limit: 10 })], { desired: 0, minimum: 0 })).toMatchObject({ ok: true, allowance: 0 });
      expect(await counters.reserve([counter(c, { base: 1, limit: 10 })], { desired: 0, minimum: 0 })).toEqual({ ok: false, index: 0, reason: 'limit' });
    });

    it('says a seeded counter is unseeded until seeded, without reserving on the counters before it', async () => {
      const [plain, seeded] = [fresh(), fresh()];
      const planned = [counter(plain, { base: 1 }), counter(seeded, { base: 5, perUnit: 1, limit: 100, seeded: true })];
      expect(await counters.reserve(planned, { desired: 10, minimum: 1 })).toEqual({ ok: false, index: 1, reason: 'unseeded' });
      expect(await peek(counters, plain)).toBeNull();
      await counters.seed(seeded, 90, 0);
      expect(await counters.reserve(planned, { desired: 10, minimum: 1 })).toMatchObject({ ok: true, allowance: 5 });
      expect(await peek(counters, seeded)).toBe(100);
      expect(await peek(counters, plain)).toBe(1);
    });

    it('seeds only a missing counter', async () => {
      const [a, b] = [fresh(), fresh()];
      await counters.seed(a, 10, 0);
      await counters.seed(a, 99, 0);
      expect(await peek(counters, a)).toBe(10);
      await counters.reserve([counter(b, { base: 4 })], { desired: 0, minimum: 0 });
      await counters.seed(b, 50, 0);
      expect(await peek(counters, b)).toBe(4);
    });

    it('adjusts existing counters up and down and leaves missing ones missing', async () => {
      const [a, b, missing] = [fresh(), fresh(), fresh()];
      await counters.seed(a, 10, 0);
      await counters.seed(b, 10, 0);
      await counters.adjust([
        { key: a, amount: 7 },
        { key: b, amount: -4 },
        { key: missing, amount: 5 },
      ]);
      expect(await peek(counters, a)).toBe(17);
      expect(await peek(counters, b)).toBe(6);
      expect(await peek(counters, missing)).toBeNull();
      await counters.adjust([{ key: b, amount: -10 }]);
      expect(await peek(counters, b)).toBe(-4);
      await counters.adjust([]);
      await counters.adjust([{ key: a, amount: 0 }]);
      expect(await peek(counters, a)).toBe(17);
    });

    it('forgets a counter once its ttl has passed: the window starts again, adjust does not bring it back', async () => {
      const [window, budget] = [fresh(), fresh()];
      const rpm = counter(window, { base: 1, limit: 1, ttlMs: 250 });
      expect((await counters.reserve([rpm], { desired: 0, minimum: 0 })).ok).toBe(true);
      expect(await counters.reserve([rpm], { desired: 0, minimum: 0 })).toEqual({ ok: false, index: 0, reason: 'limit' });
      await counters.seed(budget, 5, 250);
      await sleep(400);
      await counters.adjust([
        { key: window, amount: 1 },
        { key: budget, amount: 1 },
      ]);
      expect(await peek(counters, window)).toBeNull();
      expect(await peek(counters, budget)).toBeNull();
      expect(await counters.reserve([rpm], { desired: 0, minimum: 0 })).toMatchObject({ ok: true, allowance: 0 });
    });

    // Regression: after a Redis restart with calls running, the counter seeded again from stored usage had each
    // running call's whole reservation taken from it at settlement, which it never held (a budget of 600 let 1,050
    // through).
    it('takes a reservation back only from the counter generation that holds it; a counter started again gets what was used', async () => {
      const key = fresh();
      await counters.seed(key, 10, 250);
      const reserved = await counters.reserve([counter(key, { base: 5, limit: 100, seeded: true, ttlMs: 250 })], { desired: 0, minimum: 0 });
      expect(reserved.ok).toBe(true);
      const [generation] = (reserved as { generations: string[] }).generations;
      await sleep(400);
      await counters.seed(key, 10, 0);
      // The call used 3: its reservation of 5 was on the lost counter.
      await counters.adjust([{ key, amount: 3 - 5, generation, otherwise: 3 }]);
      expect(await peek(counters, key)).toBe(13);
      // On the counter that holds it, the reservation is replaced.
      const again = await counters.reserve([counter(key, { base: 5, limit: 100, seeded: true })], { desired: 0, minimum: 0 });
      await counters.adjust([{ key, amount: 3 - 5, generation: (again as { generations: string[] }).generations[0], otherwise: 3 }]);
      expect(await peek(counters, key)).toBe(16);
    });

    it('gives a counter that does not settle no generation, and counts it as any other', async () => {
      const [window, budget] = [fresh(), fresh()];
      const planned = [counter(window, { base: 1, limit: 2, settles: false }), counter(budget, { base: 2, limit: 10 })];
      const first = await counters.reserve(planned, { desired: 0, minimum: 0 });
      const second = await counters.reserve(planned, { desired: 0, minimum: 0 });
      for (const outcome of [first, second]) {
        expect(outcome.ok).toBe(true);
        const [window, settling] = (outcome as { generations: string[] }).generations;
        expect(window).toBe('');
        expect(settling).not.toBe('');
      }
      expect(await counters.reserve(planned, { desired: 0, minimum: 0 })).toEqual({ ok: false, index: 0, reason: 'limit' });
      expect(await peek(counters, window)).toBe(2);
      expect(await peek(counters, budget)).toBe(4);
    });

    it('keeps an existing expiry when a counter is used again before it passes', async () => {
      const key = fresh();
      expect((await counters.reserve([counter(key, { base: 1, limit: 2, ttlMs: 300 })], { desired: 0, minimum: 0 })).ok).toBe(true);
      // A later reservation with a long ttl does not extend the window that is already running.
      expect((await counters.reserve([counter(key, { base: 1, limit: 2, ttlMs: 60_000 })], { desired: 0, minimum: 0 })).ok).toBe(true);
      await sleep(450);
      expect(await peek(counters, key)).toBeNull();
    });

    it('counts nano-dollar amounts beyond 32 bits exactly', async () => {
      const key = fresh();
      const cost = counter(key, { base: 1e14, perUnit: 1e9, limit: 5e14, seeded: true });
      await counters.seed(key, 2e14 + 7, 0);
      // Headroom (5e14 - 2e14 - 7 - 1e14) / 1e9 = 199,999.99... units.
      expect(await counters.reserve([cost], { desired: 1e6, minimum: 1 })).toMatchObject({ ok: true, allowance: 199_999 });
      expect(await peek(counters, key)).toBe(2e14 + 7 + 1e14 + 199_999e9);
      await counters.adjust([{ key, amount: -(1e14 + 199_999e9) + 123_456_789_012 }]);
      expect(await peek(counters, key)).toBe(2e14 + 123_456_789_019);
      const rest = 5e14 - (2e14 + 123_456_789_019);
      expect(await counters.reserve([counter(key, { base: rest + 1, limit: 5e14, seeded: true })], { desired: 0, minimum: 0 })).toEqual({ ok: false, index: 0, reason: 'limit' });
      expect(await counters.reserve([counter(key, { base: rest, limit: 5e14, seeded: true })], { desired: 0, minimum: 0 })).toMatchObject({ ok: true, allowance: 0 });
      expect(await peek(counters, key)).toBe(5e14);
    });

    it('lets exactly as many concurrent reservations through as fit', async () => {
      const key = fresh();
      const outcomes = await Promise.all(
        Array.from({ length: 60 }, () => counters.reserve([counter(key, { base: 3, perUnit: 1, limit: 100 })], { desired: 2, minimum: 2 })),
      );
      expect(outcomes.filter((o) => o.ok)).toHaveLength(20);
      expect(await peek(counters, key)).toBe(100);
    });
  });
}

/** One operation of a random sequence, on keys named by index. */
type Op =
  | { op: 'reserve'; counters: { key: number; base: number; perUnit: number; limit: number; ttl: boolean; seeded: boolean }[]; desired: number; minimum: number }
  | { op: 'adjust'; changes: { key: number; amount: number }[] }
  | { op: 'seed'; key: number; value: number; ttl: boolean };

const KEYS = 4;
const keyIndex = fc.integer({ min: 0, max: KEYS - 1 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    op: fc.constant('reserve' as const),
    counters: fc.array(
      fc.record({ key: keyIndex, base: fc.integer({ min: 0, max: 20 }), perUnit: fc.integer({ min: 0, max: 4 }), limit: fc.integer({ min: 0, max: 80 }), ttl: fc.boolean(), seeded: fc.boolean() }),
      { maxLength: 4 },
    ),
    desired: fc.integer({ min: 0, max: 30 }),
    minimum: fc.integer({ min: 0, max: 8 }),
  }),
  fc.record({ op: fc.constant('adjust' as const), changes: fc.array(fc.record({ key: keyIndex, amount: fc.integer({ min: -25, max: 25 }) }), { maxLength: 4 }) }),
  fc.record({ op: fc.constant('seed' as const), key: keyIndex, value: fc.integer({ min: 0, max: 60 }), ttl: fc.boolean() }),
);

/** Whether a key's counter settles: fixed per key, as a counter is either a request window or not. */
const settlesKey = (index: number) => index !== KEYS - 1;

/** Runs a sequence on one Counters and returns every outcome and the final values. */
async function play(counters: Counters, run: string, ops: Op[]): Promise<unknown[]> {
  const key = (index: number) => `model:${run}:${index}`;
  // Expiries are long enough never to pass during a run: both backends must agree on values, not on time.
  const ttlMs = (ttl: boolean) => (ttl ? 120_000 : 0);
  const results: unknown[] = [];
  for (const op of ops) {
    if (op.op === 'reserve') {
      const planned = op.counters.map((c) => ({ key: key(c.key), base: c.base, perUnit: c.perUnit, limit: c.limit, ttlMs: ttlMs(c.ttl), seeded: c.seeded, settles: settlesKey(c.key) }));
      const outcome = await counters.reserve(planned, { desired: op.desired, minimum: op.minimum });
      // Generations are each backend's own (what they mean is tested on each backend); both give one to exactly the
      // counters that settle.
      results.push(outcome.ok ? { ok: true, allowance: outcome.allowance, generated: outcome.generations.map((g) => g !== '') } : outcome);
    } else if (op.op === 'adjust') {
      await counters.adjust(op.changes.map((c) => ({ key: key(c.key), amount: c.amount })));
    } else {
      await counters.seed(key(op.key), op.value, ttlMs(op.ttl));
    }
  }
  for (let i = 0; i < KEYS; i++) results.push(await peek(counters, key(i)));
  return results;
}

describe.skipIf(!hasRedis)('MemoryCounters and RedisCounters as models of each other', () => {
  it('give the same outcomes and values for random sequences of reserve, adjust and seed', async () => {
    const redis = makeRedis();
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 25 }), async (ops) => {
        const memory = new MemoryCounters();
        try {
          const run = randomBase32(12);
          expect(await play(redis, run, ops)).toEqual(await play(memory, run, ops));
        } finally {
          await memory.close();
        }
      }),
      { numRuns: 150 },
    );
  });
});

describe('MemoryCounters against a plain sum', () => {
  it('a sequence that only reserves ends where a plain sum of the admitted amounts says', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.record({ base: fc.integer({ min: 0, max: 9 }), desired: fc.integer({ min: 0, max: 9 }) }), { minLength: 1, maxLength: 30 }), async (calls) => {
        const memory = new MemoryCounters();
        try {
          const key = fresh();
          let expected = 0;
          for (const call of calls) {
            const outcome = await memory.reserve([counter(key, { base: call.base, perUnit: 1, limit: 50 })], { desired: call.desired, minimum: 0 });
            if (outcome.ok) {
              expect(outcome.allowance).toBe(Math.min(call.desired, 50 - expected - call.base));
              expected += call.base + outcome.allowance;
            } else {
              expect(expected + call.base).toBeGreaterThan(50);
            }
            expect(expected).toBeLessThanOrEqual(50);
          }
          expect(await peek(memory, key)).toBe(expected);
        } finally {
          await memory.close();
        }
      }),
      { numRuns: 100 },
    );
  });
});

/** A TCP server that accepts connections and answers every Redis command with `reply` (or never, when null). */
async function fakeRedis(reply: string | null): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('data', () => {
      if (reply !== null) socket.write(reply);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `redis://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('RedisCounters when Redis cannot serve', () => {
  // Regression: with no command timeout, a Redis that stopped answering held every limited call forever.
  it('a Redis that never answers fails the call as unavailable (503) within seconds', async () => {
    const silent = await fakeRedis(null);
    const counters = new RedisCounters(silent.url, PREFIX);
    try {
      const started = Date.now();
      await expect(counters.reserve([counter(fresh())], { desired: 1, minimum: 0 })).rejects.toBeInstanceOf(DependencyUnavailableError);
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await counters.close().catch(() => undefined);
      await silent.close();
    }
  });

  // Regression: a replica's READONLY reply after a failover was a plain error, so a 500.
  it('replies of a Redis that cannot serve now (READONLY, LOADING, MASTERDOWN, ...) are unavailable, not internal errors', async () => {
    for (const reply of ["READONLY You can't write against a read only replica.", 'LOADING Redis is loading the dataset in memory', 'MASTERDOWN Link with MASTER is down', 'TRYAGAIN', 'CLUSTERDOWN The cluster is down']) {
      await expect(redisCall(() => Promise.reject(Object.assign(new Error(reply), { name: 'ReplyError' })))).rejects.toBeInstanceOf(DependencyUnavailableError);
    }
    // A command Redis refuses for what it is stays the error it is.
    await expect(redisCall(() => Promise.reject(Object.assign(new Error('ERR value is not an integer'), { name: 'ReplyError' })))).rejects.not.toBeInstanceOf(DependencyUnavailableError);
  });
});

describe.skipIf(!hasRedis)('RedisCounters keys', () => {
  it('keep a generation key beside a counter that settles only', async () => {
    const counters = makeRedis();
    const [window, budget] = [fresh(), fresh()];
    const outcome = await counters.reserve([counter(window, { settles: false, ttlMs: 60_000 }), counter(budget, { ttlMs: 60_000 })], { desired: 0, minimum: 0 });
    expect(outcome.ok).toBe(true);
    const redis = connectRedis(TEST_REDIS_URL);
    try {
      expect(await redis.exists(PREFIX + window)).toBe(1);
      expect(await redis.exists(`${PREFIX}${window}:g`)).toBe(0);
      expect(await redis.exists(PREFIX + budget)).toBe(1);
      expect(await redis.get(`${PREFIX}${budget}:g`)).toBe((outcome as { generations: string[] }).generations[1]);
    } finally {
      redis.disconnect();
    }
  });
});
