import diagnosticsChannel from 'node:diagnostics_channel';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { LoopPoller, startLoopPoller } from '../../src/platform/loop-poller.js';

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

/** A GET through node:http's client (not undici, whose channel the poller listens to); resolves with the body. */
function httpGet(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (part: string) => (body += part));
        res.on('end', () => resolve(body));
      })
      .on('error', reject);
  });
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
    get clock() {
      return clock;
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
    // 1 µs ticks over the whole window: the first activity has no silence before it to adapt to.
    expect(d.poller.windowUs).toBe(200);
    expect(ticks).toBeGreaterThanOrEqual(199);
    expect(ticks).toBeLessThanOrEqual(201);
    expect(d.poller.isPolling).toBe(false);
    expect(d.scheduled).toBe(false);
  });

  it('keeps polling while other callbacks run between its ticks, and stops the window after the last of them', () => {
    const d = drivenPoller(200);
    d.poller.activity();
    // 50 µs of other work between ticks (a busy loop), for far longer than the window: polling goes on.
    for (let i = 0; i < 100; i++) expect(d.tick(0.05)).toBe(true);
    expect(d.poller.isPolling).toBe(true);
    expect(d.drain()).toBeLessThanOrEqual(202);
    expect(d.poller.isPolling).toBe(false);
    // A gap of up to 20 µs is a bare tick, not work: polling stops one window after the activity.
    d.poller.activity();
    const ticksInWindow = d.poller.windowUs / 19;
    let ticks = 0;
    while (d.tick(0.019)) ticks++;
    expect(ticks).toBeGreaterThanOrEqual(Math.floor(ticksInWindow));
    expect(ticks).toBeLessThanOrEqual(Math.ceil(ticksInWindow) + 1);
  });

  it('keeps polling after one long callback, even one longer than a small window', () => {
    const d = drivenPoller(50);
    d.poller.activity();
    // A request handled in 100 µs, then a 2 ms collection, then the loop is idle: polling covers the wait after each.
    expect(d.tick(0.1)).toBe(true);
    expect(d.poller.isPolling).toBe(true);
    expect(d.tick(2)).toBe(true);
    expect(d.poller.isPolling).toBe(true);
    expect(d.drain()).toBeGreaterThanOrEqual(49);
    expect(d.poller.isPolling).toBe(false);
  });

  it('stops within 10 ms plus the window of the last activity on a VM that stalls every 0.5 ms, whatever the window', () => {
    // 40 µs stalls every 0.5 ms, as measured on the benchmark's VM: each looks like work between two ticks.
    for (const maxWindowUs of [200, 2_000, 10_000]) {
      const d = drivenPoller(maxWindowUs);
      d.poller.activity();
      const started = d.clock;
      for (let i = 0; i < 1_000_000 && d.tick(i % 500 === 499 ? 0.04 : 0.001); i++);
      expect(d.poller.isPolling).toBe(false);
      expect(d.clock - started).toBeLessThanOrEqual(10 + maxWindowUs / 1000 + 0.05);
    }
  });

  it('counts work that begins within 10 ms of the last activity, and no work after that', () => {
    const d = drivenPoller(200);
    d.poller.activity();
    const started = d.clock;
    // 50 µs of other work between ticks: each piece that begins before 10 ms extends polling.
    while (d.clock - started < 9.9) expect(d.tick(0.05)).toBe(true);
    expect(d.poller.isPolling).toBe(true);
    d.drain(0.05);
    expect(d.poller.isPolling).toBe(false);
    expect(d.clock - started).toBeGreaterThan(10);
    expect(d.clock - started).toBeLessThanOrEqual(10 + 0.05 + 0.2 + 0.05);
  });

  it('activity while polling extends the window instead of starting a second chain', () => {
    const d = drivenPoller(200);
    d.poller.activity();
    for (let i = 0; i < 190; i++) d.tick();
    d.poller.activity();
    expect(d.poller.starts).toBe(1);
    expect(d.drain()).toBeGreaterThanOrEqual(190);
    expect(d.poller.starts).toBe(1);
  });

  it('halves the window down to an eighth after long silences, and doubles it when events come sooner', () => {
    const d = drivenPoller(400);
    const windows: number[] = [];
    for (let i = 0; i < 6; i++) {
      d.poller.activity();
      windows.push(d.poller.windowUs);
      d.drain();
      d.advance(1_000); // a second between events: LLM-like traffic
    }
    expect(windows).toEqual([400, 200, 100, 50, 50, 50]);
    const grown: number[] = [];
    for (let i = 0; i < 5; i++) {
      d.poller.activity();
      grown.push(d.poller.windowUs);
      d.drain();
      d.advance(0.01); // the next event 10 µs after polling stopped: a longer window would have caught it
    }
    // At the largest window a miss means polling failed, so it halves again.
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

  it('never polls longer than the window after the last activity, or work begun within 10 ms of it, whatever the gaps', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10_000 }),
        fc.array(fc.record({ idleMs: fc.double({ min: 0, max: 50, noNaN: true }), gaps: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 40 }) }), { maxLength: 20 }),
        (maxWindowUs, bursts) => {
          const d = drivenPoller(maxWindowUs);
          for (const burst of bursts) {
            d.advance(burst.idleMs);
            d.poller.activity();
            const signalled = d.clock;
            for (const gap of burst.gaps) d.tick(gap);
            const window = d.poller.windowUs;
            expect(window).toBeLessThanOrEqual(maxWindowUs);
            expect(window).toBeGreaterThanOrEqual(maxWindowUs / 8);
            // Bare ticks after the last work stop within the window (10 µs each, plus the one that notices).
            expect(d.drain(0.01)).toBeLessThanOrEqual(Math.ceil(window / 10) + 2);
            expect(d.poller.isPolling).toBe(false);
            // Work that began before 10 ms (a gap of up to 1 ms here) is the last that counts.
            expect(d.clock - signalled).toBeLessThanOrEqual(10 + 1 + window / 1000 + 0.02);
          }
        },
      ),
    );
  });
});

/** A server that answers every request with a canned HTTP response without node:http (so no server channel fires). */
async function rawHttpServer(): Promise<{ url: string; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('data', () => socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

describe('startLoopPoller', () => {
  it('starts polling when an HTTP server receives a request and when an upstream answer arrives, and stops cleanly', async () => {
    const server = http.createServer((_req, res) => res.end('ok'));
    const upstream = await rawHttpServer();
    const serverUrl = await listen(server);
    const { poller, stop } = startLoopPoller(2_000);
    const waitForSleep = async () => {
      for (let i = 0; i < 100 && poller!.isPolling; i++) await sleep(5);
      expect(poller!.isPolling).toBe(false);
    };
    try {
      expect(poller).not.toBeNull();
      // node:http's client, which publishes on no channel the poller hears: only the server's channels start it.
      await httpGet(serverUrl);
      const afterRequest = poller!.starts;
      expect(afterRequest).toBeGreaterThanOrEqual(1);
      await waitForSleep();
      // Only undici's response-headers channel fires for a server that is not node:http.
      await (await request(upstream.url)).body.text();
      expect(poller!.starts).toBe(afterRequest + 1);
      await waitForSleep();
      for (const channel of ['http.server.request.start', 'http.server.response.finish', 'undici:request:headers']) expect(diagnosticsChannel.hasSubscribers(channel), channel).toBe(true);
      stop();
      // Stopped: it listens on no channel any more, and nothing starts it.
      for (const channel of ['http.server.request.start', 'http.server.response.finish', 'undici:request:headers']) expect(diagnosticsChannel.hasSubscribers(channel), channel).toBe(false);
      await httpGet(serverUrl);
      await (await request(upstream.url)).body.text();
      poller!.activity();
      expect(poller!.starts).toBe(afterRequest + 1);
      expect(poller!.isPolling).toBe(false);
    } finally {
      stop();
      await Promise.all([closeServer(server), upstream.close()]);
    }
  });

  it('starts nothing for a window of 0 (WAYGATE_BUSY_POLL_US=0)', () => {
    const { poller, stop } = startLoopPoller(0);
    expect(poller).toBeNull();
    stop();
  });
});
