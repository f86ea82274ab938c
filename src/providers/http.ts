import { setTimeout as sleep } from 'node:timers/promises';
import type { LookupFunction } from 'node:net';
import type { Agent, Dispatcher } from 'undici';
// The Agent module alone, not undici's index: the index also loads fetch, WebSocket, caches and mocks, about 3 MB of
// heap that a gateway never uses. The version is pinned, and test/providers/http.test.ts covers this client.
import AgentClass from 'undici/lib/dispatcher/agent.js';
import { isJsonObject, jsonNestsDeeperThan } from '../platform/text.js';
import { openAiErrorBody, UpstreamError, type UpstreamFailure } from './errors.js';

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

const BACKOFF_BASE_MS = 200;
const BACKOFF_CAP_MS = 2_000;
/** A Retry-After longer than this is not waited for: the caller gets the 429 (or the next fallback runs). */
const MAX_RETRY_AFTER_MS = 10_000;

/** `reached`: the request had been written to the upstream (see UpstreamError.reachedUpstream). */
function connectionError(err: unknown, signal: AbortSignal, reached: boolean): UpstreamError {
  const failed = (failure: UpstreamFailure, message: string) => new UpstreamError(failure, message, undefined, undefined, undefined, reached);
  if (signal.aborted) return failed('aborted', 'The client went away');
  const code = (err as { code?: string }).code ?? '';
  const message = err instanceof Error ? err.message : String(err);
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') return failed('timeout', `Upstream timed out (${code})`);
  // These two are Waygate's own refusals: their message says what was refused.
  if (code === 'ERR_NON_PUBLIC_ADDRESS' || code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE') return failed('refused', `Upstream call refused: ${message}`);
  return failed('connection', `Upstream connection failed: ${code || message}`);
}

function retryAfterMs(value: string | undefined): number | undefined {
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
    this.agent = new AgentClass({
      keepAliveTimeout: 30_000,
      // No cap on connections per upstream: a cap would queue long streams behind each other.
      connect: { timeout: settings.connectTimeoutMs, ...(settings.lookup ? { lookup: settings.lookup } : {}) },
      ...(settings.maxResponseBytes ? { maxResponseSize: settings.maxResponseBytes } : {}),
      headersTimeout: settings.readTimeoutMs,
      bodyTimeout: settings.readTimeoutMs,
    });
  }

  /** POSTs JSON and reads the whole answer; non-2xx answers become UpstreamError (after retries). */
  async postJson(request: UpstreamRequest): Promise<{ text: string }> {
    const exchange = await this.withRetries(request, false);
    return { text: exchange.text() };
  }

  /**
   * POSTs JSON and hands back the body once a 2xx status arrived; its failures are UpstreamErrors too. A reader that
   * has seen the end of the answer (`[DONE]`, Anthropic's `message_stop`) calls `complete()` before it stops: the rest of the body is then read
   * and dropped, so that the connection stays in the pool, instead of the request being aborted.
   */
  async postStream(request: UpstreamRequest): Promise<{ body: AsyncIterable<Buffer>; complete(): void }> {
    const exchange = await this.withRetries(request, true);
    return { body: exchange.chunks(), complete: () => exchange.complete() };
  }

  private async withRetries(request: UpstreamRequest, streaming: boolean): Promise<Exchange> {
    const url = parseUrl(request.url);
    const headers = { 'content-type': 'application/json', ...request.headers };
    // An attempt that was sent and got no answer may have been worked on (and billed) upstream, whatever the later
    // attempts met: an error status, a connection refused, or the client leaving during the backoff. (An answer with
    // an error status is a refusal: it does not count as reached by itself.)
    let reached = false;
    for (let attempt = 0; ; attempt++) {
      const exchange = new Exchange(request.signal, streaming);
      let failure: UpstreamError;
      try {
        this.agent.dispatch({ origin: url.origin, path: url.path, method: 'POST', headers, body: request.body }, exchange);
        await exchange.answered;
        if (exchange.status >= 200 && exchange.status < 300) return exchange;
        const text = exchange.text();
        failure = new UpstreamError('http', `Upstream answered ${exchange.status}`, exchange.status, openAiErrorBody(exchange.status, safeParse(text), text), retryAfterMs(exchange.retryAfter), reached);
      } catch (err) {
        reached ||= exchange.requestSent;
        failure = connectionError(err, request.signal, reached);
      }
      if (!failure.retryable || attempt >= this.settings.retries) throw failure;
      const wait = failure.retryAfterMs ?? backoff(attempt);
      if (wait > MAX_RETRY_AFTER_MS) throw failure;
      try {
        await sleep(wait, undefined, { signal: request.signal });
      } catch {
        throw new UpstreamError('aborted', 'The client went away', undefined, undefined, undefined, reached);
      }
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

/** Chunks a stream holds before the upstream socket is paused (its reader is slower than the upstream). */
const STREAM_HIGH_WATER_CHUNKS = 16;
/** What a complete answer's body may still send after its end (see postStream) before the request is aborted anyway. */
const DRAIN_BYTES = 64 * 1024;
const DRAIN_MS = 1_000;
const RETRY_AFTER = 'retry-after';

/**
 * One attempt of an upstream call, as an undici dispatch handler. It stands in for undici's `request()`, which wraps
 * every answer in a Readable stream and an async resource: a JSON answer is collected as buffers, and a stream's
 * chunks are handed to one reader, with the socket paused while that reader is behind.
 * `answered` resolves when a JSON answer (or any non-2xx answer) is complete, or when a 2xx stream's headers arrive;
 * it rejects with undici's error (a timeout, a reset, the client going away) before that.
 */
class Exchange implements Dispatcher.DispatchHandler {
  status = 0;
  retryAfter: string | undefined;
  readonly answered: Promise<void>;
  private settle!: (error?: Error) => void;
  private abortRequest: ((reason: Error) => void) | null = null;
  private stopReason: Error | null = null;
  private buffered: Buffer[] = [];
  private streamingBody = false;
  private ended = false;
  private failure: Error | null = null;
  private resumeSocket: (() => void) | null = null;
  private wake: (() => void) | null = null;
  private completed = false;
  /** The whole request has been written to the socket. */
  requestSent = false;
  /** Bytes dropped since the reader stopped after a complete answer; -1 while nobody is draining. */
  private drained = -1;
  private drainTimer: NodeJS.Timeout | null = null;

  constructor(private readonly signal: AbortSignal, private readonly streaming: boolean) {
    this.answered = new Promise<void>((resolve, reject) => {
      this.settle = (error) => (error ? reject(error) : resolve());
    });
    if (signal.aborted) this.stopReason = new Error('The client went away');
    else signal.addEventListener('abort', this.onAbort);
  }

  private readonly onAbort = (): void => this.stop(new Error('The client went away'));

  /** Ends the exchange from Waygate's side (the client went away, or the reader stopped early). */
  private stop(reason: Error): void {
    if (this.ended) return;
    if (this.abortRequest) this.abortRequest(reason);
    else this.stopReason = reason;
  }

  private finish(): void {
    this.ended = true;
    this.signal.removeEventListener('abort', this.onAbort);
    if (this.drainTimer) clearTimeout(this.drainTimer);
  }

  onConnect(abort: (reason?: Error) => void): void {
    if (this.stopReason) abort(this.stopReason);
    else this.abortRequest = abort as (reason: Error) => void;
  }

  onRequestSent(): void {
    this.requestSent = true;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) return true;
    this.status = statusCode;
    if (statusCode >= 300) this.retryAfter = headerValue(rawHeaders, RETRY_AFTER);
    else if (this.streaming) {
      this.streamingBody = true;
      this.resumeSocket = resume;
      this.settle();
    }
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.drained >= 0) {
      this.drained += chunk.length;
      if (this.drained > DRAIN_BYTES) this.stop(new Error('The upstream sent too much after the end of its answer'));
      return true;
    }
    this.buffered.push(chunk);
    if (!this.streamingBody) return true;
    this.wakeReader();
    return this.buffered.length < STREAM_HIGH_WATER_CHUNKS;
  }

  onComplete(): void {
    this.finish();
    if (this.streamingBody) this.wakeReader();
    else this.settle();
  }

  onError(error: Error): void {
    this.finish();
    this.failure = error;
    if (this.streamingBody) this.wakeReader();
    else this.settle(error);
  }

  /** The whole body of a completed answer. */
  text(): string {
    const body = this.buffered.length === 1 ? this.buffered[0]!.toString('utf8') : Buffer.concat(this.buffered).toString('utf8');
    this.buffered = [];
    return body;
  }

  /** A 2xx stream's body for its one reader; a reader that stops early ends the upstream request. */
  async *chunks(): AsyncGenerator<Buffer> {
    try {
      for (;;) {
        if (this.buffered.length > 0) {
          const chunk = this.buffered.shift()!;
          if (this.buffered.length === 0) this.resumeSocket?.();
          yield chunk;
        } else if (this.failure) {
          throw connectionError(this.failure, this.signal, true);
        } else if (this.ended) {
          return;
        } else {
          await new Promise<void>((resolve) => (this.wake = resolve));
        }
      }
    } finally {
      if (this.completed) this.drain();
      else this.stop(new Error('The stream reader stopped'));
    }
  }

  /** The reader has the whole answer: see `postStream`. */
  complete(): void {
    this.completed = true;
  }

  /** Reads what is left of a complete answer's body and drops it (bounded), so undici can reuse the connection. */
  private drain(): void {
    if (this.ended) return;
    this.buffered = [];
    this.drained = 0;
    this.drainTimer = setTimeout(() => this.stop(new Error('The upstream did not end its body after the end of its answer')), DRAIN_MS);
    this.drainTimer.unref();
    this.resumeSocket?.();
  }

  private wakeReader(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
}

/** A header of undici's raw list (name, value, name, value, ...) by its lower-case name. */
function headerValue(rawHeaders: Buffer[], name: string): string | undefined {
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const key = rawHeaders[i]!;
    if (key.length === name.length && key.toString('latin1').toLowerCase() === name) return rawHeaders[i + 1]!.toString('latin1');
  }
  return undefined;
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

/**
 * How deep an upstream's JSON may nest. JSON.parse takes any depth, but JSON.stringify (an answer a guardrail
 * rewrote, a batch item's stored body) overflows the stack at a few thousand levels; no real answer comes near.
 */
const MAX_ANSWER_DEPTH = 1_000;

/** A malformed upstream reply when parsed valid JSON text nests too deep to be handled (see MAX_ANSWER_DEPTH). */
function refuseDeepNesting(text: string, value: unknown): void {
  if (jsonNestsDeeperThan(text, value, MAX_ANSWER_DEPTH)) throw new UpstreamError('malformed', `Upstream answered with JSON nested more than ${MAX_ANSWER_DEPTH} levels deep`);
}


/** Parses a JSON object answer, or fails as a malformed upstream reply. */
export function parseObject(text: string): Record<string, unknown> {
  const parsed = safeParse(text);
  if (!isJsonObject(parsed)) throw new UpstreamError('malformed', 'Upstream answered with malformed JSON');
  refuseDeepNesting(text, parsed);
  return parsed;
}

/** The JSON of one SSE event of an upstream stream, or a malformed upstream reply (not JSON, or nested too deep). */
export function parseEvent(data: string): unknown {
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    throw new UpstreamError('malformed', 'Upstream stream sent malformed JSON');
  }
  refuseDeepNesting(data, parsed);
  return parsed;
}
