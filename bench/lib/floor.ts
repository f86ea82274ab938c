/**
 * The floor target of the inference benchmark: the least a metering gateway must do per call, written straight on
 * node:http, undici's dispatch API, better-sqlite3 and pino, with no framework and no other feature. It shows how
 * fast a Node.js gateway can be on this machine and this pinning once it checks a token, reads the body, calls the
 * upstream, reads the usage, stores one usage event and logs one line, so that Waygate's figures can be read
 * against what its duties alone cost, as the bare proxy shows what the hop alone costs.
 *
 *   node --import tsx bench/lib/floor.ts --port 0 --upstream http://127.0.0.1:PORT --token TOKEN --models KEY=UPSTREAM,... [--fastify]
 *
 * Per call: the bearer token's SHA-256 looked up in a map (401 otherwise); the JSON body parsed (400 unless an
 * object), its `model` looked up (404 otherwise) and replaced by the upstream model; the call dispatched with keep-alive; a non-stream answer
 * parsed for its usage and sent back with `x-request-id` and `x-waygate-overhead-ms`; a stream piped back chunk by
 * chunk, its usage read from the event that carries it. Every call adds one row to `usage_events` (21 columns, one
 * index on project and time), written 50 rows a transaction off the request path together with an hourly and a daily
 * rollup, as Waygate does; every call logs one JSON line through pino into Waygate's own log destination (4 KB batches,
 * 100 ms; until run 17 pino.destination with the same batch settings). The data
 * directory is a temp directory, removed on exit.
 *
 * With `--fastify` (the `floor-fastify` target) the same duties run inside one Fastify route, as Waygate is served:
 * the step from the floor to it is what the framework costs, and the step from it to Waygate is Waygate's own layers.
 */
import { hash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import pino from 'pino';
import { Agent, type Dispatcher } from 'undici';
import { LogDestination } from '../../src/platform/log-destination.js';
import { isJsonObject } from '../../src/platform/text.js';
import { DAY_MS, HOUR_MS } from '../../src/platform/time.js';
import { serveChild, startChild, type ChildServer } from './child.js';
import { UPSTREAM_API_KEY } from './upstream.js';

const FLUSH_ROWS = 50;
const ROWS_PER_STATEMENT = 10;

interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
}

/** As Waygate's hashToken: the one-shot hash, without a Hash object per call. */
const sha256 = (text: string) => hash('sha256', text, 'hex');

function openUsageStore(file: string) {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(`
    create table usage_events (id text primary key, tenant_id text not null, project_id text not null, token_id text,
      user_id text, model text not null, provider text not null, service text not null, endpoint text not null,
      input_tokens integer not null, output_tokens integer not null, total_tokens integer not null, cost real not null,
      currency text not null, latency_ms real not null, upstream_latency_ms real not null, status integer not null,
      request_id text not null, session_id text, streamed integer not null, created_at integer not null);
    create index usage_events_project_time on usage_events (tenant_id, project_id, created_at);
    create table usage_rollups (period text not null, start integer not null, model text not null, requests integer not null,
      input_tokens integer not null, output_tokens integer not null, primary key (period, start, model));`);
  const row = `(${Array(21).fill('?').join(',')})`;
  const insert = db.prepare(`insert into usage_events values ${Array(ROWS_PER_STATEMENT).fill(row).join(',')}`);
  const insertOne = db.prepare(`insert into usage_events values ${row}`);
  const rollup = db.prepare(
    `insert into usage_rollups values (?, ?, ?, ?, ?, ?) on conflict (period, start, model) do update set
       requests = requests + excluded.requests, input_tokens = input_tokens + excluded.input_tokens,
       output_tokens = output_tokens + excluded.output_tokens`,
  );
  /** Writes the rows (arrays in column order, model at 5, tokens at 9 and 10, time at 20) in one transaction. */
  return db.transaction((rows: unknown[][]) => {
    let i = 0;
    for (; i + ROWS_PER_STATEMENT <= rows.length; i += ROWS_PER_STATEMENT) insert.run(rows.slice(i, i + ROWS_PER_STATEMENT).flat());
    for (; i < rows.length; i++) insertOne.run(rows[i]);
    const sums = new Map<string, [string, number, string, number, number, number]>();
    for (const r of rows) {
      for (const [period, size] of [['hour', HOUR_MS], ['day', DAY_MS]] as const) {
        const start = Math.floor((r[20] as number) / size) * size;
        const key = `${period}|${start}|${r[5]}`;
        const sum = sums.get(key) ?? [period, start, r[5] as string, 0, 0, 0];
        sum[3] += 1;
        sum[4] += r[9] as number;
        sum[5] += r[10] as number;
        sums.set(key, sum);
      }
    }
    for (const sum of sums.values()) rollup.run(sum);
  });
}

/** Where the duties send a call's answer: node:http's response, or Fastify's reply. */
interface Answerer {
  fail(status: number, message: string): void;
  /** A non-stream answer, whole. */
  answer(status: number, headers: Record<string, string>, body: Buffer): void;
  /** A stream's head, then its chunks as they come, then its end; `abort` when the upstream failed mid-stream. */
  streamHead(status: number, headers: Record<string, string>): void;
  streamChunk(chunk: Buffer): void;
  streamEnd(): void;
  abort(): void;
  readonly started: boolean;
}

/** One parsed call as the front end hands it over. */
interface FloorCall {
  tokenId: string;
  body: Record<string, unknown>;
  path: string;
  requestId: string;
  started: number;
  /** Called once the call is metered, with its status, for the front end's log line. */
  logged(status: number): void;
}

/**
 * A call's duties after the front end has parsed it: the model looked up and swapped, the upstream call, the usage
 * read, one usage row queued. Shared by both front ends, so that they differ only in what serves HTTP.
 */
function floorDuties(upstreamOrigin: string, token: string, models: Map<string, string>, dataDir: string) {
  const agent = new Agent({ keepAliveTimeout: 30_000, connections: null });
  const tokens = new Map([[sha256(token), 'token-1']]);
  const writeRows = openUsageStore(path.join(dataDir, 'usage.db'));
  const log = pino({ level: 'info' }, new LogDestination(fs.openSync(path.join(dataDir, 'server.log'), 'a'), 4096, 100));
  let pending: unknown[][] = [];
  let sequence = 0;
  const flush = () => {
    const rows = pending;
    pending = [];
    writeRows(rows);
  };
  const meter = (tokenId: string, model: string, endpoint: string, usage: Usage, started: number, upstreamMs: number, status: number, requestId: string, streamed: boolean) => {
    const input = usage.prompt_tokens ?? 0;
    const output = usage.completion_tokens ?? 0;
    pending.push([`ue_${requestId}`, 'tenant-1', 'project-1', tokenId, null, model, 'openai-compatible', 'api', endpoint, input, output, usage.total_tokens ?? input + output,
      (input * 0.5 + output * 1.5) / 1e6, 'USD', performance.now() - started, upstreamMs, status, requestId, null, streamed ? 1 : 0, Date.now()]);
    if (pending.length === FLUSH_ROWS) setImmediate(flush);
  };
  const authenticate = (authorization: string | undefined): string | undefined => {
    const bearer = /^Bearer (\S+)$/.exec(authorization ?? '');
    return bearer ? tokens.get(sha256(bearer[1]!)) : undefined;
  };
  const nextRequestId = () => `req_${(++sequence).toString(36)}`;

  const forward = (call: FloorCall, out: Answerer): void => {
    const { body, requestId, started } = call;
    const upstreamModel = typeof body.model === 'string' ? models.get(body.model) : undefined;
    if (!upstreamModel) return out.fail(404, 'unknown model');
    const model = body.model as string;
    const endpoint = call.path.endsWith('/embeddings') ? 'embeddings' : 'chat';
    const streamed = body.stream === true;
    body.model = upstreamModel;
    const chunks: Buffer[] = [];
    let status = 0;
    let usage: Usage = {};
    const sent = performance.now();
    const handler: Dispatcher.DispatchHandler = {
      onConnect: () => {},
      onError: (err) => (out.started ? out.abort() : out.fail(502, err.message)),
      onHeaders: (statusCode) => {
        status = statusCode;
        if (streamed) out.streamHead(statusCode, { 'content-type': 'text/event-stream', 'x-request-id': requestId });
        return true;
      },
      onData: (chunk) => {
        if (!streamed) chunks.push(chunk);
        else {
          const text = chunk.toString('utf8');
          const at = text.indexOf('"usage":{');
          try {
            if (at >= 0) usage = (JSON.parse(text.slice(text.lastIndexOf('data: ', at) + 6, text.indexOf('\n', at))) as { usage: Usage }).usage;
          } catch {
            // An event split across two reads: this call is metered without usage.
          }
          out.streamChunk(chunk);
        }
        return true;
      },
      onComplete: () => {
        const upstreamMs = performance.now() - sent;
        if (streamed) out.streamEnd();
        else {
          const answer = Buffer.concat(chunks);
          try {
            usage = (JSON.parse(answer.toString('utf8')) as { usage?: Usage }).usage ?? {};
          } catch {
            return out.fail(502, 'upstream answer is not JSON');
          }
          out.answer(status, { 'content-type': 'application/json', 'x-request-id': requestId, 'x-waygate-overhead-ms': (performance.now() - started - upstreamMs).toFixed(3) }, answer);
        }
        meter(call.tokenId, model, endpoint, usage, started, upstreamMs, status, requestId, streamed);
        call.logged(status);
      },
    };
    agent.dispatch({ origin: upstreamOrigin, path: call.path, method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${UPSTREAM_API_KEY}` }, body: JSON.stringify(body) }, handler);
  };
  return { authenticate, nextRequestId, forward, log };
}

/** The floor on node:http: the body read and parsed by hand, one log line per call. */
export function createFloorGateway(upstreamOrigin: string, token: string, models: Map<string, string>, dataDir: string): http.Server {
  const duties = floorDuties(upstreamOrigin, token, models, dataDir);
  const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    const started = performance.now();
    const requestId = duties.nextRequestId();
    const tokenId = duties.authenticate(req.headers.authorization);
    const out: Answerer = {
      fail: (status, message) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message } }));
      },
      answer: (status, headers, body) => {
        res.writeHead(status, headers);
        res.end(body);
      },
      streamHead: (status, headers) => res.writeHead(status, headers),
      streamChunk: (chunk) => res.write(chunk),
      streamEnd: () => res.end(),
      abort: () => res.destroy(),
      get started() {
        return res.headersSent;
      },
    };
    const parts: Buffer[] = [];
    req.on('data', (part: Buffer) => parts.push(part));
    req.on('end', () => {
      if (!tokenId) return out.fail(401, 'invalid token');
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(parts).toString('utf8'));
      } catch {
        return out.fail(400, 'body is not JSON');
      }
      if (!isJsonObject(body)) return out.fail(400, 'body is not a JSON object');
      const logged = (status: number) =>
        duties.log.info({ requestId, method: req.method, url: req.url, statusCode: status, ms: Math.round((performance.now() - started) * 100) / 100 }, 'request');
      duties.forward({ tokenId, body, path: req.url ?? '/', requestId, started, logged }, out);
    });
  });
  server.headersTimeout = 60_000;
  server.requestTimeout = 0;
  return server;
}

/**
 * The same duties inside one Fastify route, as Waygate is served: Fastify's router, JSON body parser and reply, the
 * log line from an onResponse hook. Streams are written to the raw response after `reply.hijack()`. The difference
 * from the floor gateway is what the framework costs; the difference from Waygate is what Waygate's own layers cost.
 */
export function createFastifyFloorGateway(upstreamOrigin: string, token: string, models: Map<string, string>, dataDir: string): FastifyInstance {
  const duties = floorDuties(upstreamOrigin, token, models, dataDir);
  const app = Fastify({
    loggerInstance: duties.log,
    logController: new LogController({ disableRequestLogging: true }),
    keepAliveTimeout: 65_000,
    requestTimeout: 0,
  }) as unknown as FastifyInstance;
  app.addHook('onResponse', (request, reply, done) => {
    request.log.info({ method: request.method, url: request.url, statusCode: reply.statusCode, ms: Math.round(reply.elapsedTime * 100) / 100 }, 'request');
    done();
  });
  const route = (request: FastifyRequest, reply: FastifyReply) => {
    const fail = (status: number, message: string) => void reply.code(status).send({ error: { message } });
    const tokenId = duties.authenticate(request.headers.authorization);
    if (!tokenId) return fail(401, 'invalid token');
    if (!isJsonObject(request.body)) return fail(400, 'body is not a JSON object');
    const out: Answerer = {
      fail,
      answer: (status, headers, body) => void reply.code(status).headers(headers).send(body),
      streamHead: (status, headers) => {
        reply.hijack();
        reply.raw.writeHead(status, headers);
      },
      streamChunk: (chunk) => reply.raw.write(chunk),
      streamEnd: () => reply.raw.end(),
      abort: () => reply.raw.destroy(),
      get started() {
        return reply.sent;
      },
    };
    duties.forward({ tokenId, body: request.body, path: request.url, requestId: duties.nextRequestId(), started: performance.now() - reply.elapsedTime, logged: () => {} }, out);
    return reply;
  };
  app.post('/v1/chat/completions', route);
  app.post('/v1/embeddings', route);
  return app;
}

/** Starts the floor gateway (on Fastify with `fastify`) as a child process, pinned with `taskset -c <cpus>` when cpus is set. */
export function startFloorGateway(options: { cpus: string | null; upstreamOrigin: string; token: string; models: Record<string, string>; fastify?: boolean }): Promise<ChildServer> {
  const models = Object.entries(options.models).map(([key, upstreamModel]) => `${key}=${upstreamModel}`).join(',');
  const args = ['--port', '0', '--upstream', options.upstreamOrigin, '--token', options.token, '--models', models, ...(options.fastify ? ['--fastify'] : [])];
  return startChild(options.fastify ? 'floor gateway on Fastify' : 'floor gateway', fileURLToPath(import.meta.url), args, options.cpus);
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const { values } = parseArgs({ options: { port: { type: 'string', default: '0' }, upstream: { type: 'string' }, token: { type: 'string' }, models: { type: 'string' }, fastify: { type: 'boolean', default: false } } });
  if (!values.upstream || !values.token || !values.models) throw new Error('--upstream http://127.0.0.1:PORT, --token and --models KEY=UPSTREAM,... are required');
  const models = new Map(values.models.split(',').map((pair) => pair.split('=') as [string, string]));
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-floor-'));
  process.on('exit', () => fs.rmSync(dataDir, { recursive: true, force: true }));
  const origin = new URL(values.upstream).origin;
  if (values.fastify) {
    const app = createFastifyFloorGateway(origin, values.token, models, dataDir);
    await app.ready();
    serveChild(app.server, Number(values.port));
  } else {
    serveChild(createFloorGateway(origin, values.token, models, dataDir), Number(values.port));
  }
}
