import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, createTestApp, type TestApp } from '../helpers/app.js';
import { defaultScope } from '../helpers/inference.js';
import { at, byField, DAY, get, groupBy, HOUR, inRange, metricsOf, range, record, seriesOf, usageEvent, type Scope } from './support.js';

/**
 * Property: for any set of events and any range, the sums the API builds from hourly rollups plus the raw events
 * of the partial edge hours equal a direct sum over the events in the range. Times cluster on hour boundaries
 * (0, 1 ms, half an hour, 1 ms before the next hour) so ranges often start or end exactly on or next to events.
 */

const RUNS = 25;
/** Bounded even when a property fails and shrinks; only a counterexample fails it (no timing decides a result). */
const PARAMS = { numRuns: RUNS, interruptAfterTimeLimit: 40_000, markInterruptAsFailure: false };
const HOURS = 72;
/** Each execution (shrinking included) gets its own stretch of time, far from the others. */
const WINDOW_SPACING = 10 * DAY;
const FIRST_WINDOW = at('2021-01-01T00:00:00.000Z');

const offset = fc.oneof(fc.constantFrom(0, 1, HOUR / 2, HOUR - 1), fc.integer({ min: 0, max: HOUR - 1 }));
/** Mostly the first few hours, so events share hours and the ranges cut through them; sometimes anywhere in 3 days. */
const hour = fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 0, max: 5 }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: HOURS - 1 }) });
const moment = fc.record({ hour, offset });
const eventSpec = fc.record({
  at: moment,
  service: fc.constantFrom('chat', 'embeddings', 'agents'),
  model: fc.constantFrom('m-one', 'm-two'),
  inputTokens: fc.integer({ min: 0, max: 5_000 }),
  outputTokens: fc.integer({ min: 0, max: 5_000 }),
  // Multiples of 1/64: sums are exact in any order.
  cost: fc.integer({ min: 0, max: 640 }).map((k) => k / 64),
  latencyMs: fc.integer({ min: 0, max: 2_000 }),
  status: fc.constantFrom(200, 200, 200, 201, 400, 429, 500, 503),
});
/** A range bound: a free moment (possibly outside the events' hours), or an event's time, or 1 ms either side of it. */
type Bound = { hour: number; offset: number } | { pick: number; delta: number };
const bound: fc.Arbitrary<Bound> = fc.oneof(
  fc.record({ hour: fc.integer({ min: -2, max: HOURS + 2 }), offset }),
  fc.record({ hour: fc.integer({ min: -1, max: 6 }), offset }),
  { weight: 2, arbitrary: fc.record({ pick: fc.nat(), delta: fc.constantFrom(-1, 0, 1) }) },
);

describe.each(BACKENDS)('analytics sums equal a direct sum over the events on %s', (backend) => {
  let t: TestApp;
  let scope: Scope;
  let windows = 0;
  beforeAll(async () => {
    t = await createTestApp({ backend });
    scope = await defaultScope(t);
  });
  afterAll(async () => t?.close());

  it(
    'for random events and random inclusive ranges',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(eventSpec, { maxLength: 40 }), bound, bound, async (specs, a, b) => {
          const base = FIRST_WINDOW + windows++ * WINDOW_SPACING;
          const time = (m: { hour: number; offset: number }) => base + m.hour * HOUR + m.offset;
          const events = specs.map(({ at: when, ...rest }) => usageEvent(scope, { ...rest, createdAt: time(when), upstreamLatencyMs: rest.latencyMs / 2 }));
          record(t, events);
          const resolve = (x: Bound) =>
            'pick' in x ? (events.length === 0 ? base : events[x.pick % events.length]!.createdAt + x.delta) : time(x);
          const [from, to] = [resolve(a), resolve(b)].sort((x, y) => x - y) as [number, number];
          const inside = inRange(events, from, to);

          const services = await get(t, t.ownerToken, 'usage', `${range(from, to)}&group_by=service`);
          expect(services.status, JSON.stringify(services.body)).toBe(200);
          expect(services.body.totals).toEqual(metricsOf(inside));
          const expected = [...groupBy(inside, (e) => e.service)].map(([service, list]) => ({ service, ...metricsOf(list) }));
          expect(byField(services.body.breakdown, 'service')).toEqual(byField(expected, 'service'));

          const hourly = await get(t, t.ownerToken, 'usage', `${range(from, to)}&group_by=model&interval=hour`);
          expect(hourly.status).toBe(200);
          const points = (hourly.body.timeseries as Record<string, unknown>[]).map(({ models: _models, ...point }) => point);
          expect(points).toEqual(seriesOf(events, from, to, HOUR));

          const overview = await get(t, t.ownerToken, 'overview', range(from, to));
          expect(overview.body.stats).toEqual(metricsOf(inside));
          expect(overview.body.daily).toEqual(seriesOf(events, from, to, DAY));
        }),
        PARAMS,
      );
    },
    120_000,
  );
});
