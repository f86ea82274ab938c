import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { BACKENDS, createTestApp, createToken, type TestApp } from '../helpers/app.js';
import { CLIENT, registerFakeModel, sseData, sseJson, streamedText, usageRowsOf } from '../helpers/inference.js';
import { chatBody } from '../helpers/models.js';
import { listenOnLoopback } from '../helpers/net.js';

/**
 * A streamed chat completion as a client on a real connection gets it, from an upstream the test holds mid-stream:
 * the frames of a first burst reach the client while the upstream waits (none is held back for a frame still to
 * come), and a client that closes the stream unread is still metered and ends its upstream request.
 */

/** Bound of every wait below: far above what each takes, so reaching it means what was awaited never happens. */
const WAIT_MS = 10_000;

/** One streamed call the held upstream answers: its burst at once, the rest when the test releases it. */
interface HeldCall {
  /** The burst's events, as written (one write; empty when the upstream holds even its first event). */
  burst: string;
  /** Events written so far: the burst's, then the rest's once released. */
  sent: number;
  /** `aborted`: the connection closed before the answer was complete (Waygate ended the request). */
  outcome: 'open' | 'finished' | 'aborted';
  /** Sends the rest of the stream. */
  release(): void;
}

interface HeldUpstream {
  baseUrl: string;
  /**
   * The content pieces of the next calls: `burst` sent at once after the role chunk, `rest` once released. With
   * `burst: null` only the response headers are sent at once, the role chunk with the rest.
   */
  script: { burst: string[] | null; rest: string[] };
  /** The next call to arrive, once its response headers and burst have been written. */
  nextCall(): Promise<HeldCall>;
  close(): Promise<void>;
}

/** An OpenAI-compatible streaming upstream on loopback that sends a burst, then waits for the test's release(). */
async function startHeldUpstream(): Promise<HeldUpstream> {
  const sockets = new Set<Socket>();
  const arrived: HeldCall[] = [];
  const waiting: ((call: HeldCall) => void)[] = [];
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { model: string };
    const event = (delta: unknown, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: 'chatcmpl-held', object: 'chat.completion.chunk', created: 1_700_000_000, model: body.model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    const { script } = held;
    const role = event({ role: 'assistant', content: '' });
    const burst = script.burst === null ? [] : [role, ...script.burst.map((content) => event({ content }))];
    const rest = [
      ...(script.burst === null ? [role] : []),
      ...script.rest.map((content) => event({ content })),
      event({}, 'stop'),
      `data: ${JSON.stringify({ id: 'chatcmpl-held', object: 'chat.completion.chunk', created: 1_700_000_000, model: body.model, choices: [], usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 } })}\n\n`,
      'data: [DONE]\n\n',
    ];
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const call: HeldCall = { burst: burst.join(''), sent: 0, outcome: 'open', release };
    const closed = new Promise<void>((resolve) =>
      res.once('close', () => {
        call.outcome = res.writableFinished ? 'finished' : 'aborted';
        resolve();
      }),
    );
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (burst.length === 0) res.flushHeaders();
    else await new Promise((resolve) => res.write(call.burst, resolve));
    call.sent = burst.length;
    const waiter = waiting.shift();
    if (waiter) waiter(call);
    else arrived.push(call);
    await Promise.race([released, closed]);
    for (const text of rest) {
      if (res.destroyed) return;
      await new Promise((resolve) => res.write(text, resolve));
      call.sent++;
    }
    res.end();
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const held: HeldUpstream = {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    script: { burst: [], rest: [] },
    nextCall: () => {
      const call = arrived.shift();
      return call ? Promise.resolve(call) : new Promise((resolve) => waiting.push(resolve));
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return held;
}

/** `promise`, or a failure naming `what` once WAIT_MS have passed without it. */
async function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not happen within ${WAIT_MS} ms`)), WAIT_MS);
  });
  try {
    return await Promise.race([promise, bound]);
  } finally {
    clearTimeout(timer);
  }
}

describe.each(BACKENDS)('a streamed chat completion on a real connection on %s', (backend) => {
  let t: TestApp;
  let upstream: HeldUpstream;
  let token: { id: string; value: string };
  let model: string;
  let port: number;

  beforeAll(async () => {
    t = await createTestApp({ backend, env: { WAYGATE_UPSTREAM_RETRIES: '0' } });
    upstream = await startHeldUpstream();
    token = await createToken(t, { name: 'stream-delivery' });
    model = await registerFakeModel(t, upstream, { upstreamModel: 'gpt-held' });
    port = await listenOnLoopback(t.app);
  });
  /** The test's client requests, ended after each test whatever it left open. */
  const requests = new Set<http.ClientRequest>();
  afterEach(() => {
    for (const request of requests) request.destroy();
    requests.clear();
  });
  afterAll(async () => {
    // The upstream first: a stream it still holds would keep the app's close waiting.
    await upstream?.close();
    await t?.close();
  });

  /** POSTs a streamed chat call to the route on loopback; `response` resolves with the response headers. */
  function openStream(body: Record<string, unknown>, requestId: string): { request: http.ClientRequest; response: Promise<http.IncomingMessage> } {
    const request = http.request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: `${CLIENT}/chat/completions`,
      headers: { authorization: `Bearer ${token.value}`, 'content-type': 'application/json', 'x-request-id': requestId },
    });
    request.on('error', () => {}); // a test's destroy()
    requests.add(request);
    const response = new Promise<http.IncomingMessage>((resolve, reject) => {
      request.once('error', reject);
      request.once('response', resolve);
    });
    request.end(JSON.stringify(body));
    return { request, response };
  }

  async function usageOf(requestId: string) {
    return (await usageRowsOf(t, model)).filter((r) => r.request_id === requestId);
  }

  // Through the route the first frame is always read before the response headers leave (they go out with its write),
  // so a client cannot close the stream before Waygate's first read; it can only leave before anything reached it.
  it.each<[string, string, string[] | null]>([
    ['unread, right after the response headers', 'req-closed-unread', []],
    ['before its first frame (the upstream has sent only its headers)', 'req-closed-before-first', null],
  ])('a stream its client closes %s, is metered once as 499, streamed, and its upstream request ends', async (_when, requestId, burst) => {
    upstream.script = { burst, rest: [' never', ' sent'] };
    const arriving = upstream.nextCall();
    const { request, response } = openStream(chatBody(model, { stream: true }), requestId);
    let headersArrived = false;
    if (burst === null) {
      // Waygate waits for the first event: the client gets nothing, not even the headers, and leaves.
      response.then(() => (headersArrived = true)).catch(() => undefined);
      await within(arriving, 'the upstream call');
    } else {
      const res = await within(response, 'the response headers');
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    }
    // Not a byte of the body is read: the connection goes at once.
    request.destroy();

    const call = await within(arriving, 'the upstream call');
    // The upstream, which was never released, sees its request ended.
    await vi.waitFor(() => expect(call.outcome).toBe('aborted'), { timeout: WAIT_MS, interval: 20 });
    expect(call.sent).toBe(burst === null ? 0 : 1);
    if (burst === null) expect(headersArrived).toBe(false);
    const rows = await vi.waitFor(
      async () => {
        const found = await usageOf(requestId);
        expect(found).toHaveLength(1);
        return found;
      },
      { timeout: WAIT_MS, interval: 50 },
    );
    // No upstream usage arrived: the prompt is estimated (chatBody's message is 10 tokens); the role chunk has no text.
    expect(rows[0]).toMatchObject({ status: 499, streamed: 1, service: 'chat', endpoint: '/chat/completions', input_tokens: 10, output_tokens: 0 });
    // Once, whatever else ends the stream afterwards.
    expect(await usageOf(requestId)).toHaveLength(1);
  });

  it('the frames of a first burst reach the client while the upstream waits: none is held back for a frame still to come', async () => {
    upstream.script = { burst: ['Hel'], rest: ['lo', ' there'] };
    const arriving = upstream.nextCall();
    const { response } = openStream(chatBody(model, { stream: true, stream_options: { include_usage: true } }), 'req-first-burst');
    // The headers leave with the first frame, so they too come only while the upstream is held.
    const res = await within(response, 'the response headers');
    expect(res.statusCode).toBe(200);
    let received = '';
    res.setEncoding('utf8');
    res.on('data', (text: string) => (received += text));
    const ended = new Promise<void>((resolve, reject) => {
      res.once('end', resolve);
      res.once('error', reject);
    });

    const call = await within(arriving, 'the upstream call');
    // The upstream has sent the role chunk and "Hel" and waits for release(): the client gets both frames, byte for
    // byte, although no frame follows them. A batch that waited for the next frame would hold them until release.
    await vi.waitFor(() => expect(received).toBe(call.burst), { timeout: WAIT_MS, interval: 10 });
    expect(sseJson(received)).toHaveLength(2);
    expect(call.sent).toBe(2);
    expect(res.complete).toBe(false);

    call.release();
    await within(ended, 'the end of the stream');
    expect(call.outcome).toBe('finished');
    expect(received.startsWith(call.burst)).toBe(true);
    const events = sseJson(received);
    expect(streamedText(events)).toBe('Hello there');
    expect(events.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 } });
    expect(sseData(received).at(-1)).toBe('[DONE]');
    const rows = await vi.waitFor(
      async () => {
        const found = await usageOf('req-first-burst');
        expect(found).toHaveLength(1);
        return found;
      },
      { timeout: WAIT_MS, interval: 50 },
    );
    expect(rows[0]).toMatchObject({ status: 200, streamed: 1, input_tokens: 10, output_tokens: 3 });
  });
});
