/**
 * Streaming measurements for the inference benchmark: time to first byte of SSE chat completions at concurrency 1,
 * and many streams held open at once.
 */
import fs from 'node:fs';
import http from 'node:http';
import { percentile, type Target } from './measure.js';

export interface StreamResult {
  status: number;
  /** From just before the request is written to the first chunk of the response body. */
  ttfb: number;
  /** To the end of the response body. */
  total: number;
  /** `data:` events received, [DONE] included. */
  events: number;
  done: boolean;
  usage: boolean;
  error?: string;
}

/** One streamed request. Never rejects: failures are in `error`. `onFirstByte` runs when the first body chunk arrives. */
export function streamOnce(
  agent: http.Agent,
  host: string,
  port: number,
  target: Target,
  timeoutMs = 60_000,
  onFirstByte?: () => void,
): Promise<StreamResult> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let ttfb = Number.NaN;
    let text = '';
    let status = 0;
    let settled = false;
    const finish = (error?: string) => {
      if (settled) return;
      settled = true;
      const events = text.split('\n\n').filter((e) => e.startsWith('data:'));
      const done = events.at(-1)?.trim() === 'data: [DONE]';
      const usage = events.some((e) => e.includes('"usage":{') && e.includes('"total_tokens"'));
      resolve({ status, ttfb, total: performance.now() - t0, events: events.length, done, usage, ...(error ? { error } : {}) });
    };
    const headers = target.body === undefined ? target.headers : { ...target.headers, 'content-length': String(Buffer.byteLength(target.body)) };
    const req = http.request({ host, port, path: target.path, method: target.method ?? 'POST', headers, agent }, (res) => {
      status = res.statusCode ?? 0;
      res.setEncoding('utf8');
      res.on('data', (part: string) => {
        if (Number.isNaN(ttfb)) {
          ttfb = performance.now() - t0;
          onFirstByte?.();
        }
        text += part;
      });
      res.on('end', () => finish(status === target.expectStatus ? undefined : `status ${status}: ${text.slice(0, 200)}`));
      res.on('error', (err) => finish(`response: ${err.message}`));
      res.on('aborted', () => finish('response aborted'));
    });
    // Idle timeout: no bytes on the socket for timeoutMs.
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no data for ${timeoutMs} ms`)));
    req.on('error', (err) => finish(`request: ${err.message}`));
    req.end(target.body);
  });
}

export interface TtfbSample {
  requests: number;
  ttfbP50: number;
  ttfbP90: number;
  ttfbP99: number;
  totalP50: number;
  totalP99: number;
}

function problem(r: StreamResult): string | null {
  if (r.error) return r.error;
  if (!r.done) return `stream ended without data: [DONE] after ${r.events} events`;
  if (r.events < 3) return `only ${r.events} events`;
  return null;
}

/** Concurrency 1 on one keep-alive connection: warm-up, then `requests` streams one after the other. */
export async function streamSequential(host: string, port: number, target: Target, requests: number, warmup: number): Promise<TtfbSample> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    for (let i = 0; i < warmup; i++) {
      const why = problem(await streamOnce(agent, host, port, target));
      if (why) throw new Error(`${target.label}: ${why}`);
    }
    const ttfb = new Array<number>(requests);
    const total = new Array<number>(requests);
    for (let i = 0; i < requests; i++) {
      const r = await streamOnce(agent, host, port, target);
      const why = problem(r);
      if (why) throw new Error(`${target.label}: ${why}`);
      ttfb[i] = r.ttfb;
      total[i] = r.total;
    }
    ttfb.sort((a, b) => a - b);
    total.sort((a, b) => a - b);
    return {
      requests,
      ttfbP50: percentile(ttfb, 50),
      ttfbP90: percentile(ttfb, 90),
      ttfbP99: percentile(ttfb, 99),
      totalP50: percentile(total, 50),
      totalP99: percentile(total, 99),
    };
  } finally {
    agent.destroy();
  }
}

export interface HeldStreams {
  streams: number;
  ok: number;
  errors: number;
  /** Up to 5 distinct error messages with their counts. */
  errorKinds: string[];
  withUsage: number;
  /** Most streams that had received their first byte and not yet ended, at the same moment. */
  maxOpen: number;
  ttfbP50: number;
  ttfbP99: number;
  seconds: number;
  /**
   * The machine's TCP counters over the burst (`/proc/net/netstat`; null without it): connections a full accept
   * queue refused (`ListenOverflows`) and SYNs sent again (`TCPSynRetrans`, 1 s and then 3 s later). A stream whose
   * SYN had to be sent again starts that much later, which shows as fewer at once and a TTFB p99 of 1 s or 3 s more.
   */
  kernel: { listenOverflows: number; synRetransmits: number } | null;
}

/** TcpExt counters by name, from /proc/net/netstat (a header line of names, then a line of values); null without it. */
function tcpExtCounters(): Map<string, number> | null {
  let text: string;
  try {
    text = fs.readFileSync('/proc/net/netstat', 'utf8');
  } catch {
    return null;
  }
  const [names, values] = text.split('\n').filter((line) => line.startsWith('TcpExt:'));
  if (!names || !values) return null;
  const keys = names.split(/\s+/).slice(1);
  const numbers = values.split(/\s+/).slice(1).map(Number);
  return new Map(keys.map((key, i) => [key, numbers[i] ?? 0]));
}

/**
 * `count` streams started together, each on its own connection. The upstream holds each stream open (a `hold*` model
 * sends one event every few hundred ms), so they overlap. Counts every stream that does not end with 200 and
 * `data: [DONE]`.
 */
export async function heldStreams(host: string, port: number, target: Target, count: number, timeoutMs = 120_000): Promise<HeldStreams> {
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const countersBefore = tcpExtCounters();
  let open = 0;
  let maxOpen = 0;
  const started = performance.now();
  try {
    const results = await Promise.all(
      Array.from({ length: count }, async () => {
        let counted = false;
        const r = await streamOnce(agent, host, port, target, timeoutMs, () => {
          counted = true;
          open++;
          if (open > maxOpen) maxOpen = open;
        });
        if (counted) open--;
        return r;
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    const countersAfter = tcpExtCounters();
    const grew = (name: string) => (countersAfter?.get(name) ?? 0) - (countersBefore?.get(name) ?? 0);
    const kinds = new Map<string, number>();
    let ok = 0;
    let withUsage = 0;
    const ttfb: number[] = [];
    for (const r of results) {
      const why = problem(r);
      if (why) kinds.set(why, (kinds.get(why) ?? 0) + 1);
      else ok++;
      if (r.usage) withUsage++;
      if (!Number.isNaN(r.ttfb)) ttfb.push(r.ttfb);
    }
    ttfb.sort((a, b) => a - b);
    return {
      streams: count,
      ok,
      errors: count - ok,
      errorKinds: [...kinds].slice(0, 5).map(([why, n]) => `${n} x ${why}`),
      withUsage,
      maxOpen,
      ttfbP50: percentile(ttfb, 50),
      ttfbP99: percentile(ttfb, 99),
      seconds,
      kernel: countersBefore && countersAfter ? { listenOverflows: grew('ListenOverflows'), synRetransmits: grew('TCPSynRetrans') } : null,
    };
  } finally {
    agent.destroy();
  }
}
