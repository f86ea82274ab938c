import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { attachLoopPoller, LoopPoller } from '../../src/platform/loop-poller.js';

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/**
 * A poller on a hand-driven clock: `tick()` runs the one scheduled polling tick (if any) after `gapMs` of clock time,
 * which stands for how long the loop took to come back to it.
 */
function drivenPoller(maxWindowUs: number) {
  let clock = 1_000;
  let pending: (() => void) | null = null;
  const poller = new LoopPoller(
    maxWindowUs,
    () => clock,
    (tick) => {
      expect(pending).toBeNull(); // one chain of ticks, never two
      pending = tick;
    },
  );
  return {
    poller,
    advance(ms: number) {
      clock += ms;
    },
    /** Runs the scheduled tick after gapMs; false when nothing was scheduled. */
    tick(gapMs = 0.001): boolean {
      const next = pending;
      if (!next) return false;
      pending = null;
      clock += gapMs;
      next();
      return true;
    },
    /** Runs bare ticks (gapMs apart) until polling stops; returns how many ran (bounded). */
    drain(gapMs = 0.001): number {
      let ticks = 0;
      while (ticks < 1_000_000 && this.tick(gapMs)) ticks++;
      return ticks;
    },
    get scheduled() {
      return pending !== null;
    },
  };
}

describe('LoopPoller', () => {
  it('polls only after activity, and stops once the window passes without any', () => {
    const d = drivenPoller(200);
    expect(d.scheduled).toBe(false);
    d.poller.activity();
    expect(d.poller.isPolling).toBe(true);
    const ticks = d.drain();
    // 1 µs ticks over the window (the first activity starts from a long sleep, so the window halved to 100 µs).
    expect(d.poller.windowUs).toBe(100);
    expect(ticks).toBeGreaterThanOrEqual(99);
    expect(ticks).toBeLessThanOrEqual(101);
    expect(d.poller.isPolling).toBe(false);
    expect(d.scheduled).toBe(false);
  });

  it('keeps polling while other callbacks keep running between its ticks', () => {
    const d = drivenPoller(200);
    d.poller.activity();
    // 50 µs of other work between ticks, for far longer than the window: polling goes on.
    for (let i = 0; i < 100; i++) expect(d.tick(0.05)).toBe(true);
    expect(d.poller.isPolling).toBe(true);
    d.drain();
    expect(d.poller.isPolling).toBe(false);
  });

  it('activity while polling extends the window instead of starting a second chain', () => {
    const d = drivenPoller(200);
    d.poller.activity();
    for (let i = 0; i < 90; i++) d.tick();
    d.poller.activity();
    expect(d.poller.starts).toBe(1);
    expect(d.drain()).toBeGreaterThanOrEqual(90);
  });

  it('halves the window down to an eighth after long sleeps, and grows it back when events come sooner', () => {
    const d = drivenPoller(400);
    const windows: number[] = [];
    for (let i = 0; i < 6; i++) {
      d.poller.activity();
      windows.push(d.poller.windowUs);
      d.drain();
      d.advance(1_000); // a second between events: LLM-like traffic
    }
    // The first event also follows a long silence (none before it).
    expect(windows).toEqual([200, 100, 50, 50, 50, 50]);
    const grown: number[] = [];
    for (let i = 0; i < 5; i++) {
      d.poller.activity();
      grown.push(d.poller.windowUs);
      d.drain();
      d.advance(0.01); // the next request 10 µs after polling stopped: a longer window would have caught it
    }
    // At the largest window a miss means polling failed, so it shrinks again.
    expect(grown).toEqual([50, 100, 200, 400, 200]);
  });

  it('does nothing after stop()', () => {
    const d = drivenPoller(200);
    d.poller.activity();
    d.poller.stop();
    expect(d.drain()).toBe(1);
    d.poller.activity();
    expect(d.scheduled).toBe(false);
  });

  it('never polls longer than the window past the last activity, whatever the pattern of gaps', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10_000 }),
        fc.array(fc.record({ idleMs: fc.double({ min: 0, max: 50, noNaN: true }), gaps: fc.array(fc.double({ min: 0, max: 0.1, noNaN: true }), { maxLength: 40 }) }), { maxLength: 20 }),
        (maxWindowUs, bursts) => {
          const d = drivenPoller(maxWindowUs);
          for (const burst of bursts) {
            d.advance(burst.idleMs);
            d.poller.activity();
            for (const gap of burst.gaps) d.tick(gap);
            const window = d.poller.windowUs;
            expect(window).toBeLessThanOrEqual(maxWindowUs);
            expect(window).toBeGreaterThanOrEqual(maxWindowUs / 8);
            // Bare ticks after the last activity stop within the window (10 µs each, plus the one that notices).
            expect(d.drain(0.01)).toBeLessThanOrEqual(Math.ceil(window / 10) + 2);
            expect(d.poller.isPolling).toBe(false);
          }
        },
      ),
    );
  });
});

describe('attachLoopPoller', () => {
  it('starts polling when the server receives a request and when an upstream answer arrives, and detaches cleanly', async () => {
    const upstream = http.createServer((_req, res) => res.end('ok'));
    const server = http.createServer((_req, res) => res.end('ok'));
    const upstreamUrl = await listen(upstream);
    const serverUrl = await listen(server);
    const listeners = server.listenerCount('request');
    const { poller, detach } = attachLoopPoller(server, 10_000);
    try {
      expect(poller).not.toBeNull();
      await (await request(serverUrl)).body.text();
      const afterRequest = poller!.starts;
      expect(afterRequest).toBeGreaterThanOrEqual(1);
      // Wait for the window (at most 10 ms) to pass, so that the upstream's answer has to start polling again.
      while (poller!.isPolling) await sleep(5);
      await (await request(upstreamUrl)).body.text();
      expect(poller!.starts).toBeGreaterThan(afterRequest);
    } finally {
      detach();
      await Promise.all([closeServer(server), closeServer(upstream)]);
    }
    expect(server.listenerCount('request')).toBe(listeners);
    const stoppedAt = poller!.starts;
    poller!.activity();
    expect(poller!.starts).toBe(stoppedAt);
  });

  it('attaches nothing for a window of 0 (WAYGATE_BUSY_POLL_US=0)', () => {
    const server = http.createServer();
    const { poller, detach } = attachLoopPoller(server, 0);
    expect(poller).toBeNull();
    expect(server.listenerCount('request')).toBe(0);
    detach();
  });
});
