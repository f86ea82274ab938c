import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * Fake model servers for tests, on loopback: an OpenAI-compatible one (`/v1/chat/completions`, `/v1/embeddings`,
 * `/v1/moderations`) and an Anthropic-compatible one (`/v1/messages`). Both record every request and answer either
 * with a sensible default or with the next queued behaviour, so a test can script failures call by call.
 */

export interface RecordedRequest {
  method: string;
  path: string;
  /** The path with its query. */
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Record<string, unknown>;
}

export interface Behaviour {
  /** HTTP status (default 200). */
  status?: number;
  /** JSON body to answer instead of the default (or an error body with `status`). */
  body?: unknown;
  /** Raw text to answer (malformed JSON, for instance). */
  raw?: string;
  /** Milliseconds to wait before the response headers. */
  delayMs?: number;
  /** Never answer (until the client gives up or the server closes). */
  hang?: boolean;
  /** Extra response headers (Retry-After, for instance). */
  headers?: Record<string, string>;
  /** Streaming: the content pieces (default: the words of `reply`). */
  pieces?: string[];
  /** Streaming: choice deltas sent as they are (tool calls, refusals), instead of `pieces`. */
  deltas?: Record<string, unknown>[];
  /** Streaming: send no usage chunk even when asked for. */
  omitUsage?: boolean;
  /** Streaming: after this many content events, send garbage and close the socket. */
  breakAfter?: number;
  /** Streaming: milliseconds between events. */
  pieceDelayMs?: number;
  /** Reply text for chat (default "Hello from the fake upstream"). */
  reply?: string;
  /** Streaming: milliseconds between the last event ([DONE]) and the end of the body. */
  endDelayMs?: number;
  /** Streaming: milliseconds between the response headers (sent at once) and the first event. */
  firstEventDelayMs?: number;
}

export interface FakeUpstream {
  /** Base URL as a model's provider.baseUrl takes it: `http://127.0.0.1:<port>/v1`. */
  baseUrl: string;
  requests: RecordedRequest[];
  /** Queues behaviours for the next requests, in order; afterwards the default answer resumes. */
  queue(...behaviours: Behaviour[]): void;
  /** The behaviour of every request when nothing is queued (default `{}`: answer at once); e.g. `{ delayMs: 100 }`. */
  defaults: Behaviour;
  /** Usage the default answers report. */
  usage: { prompt: number; completion: number };
  /** Requests whose connection closed before their answer was complete. */
  aborted: number;
  close(): Promise<void>;
}

const DEFAULT_REPLY = 'Hello from the fake upstream';

function readBody(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>);
      } catch {
        resolve({});
      }
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Handler = (req: RecordedRequest, res: http.ServerResponse, behaviour: Behaviour, fake: FakeUpstream) => Promise<void>;

async function startFake(handlers: Record<string, Handler>): Promise<FakeUpstream> {
  const queued: Behaviour[] = [];
  const sockets = new Set<Socket>();
  const fake: FakeUpstream = {
    baseUrl: '',
    requests: [],
    usage: { prompt: 10, completion: 5 },
    aborted: 0,
    defaults: {},
    queue: (...behaviours) => void queued.push(...behaviours),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  const server = http.createServer(async (req, res) => {
    const body = await readBody(req);
    const path = (req.url ?? '').split('?')[0]!;
    const recorded: RecordedRequest = { method: req.method ?? '', path, url: req.url ?? '', headers: req.headers, body };
    fake.requests.push(recorded);
    res.on('close', () => {
      if (!res.writableFinished) fake.aborted++;
    });
    const behaviour = queued.shift() ?? fake.defaults;
    if (behaviour.hang) return;
    if (behaviour.delayMs) await sleep(behaviour.delayMs);
    if (behaviour.raw !== undefined || (behaviour.status ?? 200) !== 200 || behaviour.body !== undefined) {
      const text = behaviour.raw ?? JSON.stringify(behaviour.body ?? { error: { message: `fake failure ${behaviour.status}`, type: 'server_error' } });
      res.writeHead(behaviour.status ?? 200, { 'content-type': 'application/json', ...behaviour.headers });
      res.end(text);
      return;
    }
    const handler = handlers[path];
    if (!handler) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `no route ${path}`, type: 'invalid_request_error' } }));
      return;
    }
    await handler(recorded, res, behaviour, fake);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return fake;
}

function piecesOf(behaviour: Behaviour): string[] {
  return behaviour.pieces ?? (behaviour.reply ?? DEFAULT_REPLY).match(/\s*\S+/g) ?? [];
}

/** Writes SSE events; with `breakAfter`, garbage and a reset connection after that many content events. */
async function writeEvents(res: http.ServerResponse, events: string[], behaviour: Behaviour, contentCount: number): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  if (behaviour.firstEventDelayMs) {
    res.flushHeaders();
    await sleep(behaviour.firstEventDelayMs);
  }
  let sent = 0;
  for (const event of events) {
    if (behaviour.breakAfter !== undefined && sent >= behaviour.breakAfter + 1 && contentCount > 0) {
      await new Promise((resolve) => res.write('data: {"broken": \n\n', resolve));
      res.socket?.destroy();
      return;
    }
    if (res.destroyed) return;
    // Each event is flushed before the next, so a break happens after the client has seen the events before it.
    await new Promise((resolve) => res.write(event, resolve));
    sent++;
    if (behaviour.pieceDelayMs) await sleep(behaviour.pieceDelayMs);
  }
  if (behaviour.endDelayMs) await sleep(behaviour.endDelayMs);
  res.end();
}

const openAiHandlers: Record<string, Handler> = {
  '/v1/chat/completions': async (req, res, behaviour, fake) => {
    const model = String(req.body.model);
    const reply = behaviour.reply ?? DEFAULT_REPLY;
    const usage = { prompt_tokens: fake.usage.prompt, completion_tokens: fake.usage.completion, total_tokens: fake.usage.prompt + fake.usage.completion };
    if (req.body.stream !== true) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'chatcmpl-fake',
          object: 'chat.completion',
          created: 1_700_000_000,
          model,
          choices: [{ index: 0, message: { role: 'assistant', content: reply }, finish_reason: 'stop' }],
          usage,
        }),
      );
      return;
    }
    const chunk = (delta: unknown, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', created: 1_700_000_000, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    const pieces = piecesOf(behaviour);
    const deltas = behaviour.deltas ?? pieces.map((p) => ({ content: p }));
    const events = [chunk({ role: 'assistant', content: '' }), ...deltas.map((d) => chunk(d)), chunk({}, 'stop')];
    const wantsUsage = (req.body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
    if (wantsUsage && !behaviour.omitUsage) {
      events.push(`data: ${JSON.stringify({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', created: 1_700_000_000, model, choices: [], usage })}\n\n`);
    }
    events.push('data: [DONE]\n\n');
    await writeEvents(res, events, behaviour, pieces.length);
  },
  '/v1/embeddings': async (req, res, _behaviour, fake) => {
    const inputs = Array.isArray(req.body.input) && typeof req.body.input[0] !== 'number' ? req.body.input : [req.body.input];
    const vector = [0.1, 0.2, 0.3];
    const base64 = req.body.encoding_format === 'base64';
    const data = inputs.map((_, index) => ({
      object: 'embedding',
      index,
      embedding: base64 ? Buffer.from(new Float32Array(vector).buffer).toString('base64') : vector,
    }));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ object: 'list', data, model: req.body.model, usage: { prompt_tokens: fake.usage.prompt, total_tokens: fake.usage.prompt } }));
  },
  '/v1/moderations': async (req, res) => {
    const inputs = Array.isArray(req.body.input) ? req.body.input : [req.body.input];
    const results = inputs.map((text) => ({ flagged: String(text).includes('flag me'), categories: { violence: String(text).includes('flag me') }, category_scores: { violence: 0.9 } }));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id: 'modr-fake', model: req.body.model, results }));
  },
};

/** An OpenAI-compatible fake upstream on a free loopback port. */
export function startFakeOpenAi(): Promise<FakeUpstream> {
  return startFake(openAiHandlers);
}

const anthropicHandlers: Record<string, Handler> = {
  '/v1/messages': async (req, res, behaviour, fake) => {
    const model = String(req.body.model);
    const reply = behaviour.reply ?? DEFAULT_REPLY;
    if (req.body.stream !== true) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'msg_fake',
          type: 'message',
          role: 'assistant',
          model,
          content: [{ type: 'text', text: reply }],
          stop_reason: 'end_turn',
          usage: { input_tokens: fake.usage.prompt, output_tokens: fake.usage.completion },
        }),
      );
      return;
    }
    const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    const pieces = piecesOf(behaviour);
    const events = [
      event('message_start', { message: { id: 'msg_fake', type: 'message', role: 'assistant', model, content: [], usage: { input_tokens: fake.usage.prompt, output_tokens: 1 } } }),
      event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
      event('ping', {}),
      ...pieces.map((text) => event('content_block_delta', { index: 0, delta: { type: 'text_delta', text } })),
      event('content_block_stop', { index: 0 }),
      event('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: fake.usage.completion } }),
      event('message_stop', {}),
    ];
    await writeEvents(res, events, behaviour, pieces.length);
  },
};

/** An Anthropic Messages API fake upstream on a free loopback port. */
export function startFakeAnthropic(): Promise<FakeUpstream> {
  return startFake(anthropicHandlers);
}
