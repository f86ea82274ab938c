import http from 'node:http';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';

/** One request shape the benchmark sends. */
export interface Target {
  label: string;
  path: string;
  headers: Record<string, string>;
  /** The status every response must have; anything else aborts the run. */
  expectStatus: number;
  /** GET when unset. */
  method?: string;
  /** A request body (sent as is, with a content-length); set content-type in headers. */
  body?: string;
  /** A numeric response header to collect (e.g. x-waygate-overhead-ms); its median lands in Sample.headerMedian. */
  recordHeader?: string;
}

export interface Sample {
  requests: number;
  seconds: number;
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  mean: number;
  /** Median of Target.recordHeader over the measured responses that carried it (sequential only). */
  headerMedian?: number;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index]!;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** One request, its body read to the end; fails unless the status is the target's expected one. */
function requestOnce(agent: http.Agent, host: string, port: number, target: Target, headerValues?: number[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const headers = target.body === undefined ? target.headers : { ...target.headers, 'content-length': String(Buffer.byteLength(target.body)) };
    const req = http.request({ host, port, path: target.path, method: target.method ?? 'GET', headers, agent }, (res) => {
      if (headerValues && target.recordHeader) {
        const value = Number(res.headers[target.recordHeader]);
        if (Number.isFinite(value)) headerValues.push(value);
      }
      res.resume();
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        if (status === target.expectStatus) resolve();
        else reject(new Error(`${target.label}: got ${status}, expected ${target.expectStatus}`));
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(target.body);
  });
}

/**
 * Sparse traffic: `requests` requests one at a time on one keep-alive connection, with `intervalMs` of silence after
 * each, as when calls are far apart. What a gateway does between requests (timers, polling) shows in its CPU time.
 */
export async function paced(host: string, port: number, target: Target, requests: number, intervalMs: number): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    for (let i = 0; i < requests; i++) {
      await requestOnce(agent, host, port, target);
      await sleep(intervalMs);
    }
  } finally {
    agent.destroy();
  }
}

/**
 * Concurrency 1: one keep-alive connection, one request after the other, each timed with performance.now()
 * from just before the request is written to the end of the response body (sub-millisecond resolution).
 */
export async function sequential(host: string, port: number, target: Target, requests: number, warmup: number): Promise<Sample> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    for (let i = 0; i < warmup; i++) await requestOnce(agent, host, port, target);
    const latencies = new Array<number>(requests);
    const headerValues: number[] = [];
    const started = performance.now();
    for (let i = 0; i < requests; i++) {
      const t0 = performance.now();
      await requestOnce(agent, host, port, target, headerValues);
      latencies[i] = performance.now() - t0;
    }
    const seconds = (performance.now() - started) / 1000;
    const sorted = latencies.sort((a, b) => a - b);
    return {
      requests,
      seconds,
      rps: requests / seconds,
      p50: percentile(sorted, 50),
      p90: percentile(sorted, 90),
      p99: percentile(sorted, 99),
      mean: sorted.reduce((sum, v) => sum + v, 0) / requests,
      ...(headerValues.length > 0 ? { headerMedian: median(headerValues) } : {}),
    };
  } finally {
    agent.destroy();
  }
}

/**
 * Exactly `amount` requests from `concurrency` loops in this process, each on its own keep-alive connection, each
 * sending its next request when the previous answer has ended (no autocannon: its sampling tick rounds short runs).
 * Latencies are timed like sequential(); every status must be the expected one.
 */
export async function concurrentAmount(host: string, port: number, target: Target, concurrency: number, amount: number): Promise<Sample> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const latencies: number[] = [];
  let next = 0;
  try {
    const started = performance.now();
    await Promise.all(
      Array.from({ length: Math.min(concurrency, amount) }, async () => {
        while (next < amount) {
          next++;
          const t0 = performance.now();
          await requestOnce(agent, host, port, target);
          latencies.push(performance.now() - t0);
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    const sorted = latencies.sort((a, b) => a - b);
    return {
      requests: amount,
      seconds,
      rps: amount / seconds,
      p50: percentile(sorted, 50),
      p90: percentile(sorted, 90),
      p99: percentile(sorted, 99),
      mean: sorted.reduce((sum, v) => sum + v, 0) / amount,
    };
  } finally {
    agent.destroy();
  }
}

/** The part of autocannon 9's result this benchmark reads. */
interface AutocannonResult {
  requests: { total: number; average: number };
  latency: { p50: number; p90: number; p99: number; mean: number };
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  '2xx': number;
  '4xx': number;
  '5xx': number;
}
type Autocannon = (options: Record<string, unknown>) => Promise<AutocannonResult>;
// autocannon is CommonJS without type declarations.
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

function autocannonOptions(baseUrl: string, target: Target, connections: number): Record<string, unknown> {
  return {
    url: baseUrl + target.path,
    headers: target.headers,
    connections,
    pipelining: 1,
    ...(target.method ? { method: target.method } : {}),
    ...(target.body !== undefined ? { body: target.body } : {}),
  };
}

function checked(target: Target, result: AutocannonResult): Sample {
  const expectedCount = target.expectStatus >= 400 && target.expectStatus < 500 ? result['4xx'] : result['2xx'];
  if (result.errors > 0 || result.timeouts > 0 || result['5xx'] > 0 || expectedCount !== result.requests.total) {
    throw new Error(
      `${target.label}: ${result.errors} errors, ${result.timeouts} timeouts, ${result['5xx']} 5xx, ` +
        `${expectedCount} of ${result.requests.total} with the expected status ${target.expectStatus}`,
    );
  }
  return {
    requests: result.requests.total,
    seconds: result.duration,
    rps: result.requests.total / result.duration,
    p50: result.latency.p50,
    p90: result.latency.p90,
    p99: result.latency.p99,
    mean: result.latency.mean,
  };
}

/** Concurrency N with autocannon over real sockets: a discarded warm-up run, then the measured run. */
export async function loaded(
  baseUrl: string,
  target: Target,
  connections: number,
  seconds: number,
  warmupSeconds: number,
): Promise<Sample> {
  const options = autocannonOptions(baseUrl, target, connections);
  if (warmupSeconds > 0) await autocannon({ ...options, duration: warmupSeconds });
  return checked(target, await autocannon({ ...options, duration: seconds }));
}

/** Exactly `amount` requests at concurrency N with autocannon (e.g. for a memory run); same checks as loaded(). */
export async function loadedAmount(baseUrl: string, target: Target, connections: number, amount: number): Promise<Sample> {
  return checked(target, await autocannon({ ...autocannonOptions(baseUrl, target, connections), amount, timeout: 30 }));
}
