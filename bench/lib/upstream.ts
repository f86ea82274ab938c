/**
 * A fake OpenAI-compatible upstream for the inference benchmark, run as its own child process (so that its CPU time
 * is its own and it can be pinned with taskset):
 *
 *   node --import tsx bench/lib/upstream.ts --port 0 [--chunks 8] [--hold-chunk-ms 100] [--latency-ms 0] [--track]
 *
 * - POST /v1/chat/completions, non-stream: a small fixed chat.completion with usage.
 * - POST /v1/chat/completions with `stream: true`: SSE, a role chunk, `--chunks` content chunks, a finish chunk, a usage
 *   chunk when `stream_options.include_usage` is true, then `data: [DONE]`. Written at once, except for models whose
 *   name starts with `hold`: those send one chunk every `--hold-chunk-ms` ms, so that many streams are open together.
 * - POST /v1/embeddings: one 8-dimension vector per input, float or base64 (`encoding_format`), with usage.
 * - GET /v1/models, GET /health.
 * - `--latency-ms N`: every POST is answered N ms after its body arrived (a model's think time; 0 answers at once).
 * - `--track`: GET /stats answers `{ requests, inFlight, maxInFlight, busyMs }`: POSTs received, POSTs not yet
 *   answered, the most at once, and the summed time from body received to response finished over answered POSTs
 *   (so Δ busyMs / Δ wall time is the mean number of calls in flight). Off by default: no per-request listener.
 *
 * Keep-alive everywhere. Prints `listening <port>` on stdout once it listens. Responses are the same for every
 * request apart from the echoed model name and the number of embeddings.
 */
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { serveChild, startChild, type ChildServer } from './child.js';

/** The API key every benchmark client and gateway sends the fake upstream (which ignores it). */
export const UPSTREAM_API_KEY = 'sk-bench-not-a-key';

export interface UpstreamConfig {
  port: number;
  /** Content chunks per streamed completion. */
  chunks: number;
  /** Delay between chunks for `hold*` models. */
  holdChunkMs: number;
  /** Delay before every POST is answered. */
  latencyMs?: number;
  /** Count requests in flight for GET /stats. */
  track?: boolean;
}

/** What GET /stats reports when the upstream runs with --track. */
export interface UpstreamStats {
  requests: number;
  inFlight: number;
  maxInFlight: number;
  busyMs: number;
}

const REPLY_WORDS = ['Hello', '!', ' How', ' can', ' I', ' help', ' you', ' today', '?'];
const PROMPT_TOKENS = 12;
const CREATED = 1_764_000_000;
const VECTOR = Float32Array.from([0.125, -0.25, 0.375, -0.5, 0.0625, 0.75, -0.875, 0.5]);
const VECTOR_BASE64 = Buffer.from(VECTOR.buffer, VECTOR.byteOffset, VECTOR.byteLength).toString('base64');
const VECTOR_JSON = JSON.stringify(Array.from(VECTOR));

let sequence = 0;
const nextId = (prefix: string) => `${prefix}-bench${(++sequence).toString(36)}`;

interface ChatBody {
  model?: unknown;
  stream?: unknown;
  stream_options?: { include_usage?: unknown } | null;
  input?: unknown;
  encoding_format?: unknown;
}

function sendJson(res: http.ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function chatCompletion(model: string, content: string): string {
  return (
    `{"id":"${nextId('chatcmpl')}","object":"chat.completion","created":${CREATED},"model":${JSON.stringify(model)},` +
    `"choices":[{"index":0,"message":{"role":"assistant","content":${JSON.stringify(content)}},"logprobs":null,"finish_reason":"stop"}],` +
    `"usage":{"prompt_tokens":${PROMPT_TOKENS},"completion_tokens":${REPLY_WORDS.length},"total_tokens":${PROMPT_TOKENS + REPLY_WORDS.length}}}`
  );
}

function streamEvents(model: string, chunks: number, includeUsage: boolean): string[] {
  const id = nextId('chatcmpl');
  const head = `{"id":"${id}","object":"chat.completion.chunk","created":${CREATED},"model":${JSON.stringify(model)},`;
  const event = (rest: string) => `data: ${head}${rest}}\n\n`;
  const events = [event(`"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`)];
  for (let i = 0; i < chunks; i++) {
    const word = REPLY_WORDS[i % REPLY_WORDS.length]!;
    events.push(event(`"choices":[{"index":0,"delta":{"content":${JSON.stringify(word)}},"logprobs":null,"finish_reason":null}]`));
  }
  events.push(event(`"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]`));
  if (includeUsage) {
    events.push(event(`"choices":[],"usage":{"prompt_tokens":${PROMPT_TOKENS},"completion_tokens":${chunks},"total_tokens":${PROMPT_TOKENS + chunks}}`));
  }
  events.push('data: [DONE]\n\n');
  return events;
}

function handleChat(config: UpstreamConfig, body: ChatBody, req: http.IncomingMessage, res: http.ServerResponse): void {
  const model = typeof body.model === 'string' ? body.model : 'bench-model';
  if (body.stream !== true) {
    sendJson(res, 200, chatCompletion(model, REPLY_WORDS.join('')));
    return;
  }
  const events = streamEvents(model, config.chunks, body.stream_options?.include_usage === true);
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  if (!model.startsWith('hold')) {
    // One write per event, as a real server flushes them, but without waiting in between.
    for (const e of events) res.write(e);
    res.end();
    return;
  }
  let next = 0;
  const timer = setInterval(() => {
    res.write(events[next++]!);
    if (next === events.length) {
      clearInterval(timer);
      res.end();
    }
  }, config.holdChunkMs);
  res.write(events[next++]!);
  req.socket.once('close', () => clearInterval(timer));
}

function handleEmbeddings(body: ChatBody, res: http.ServerResponse): void {
  const model = typeof body.model === 'string' ? body.model : 'bench-embed';
  const inputs = Array.isArray(body.input) ? body.input.length : 1;
  const vector = body.encoding_format === 'base64' ? `"${VECTOR_BASE64}"` : VECTOR_JSON;
  const data: string[] = [];
  for (let i = 0; i < inputs; i++) data.push(`{"object":"embedding","index":${i},"embedding":${vector}}`);
  const tokens = 4 * inputs;
  sendJson(res, 200, `{"object":"list","data":[${data.join(',')}],"model":${JSON.stringify(model)},"usage":{"prompt_tokens":${tokens},"total_tokens":${tokens}}}`);
}

function errorBody(message: string, type = 'invalid_request_error'): string {
  return JSON.stringify({ error: { message, type, param: null, code: null } });
}

export function createUpstream(config: UpstreamConfig): http.Server {
  const latencyMs = config.latencyMs ?? 0;
  const stats: UpstreamStats = { requests: 0, inFlight: 0, maxInFlight: 0, busyMs: 0 };
  const answer = (req: http.IncomingMessage, res: http.ServerResponse, body: ChatBody) => {
    const url = req.url ?? '/';
    if (req.method === 'POST' && url === '/v1/chat/completions') handleChat(config, body, req, res);
    else if (req.method === 'POST' && url === '/v1/embeddings') handleEmbeddings(body, res);
    else sendJson(res, 404, errorBody(`no route ${req.method} ${url}`));
  };
  const track = (res: http.ServerResponse) => {
    const t0 = performance.now();
    stats.requests++;
    if (++stats.inFlight > stats.maxInFlight) stats.maxInFlight = stats.inFlight;
    res.once('close', () => {
      stats.inFlight--;
      stats.busyMs += performance.now() - t0;
    });
  };
  const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    const url = req.url ?? '/';
    if (req.method === 'GET') {
      req.resume();
      if (url === '/health') sendJson(res, 200, '{"ok":true}');
      else if (url === '/stats' && config.track) sendJson(res, 200, JSON.stringify(stats));
      else if (url === '/v1/models') sendJson(res, 200, '{"object":"list","data":[{"id":"bench-model","object":"model","created":0,"owned_by":"bench"}]}');
      else sendJson(res, 404, errorBody(`no route GET ${url}`));
      return;
    }
    const parts: Buffer[] = [];
    req.on('data', (part: Buffer) => parts.push(part));
    req.on('end', () => {
      let body: ChatBody;
      try {
        body = JSON.parse(Buffer.concat(parts).toString('utf8')) as ChatBody;
      } catch {
        sendJson(res, 400, errorBody('body is not JSON'));
        return;
      }
      if (config.track) track(res);
      if (latencyMs > 0) setTimeout(() => answer(req, res, body), latencyMs);
      else answer(req, res, body);
    });
  });
  server.headersTimeout = 60_000;
  server.requestTimeout = 0;
  return server;
}

export interface UpstreamProcess extends ChildServer {
  /** The OpenAI SDK style base URL: http://127.0.0.1:PORT/v1 */
  baseUrl: string;
}

/** Starts the fake upstream as a child process, pinned with `taskset -c <cpus>` when cpus is set. */
export async function startUpstream(options: { cpus: string | null; chunks: number; holdChunkMs: number; latencyMs?: number; track?: boolean }): Promise<UpstreamProcess> {
  const args = ['--port', '0', '--chunks', String(options.chunks), '--hold-chunk-ms', String(options.holdChunkMs), '--latency-ms', String(options.latencyMs ?? 0)];
  if (options.track) args.push('--track');
  const child = await startChild('fake upstream', fileURLToPath(import.meta.url), args, options.cpus);
  return { ...child, baseUrl: `http://127.0.0.1:${child.port}/v1` };
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '0' },
      chunks: { type: 'string', default: '8' },
      'hold-chunk-ms': { type: 'string', default: '100' },
      'latency-ms': { type: 'string', default: '0' },
      track: { type: 'boolean', default: false },
    },
  });
  const server = createUpstream({
    port: Number(values.port),
    chunks: Number(values.chunks),
    holdChunkMs: Number(values['hold-chunk-ms']),
    latencyMs: Number(values['latency-ms']),
    track: values.track,
  });
  serveChild(server, Number(values.port));
}
