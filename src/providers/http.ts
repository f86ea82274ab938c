import { setTimeout as sleep } from 'node:timers/promises';
import type { LookupFunction } from 'node:net';
import { Agent } from 'undici';
import { openAiErrorBody, UpstreamError } from './errors.js';

export interface UpstreamSettings {
  /** Milliseconds to open a TCP/TLS connection. */
  connectTimeoutMs: number;
  /** Milliseconds of silence allowed while waiting for headers or between body chunks. */
  readTimeoutMs: number;
  /** Extra attempts after a retryable failure before the first byte. */
  retries: number;
  /** Resolves upstream host names (connected agents: one that refuses non-public addresses). */
  lookup?: LookupFunction;
  /** Largest response body read; a larger one fails the call (default: no limit). */
  maxResponseBytes?: number;
}

export interface UpstreamRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  signal: AbortSignal;
}

export interface UpstreamResponse {
  /** Milliseconds until the response headers arrived (the last attempt). */
  ms: number;
}

const BACKOFF_BASE_MS = 200;
const BACKOFF_CAP_MS = 2_000;
/** A Retry-After longer than this is not waited for: the caller gets the 429 (or the next fallback runs). */
const MAX_RETRY_AFTER_MS = 10_000;

function connectionError(err: unknown, signal: AbortSignal): UpstreamError {
  if (signal.aborted) return new UpstreamError('aborted', 'The client went away');
  const code = (err as { code?: string }).code ?? '';
  const message = err instanceof Error ? err.message : String(err);
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') {
    return new UpstreamError('timeout', `Upstream timed out (${code})`);
  }
  // These two are Waygate's own refusals: their message says what was refused.
  if (code === 'ERR_NON_PUBLIC_ADDRESS' || code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE') return new UpstreamError('refused', `Upstream call refused: ${message}`);
  return new UpstreamError('connection', `Upstream connection failed: ${code || message}`);
}

function retryAfterMs(header: string | string[] | undefined): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/** Parsed upstream URLs: a handful of distinct ones, parsed again on every call otherwise. */
const MAX_PARSED_URLS = 1_000;
const parsedUrls = new Map<string, { origin: string; path: string }>();

function parseUrl(url: string): { origin: string; path: string } {
  let parsed = parsedUrls.get(url);
  if (!parsed) {
    const { origin, pathname, search } = new URL(url);
    parsed = { origin, path: pathname + search };
    if (parsedUrls.size >= MAX_PARSED_URLS) parsedUrls.clear();
    parsedUrls.set(url, parsed);
  }
  return parsed;
}

/** Keep-alive connection pools to every upstream origin, with timeouts and retries before the first byte. */
export class UpstreamClient {
  private readonly agent: Agent;

  constructor(private readonly settings: UpstreamSettings) {
    this.agent = new Agent({
      keepAliveTimeout: 30_000,
      // No cap on connections per upstream: a cap would queue long streams behind each other.
      connect: { timeout: settings.connectTimeoutMs, ...(settings.lookup ? { lookup: settings.lookup } : {}) },
      ...(settings.maxResponseBytes ? { maxResponseSize: settings.maxResponseBytes } : {}),
      headersTimeout: settings.readTimeoutMs,
      bodyTimeout: settings.readTimeoutMs,
    });
  }

  /** POSTs JSON and reads the whole answer; non-2xx answers become UpstreamError (after retries). */
  async postJson(request: UpstreamRequest): Promise<UpstreamResponse & { text: string }> {
    return this.withRetries(request, async (response) => ({ text: await response.body.text() }));
  }

  /** POSTs JSON and hands back the body stream once a 2xx status arrived; its failures are UpstreamErrors too. */
  async postStream(request: UpstreamRequest): Promise<UpstreamResponse & { body: AsyncIterable<Buffer> }> {
    return this.withRetries(request, async (response) => ({ body: guarded(response.body as AsyncIterable<Buffer>, request.signal) }));
  }

  private async withRetries<T>(request: UpstreamRequest, onSuccess: (response: Awaited<ReturnType<Agent['request']>>) => Promise<T>): Promise<UpstreamResponse & T> {
    const url = parseUrl(request.url);
    for (let attempt = 0; ; attempt++) {
      const started = performance.now();
      let failure: UpstreamError;
      try {
        const response = await this.agent.request({
          origin: url.origin,
          path: url.path,
          method: 'POST',
          headers: { 'content-type': 'application/json', ...request.headers },
          body: request.body,
          signal: request.signal,
        });
        const ms = performance.now() - started;
        if (response.statusCode >= 200 && response.statusCode < 300) return { ms, ...(await onSuccess(response)) };
        const text = await response.body.text();
        failure = new UpstreamError('http', `Upstream answered ${response.statusCode}`, response.statusCode, openAiErrorBody(response.statusCode, safeParse(text), text), retryAfterMs(response.headers['retry-after']));
      } catch (err) {
        if (err instanceof UpstreamError) throw err;
        failure = connectionError(err, request.signal);
      }
      if (!failure.retryable || attempt >= this.settings.retries) throw failure;
      const wait = failure.retryAfterMs ?? backoff(attempt);
      if (wait > MAX_RETRY_AFTER_MS) throw failure;
      try {
        await sleep(wait, undefined, { signal: request.signal });
      } catch {
        throw new UpstreamError('aborted', 'The client went away');
      }
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

/** A body whose read errors (a timeout, a reset socket) surface as UpstreamErrors, like failures before it. */
async function* guarded(body: AsyncIterable<Buffer>, signal: AbortSignal): AsyncGenerator<Buffer> {
  try {
    for await (const chunk of body) yield chunk;
  } catch (err) {
    throw err instanceof UpstreamError ? err : connectionError(err, signal);
  }
}

function backoff(attempt: number): number {
  const base = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt);
  return base * (0.75 + Math.random() * 0.5);
}

export function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** Parses a JSON object answer, or fails as a malformed upstream reply. */
export function parseObject(text: string): Record<string, unknown> {
  const parsed = safeParse(text);
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new UpstreamError('malformed', 'Upstream answered with malformed JSON');
  return parsed as Record<string, unknown>;
}
