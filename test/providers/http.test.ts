import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { UpstreamError } from '../../src/providers/errors.js';
import { UpstreamClient, type UpstreamSettings } from '../../src/providers/http.js';

/** What the scratch upstream does with the next request; each test sets it. */
type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

let handler: Handler = (_req, res) => res.end('{}');
let received = 0;
/** Resolves when the current request's connection or response closes (the client gave up, or it finished). */
let closed: Promise<void> = Promise.resolve();
const server = http.createServer((req, res) => {
  received++;
  closed = new Promise((resolve) => res.on('close', resolve));
  req.resume();
  req.on('end', () => handler(req, res));
});
let url = '';
const clients: UpstreamClient[] = [];

function client(settings: Partial<UpstreamSettings> = {}): UpstreamClient {
  const made = new UpstreamClient({ connectTimeoutMs: 2_000, readTimeoutMs: 2_000, retries: 0, ...settings });
  clients.push(made);
  return made;
}

function call(signal: AbortSignal = new AbortController().signal) {
  return { url, headers: { 'x-request-id': 'req-1' }, body: '{"model":"m"}', signal };
}

async function failureOf(promise: Promise<unknown>): Promise<UpstreamError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(UpstreamError);
  return err as UpstreamError;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions?api-version=1`;
});
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  received = 0;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('UpstreamClient (undici dispatch)', () => {
  it('reads a JSON answer written in pieces, multi-byte characters split across them, and sends the path with its query', async () => {
    let seen = '';
    handler = (req, res) => {
      seen = `${req.method} ${req.url} ${req.headers['content-type']} ${req.headers['x-request-id']}`;
      const text = Buffer.from('{"reply":"héllo wörld €"}');
      res.write(text.subarray(0, 12));
      setTimeout(() => res.end(text.subarray(12)), 5);
    };
    const answer = await client().postJson(call());
    expect(answer.text).toBe('{"reply":"héllo wörld €"}');
    expect(seen).toBe('POST /v1/chat/completions?api-version=1 application/json req-1');
  });

  it('a non-2xx answer is an http failure carrying the status, the error body and Retry-After', async () => {
    handler = (_req, res) => {
      res.writeHead(429, { 'content-type': 'application/json', 'Retry-After': '30' });
      res.end('{"error":{"message":"slow down","type":"rate_limit"}}');
    };
    const failure = await failureOf(client().postJson(call()));
    expect(failure.failure).toBe('http');
    expect(failure.status).toBe(429);
    expect(failure.body?.error.message).toBe('slow down');
    expect(failure.retryAfterMs).toBe(30_000);
  });

  it('retries a 503 (with Retry-After: 0) and returns the success that follows', async () => {
    let calls = 0;
    handler = (_req, res) => {
      calls++;
      if (calls === 1) {
        res.writeHead(503, { 'retry-after': '0' });
        res.end('busy');
      } else res.end('{"ok":true}');
    };
    const answer = await client({ retries: 2 }).postJson(call());
    expect(answer.text).toBe('{"ok":true}');
    expect(calls).toBe(2);
  });

  it('an answer over maxResponseBytes is refused', async () => {
    handler = (_req, res) => res.end('x'.repeat(50_000));
    const failure = await failureOf(client({ maxResponseBytes: 1_000 }).postJson(call()));
    expect(failure.failure).toBe('refused');
  });

  it('a signal aborted before the call sends nothing', async () => {
    const controller = new AbortController();
    controller.abort();
    const failure = await failureOf(client().postJson(call(controller.signal)));
    expect(failure.failure).toBe('aborted');
    expect(received).toBe(0);
  });

  it('a client that goes away while the upstream thinks ends the upstream request', async () => {
    handler = () => {};
    const controller = new AbortController();
    const pending = client().postJson(call(controller.signal));
    while (received === 0) await sleep(5);
    controller.abort();
    const failure = await failureOf(pending);
    expect(failure.failure).toBe('aborted');
    await closed;
  });

  it('calls sharing one signal (a keep-alive connection): those finished stay done, and an abort ends every call still running', async () => {
    const controller = new AbortController();
    // Far longer than the test may take: a call the abort missed would wait for the upstream that never answers.
    const upstream = client({ readTimeoutMs: 60_000 });
    handler = (_req, res) => res.end('{"ok":true}');
    for (let i = 0; i < 3; i++) expect((await upstream.postJson(call(controller.signal))).text).toBe('{"ok":true}');
    handler = () => {};
    const running = [upstream.postJson(call(controller.signal)), upstream.postJson(call(controller.signal))];
    while (received < 5) await sleep(5);
    controller.abort();
    for (const pending of running) expect((await failureOf(pending)).failure).toBe('aborted');
    // A call made after the abort sends nothing.
    expect((await failureOf(upstream.postJson(call(controller.signal)))).failure).toBe('aborted');
    expect(received).toBe(5);
  });

  // Regression: the failure of the last attempt alone said whether the request had reached the upstream, so a call
  // whose first attempt was sent (and may have been billed upstream) counted as never sent once a retry was refused.
  it('a call whose first attempt reached the upstream and timed out stays marked as reached when the retry is refused', async () => {
    const closing = http.createServer(() => {
      // Stops listening and never answers: the attempt times out, and the retry finds no listener.
      closing.close();
    });
    await new Promise<void>((resolve) => closing.listen(0, '127.0.0.1', resolve));
    const target = `http://127.0.0.1:${(closing.address() as AddressInfo).port}/v1/chat/completions`;
    try {
      const failure = await failureOf(client({ readTimeoutMs: 100, retries: 1 }).postJson({ ...call(), url: target }));
      expect(failure.failure).toBe('connection');
      expect(failure.reachedUpstream).toBe(true);
    } finally {
      closing.closeAllConnections();
    }
  });

  it('a call whose first attempt was cut off after it was sent stays marked as reached when its client leaves during the backoff', async () => {
    const controller = new AbortController();
    handler = (req) => {
      req.socket.destroy();
      // The backoff before the retry is at least 150 ms: the client leaves in it (or, on a slow machine, still in the
      // first attempt, which was sent all the same).
      setTimeout(() => controller.abort(), 50);
    };
    const failure = await failureOf(client({ retries: 1 }).postJson(call(controller.signal)));
    expect(failure.failure).toBe('aborted');
    expect(failure.reachedUpstream).toBe(true);
    expect(received).toBe(1);
  });

  it('a call whose first attempt timed out after it was sent stays marked as reached when the retry gets an error status', async () => {
    let attempts = 0;
    handler = (_req, res) => {
      if (++attempts === 2) res.writeHead(503).end('{"error":{"message":"busy"}}');
    };
    const failure = await failureOf(client({ readTimeoutMs: 100, retries: 1 }).postJson(call()));
    expect(failure).toMatchObject({ failure: 'http', status: 503, reachedUpstream: true });
  });

  it('an upstream silent past the read timeout is a timeout', async () => {
    handler = () => {};
    const failure = await failureOf(client({ readTimeoutMs: 100 }).postJson(call()));
    expect(failure.failure).toBe('timeout');
  });

  it('a stream is handed over at its headers; a slow reader gets every byte in order (the socket paused meanwhile)', async () => {
    const pieces = Array.from({ length: 200 }, (_, i) => `data: ${String(i).padStart(4, '0')}${'.'.repeat(1_000)}\n\n`);
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const piece of pieces) res.write(piece);
      res.end();
    };
    const answer = await client().postStream(call());
    const read: Buffer[] = [];
    for await (const chunk of answer.body) {
      read.push(chunk);
      if (read.length % 10 === 0) await sleep(2);
    }
    expect(Buffer.concat(read).toString()).toBe(pieces.join(''));
  });

  it('a stream reader that stops early ends the upstream request', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const timer = setInterval(() => res.write('data: {}\n\n'), 5);
      res.on('close', () => clearInterval(timer));
    };
    const answer = await client().postStream(call());
    for await (const chunk of answer.body) {
      expect(chunk.toString()).toContain('data:');
      break;
    }
    await closed;
  });

  it('a stream that goes silent mid-way fails its reader with a timeout', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {}\n\n');
    };
    const answer = await client({ readTimeoutMs: 100 }).postStream(call());
    const chunks: string[] = [];
    const failure = await failureOf(
      (async () => {
        for await (const chunk of answer.body) chunks.push(chunk.toString());
      })(),
    );
    expect(failure.failure).toBe('timeout');
    expect(chunks).toEqual(['data: {}\n\n']);
  });

  it('a client that goes away mid-stream fails its reader as aborted and ends the upstream request', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {}\n\n');
    };
    const controller = new AbortController();
    const answer = await client().postStream(call(controller.signal));
    const reading = (async () => {
      for await (const chunk of answer.body) if (chunk.length > 0) controller.abort();
    })();
    expect((await failureOf(reading)).failure).toBe('aborted');
    await closed;
  });

  it('a non-2xx answer to a stream is an http failure with its body, before anything is handed over', async () => {
    handler = (_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"bad model","type":"invalid_request_error"}}');
    };
    const failure = await failureOf(client().postStream(call()));
    expect(failure.status).toBe(400);
    expect(failure.body?.error.message).toBe('bad model');
  });
});
