import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { listenOnLoopback } from '../helpers/net.js';
import { BACKENDS } from '../helpers/app.js';
import { CLIENT, post, registerFakeModel, setupInference, sseData, sseJson, streamedText, usageRowsOf, type InferenceSetup } from '../helpers/inference.js';
import { chatBody } from '../helpers/models.js';

/**
 * Streamed chat completions through an OpenAI-compatible upstream: the SSE framing, the usage chunk (always asked
 * upstream, shown only when the client asked), counted usage when the upstream sends none, broken upstream streams,
 * and a client that goes away mid-stream.
 */

/** Read timeout of the app under test: longer than any pause of the streams below except the one that tests it. */
const READ_TIMEOUT_MS = 1_000;
/** undici checks read timeouts on a coarse clock (ticks of about half a second): a silence that must time out is long. */
const SILENCE_MS = 4_000;
const FAKE_REPLY = 'Hello from the fake upstream';

type Chunk = { id?: string; object?: string; model?: string; choices?: { delta?: { content?: string; role?: string }; finish_reason?: string | null }[]; usage?: Record<string, number> };

describe.each(BACKENDS)('streamed chat completions on %s', (backend) => {
  let s: InferenceSetup;
  let model: string;
  const stream = (extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
    post(s.t, s.token.value, '/chat/completions', chatBody(model, { stream: true, ...extra }), headers);

  beforeAll(async () => {
    s = await setupInference({ backend, env: { WAYGATE_UPSTREAM_TIMEOUT_MS: String(READ_TIMEOUT_MS), WAYGATE_UPSTREAM_RETRIES: '0' } });
    model = await registerFakeModel(s.t, s.fake, { upstreamModel: 'gpt-stream' });
  });
  afterAll(async () => s.close());

  it('answers text/event-stream, forwards every chunk and ends with data: [DONE]; no usage chunk unless asked', async () => {
    const res = await stream({}, { 'x-request-id': 'req-stream-1' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.headers['x-request-id']).toBe('req-stream-1');
    expect(Number(res.headers['x-waygate-overhead-ms'])).toBeGreaterThanOrEqual(0);
    expect(res.body.endsWith('data: [DONE]\n\n')).toBe(true);
    const data = sseData(res.body);
    expect(data.filter((d) => d === '[DONE]')).toHaveLength(1);
    const events = sseJson(res.body) as Chunk[];
    // role chunk, one chunk per word, the finish chunk.
    expect(events).toHaveLength(2 + FAKE_REPLY.split(' ').length);
    expect(streamedText(events)).toBe(FAKE_REPLY);
    for (const event of events) {
      expect(event).toMatchObject({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', model: 'gpt-stream' });
      expect(event.usage).toBeUndefined();
    }
    expect(events[0]!.choices![0]!.delta).toEqual({ role: 'assistant', content: '' });
    expect(events.at(-1)!.choices![0]!.finish_reason).toBe('stop');

    // Waygate always asks the upstream for usage, whatever the client asked.
    const upstream = s.fake.requests.at(-1)!;
    expect(upstream.headers['x-request-id']).toBe('req-stream-1');
    expect(upstream.body).toEqual({ ...chatBody('gpt-stream'), stream: true, stream_options: { include_usage: true } });
  });

  it('include_usage false is overridden upstream and the usage chunk is still withheld', async () => {
    const res = await stream({ stream_options: { include_usage: false } });
    expect(res.statusCode, res.body).toBe(200);
    expect(s.fake.requests.at(-1)!.body.stream_options).toEqual({ include_usage: true });
    const events = sseJson(res.body) as Chunk[];
    expect(events.filter((e) => e.usage !== undefined)).toEqual([]);
    expect(streamedText(events)).toBe(FAKE_REPLY);
  });

  it('with stream_options.include_usage the upstream usage chunk is forwarded as the last event before [DONE]', async () => {
    const res = await stream({ stream_options: { include_usage: true } });
    expect(res.statusCode, res.body).toBe(200);
    const data = sseData(res.body);
    expect(data.at(-1)).toBe('[DONE]');
    const usageChunk = JSON.parse(data.at(-2)!) as Chunk;
    expect(usageChunk).toEqual({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'gpt-stream', choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } });
    expect((sseJson(res.body) as Chunk[]).filter((e) => e.usage !== undefined)).toHaveLength(1);
  });

  it('when the upstream sends no usage and the client asked, Waygate sends a counted usage chunk', async () => {
    s.fake.queue({ omitUsage: true });
    const res = await stream({ stream_options: { include_usage: true } });
    expect(res.statusCode, res.body).toBe(200);
    const data = sseData(res.body);
    expect(data.at(-1)).toBe('[DONE]');
    const counted = JSON.parse(data.at(-2)!) as Chunk;
    // Waygate's estimator: prompt = 3 (reply priming) + 4 (one message) + "Say" 1 + "hello" 2 = 10;
    // completion = "Hello" 2 + "from" 1 + "the" 1 + "fake" 1 + "upstream" 2 = 7.
    expect(counted).toEqual({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'gpt-stream', choices: [], usage: { prompt_tokens: 10, completion_tokens: 7, total_tokens: 17 } });
  });

  it('when the upstream sends no usage and the client did not ask, no usage chunk is made up', async () => {
    s.fake.queue({ omitUsage: true });
    const res = await stream();
    expect(res.statusCode, res.body).toBe(200);
    expect((sseJson(res.body) as Chunk[]).filter((e) => e.usage !== undefined)).toEqual([]);
    expect(sseData(res.body).at(-1)).toBe('[DONE]');
  });

  it('an upstream that ignores stream: true and answers one chat.completion is replayed to the client as a stream', async () => {
    const completion = {
      id: 'chatcmpl-whole',
      object: 'chat.completion',
      created: 1_700_000_001,
      model: 'gpt-stream',
      choices: [{ index: 0, message: { role: 'assistant', content: 'All at once' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 },
    };
    s.fake.queue({ body: completion });
    const res = await stream({ stream_options: { include_usage: true } }, { 'x-request-id': 'req-whole' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    const events = sseJson(res.body) as Chunk[];
    expect(streamedText(events)).toBe('All at once');
    expect(events.every((e) => e.object === 'chat.completion.chunk' && e.id === 'chatcmpl-whole')).toBe(true);
    expect(events.at(-2)!.choices![0]!.finish_reason).toBe('stop');
    expect(events.at(-1)!.usage).toEqual(completion.usage);
    expect(sseData(res.body).at(-1)).toBe('[DONE]');
    const row = (await usageRowsOf(s.t, model)).find((r) => r.request_id === 'req-whole');
    expect(row).toMatchObject({ status: 200, input_tokens: 10, output_tokens: 3 });
  });

  it('an upstream event whose JSON spans several data: lines reaches the client as valid SSE', async () => {
    const chunk = { id: 'chatcmpl-lines', object: 'chat.completion.chunk', created: 1, model: 'gpt-stream', choices: [{ index: 0, delta: { content: 'multi' }, finish_reason: null }] };
    const pretty = JSON.stringify(chunk, null, 2).split('\n').map((line) => `data: ${line}\n`).join('');
    s.fake.queue({ raw: `${pretty}\ndata: [DONE]\n\n`, headers: { 'content-type': 'text/event-stream' } });
    const res = await stream();
    expect(res.statusCode, res.body).toBe(200);
    expect(sseJson(res.body)[0]).toEqual(chunk);
    expect(sseData(res.body).at(-1)).toBe('[DONE]');
  });

  it('a stream that breaks (garbage, then a reset) ends with the events before it, an error event and [DONE]', async () => {
    s.fake.queue({ pieces: ['one', ' two', ' three', ' four'], breakAfter: 2 });
    const res = await stream({}, { 'x-request-id': 'req-broken-stream' });
    expect(res.statusCode).toBe(200);
    const data = sseData(res.body);
    expect(data.at(-1)).toBe('[DONE]');
    const events = data.slice(0, -1).map((d) => JSON.parse(d) as Chunk & { error?: Record<string, unknown> });
    expect(events).toHaveLength(4);
    expect(events[0]!.choices![0]!.delta).toEqual({ role: 'assistant', content: '' });
    expect(streamedText(events.slice(0, 3))).toBe('one two');
    expect(events[3]).toEqual({ error: { message: expect.stringContaining('Upstream stream failed'), type: 'upstream_error', code: 'upstream_stream_failed' } });
    const [row] = (await usageRowsOf(s.t, model)).filter((r) => r.request_id === 'req-broken-stream');
    expect(row).toMatchObject({ status: 502, streamed: 1 });
  });

  it('an error event from the upstream mid-stream ends the stream cleanly', async () => {
    const chunk = JSON.stringify({ id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 1, model: 'gpt-stream', choices: [{ index: 0, delta: { content: 'Partial' }, finish_reason: null }] });
    s.fake.queue({ raw: `data: ${chunk}\n\ndata: {"error":{"message":"overloaded","type":"server_error"}}\n\n` });
    const res = await stream();
    expect(res.statusCode).toBe(200);
    const data = sseData(res.body);
    expect(data).toHaveLength(3);
    expect(data[0]).toBe(chunk);
    expect(JSON.parse(data[1]!)).toEqual({ error: { message: expect.stringContaining('Upstream stream failed'), type: 'upstream_error', code: 'upstream_stream_failed' } });
    expect(data[2]).toBe('[DONE]');
  });

  // Regression: a body failure after the first byte (read timeout, reset) reached the service as undici's own error
  // and was reported as Waygate's internal error.
  it('an upstream that goes silent mid-stream past the read timeout ends the stream with an upstream error event', async () => {
    s.fake.queue({ pieces: ['slow', ' words'], pieceDelayMs: SILENCE_MS });
    const res = await stream({}, { 'x-request-id': 'req-silent-stream' });
    expect(res.statusCode).toBe(200);
    const data = sseData(res.body);
    expect(data.at(-1)).toBe('[DONE]');
    expect(JSON.parse(data[0]!).choices[0].delta).toEqual({ role: 'assistant', content: '' });
    // An upstream's silence is the upstream's failure, not an internal error of Waygate.
    expect(JSON.parse(data.at(-2)!).error).toMatchObject({ type: 'upstream_error', code: 'upstream_stream_failed' });
    const [row] = (await usageRowsOf(s.t, model)).filter((r) => r.request_id === 'req-silent-stream');
    expect(row).toMatchObject({ status: 502, streamed: 1 });
  });

  it('a stream closed before its first read (a reply that failed, or a client gone, as it was handed over) is still metered 499 and settled', async () => {
    const principal = await s.t.ctx.services.tokens.authenticate(s.token.value);
    if (principal?.kind !== 'api_token' || !principal.projectId) throw new Error('the test token should be a project token');
    const caller = {
      scope: { tenantId: principal.tenantId, projectId: principal.projectId },
      tokenId: principal.tokenId,
      userId: null,
      budget: null,
      rateLimit: null,
      requestId: 'req-closed-unread',
      sessionId: null,
      signal: new AbortController().signal,
      startedAt: performance.now(),
      timing: { upstreamMs: 0 },
    };
    // The upstream is still sending: closing the unread stream must end its request too.
    s.fake.queue({ pieceDelayMs: 200 });
    const aborted = s.fake.aborted;
    const frames = await s.t.ctx.services.inference.chatStream(caller, chatBody(model, { stream: true }) as Record<string, unknown>);
    await frames.return!(undefined);
    await vi.waitFor(() => expect(s.fake.aborted).toBe(aborted + 1), { timeout: 5_000, interval: 20 });
    const rows = (await usageRowsOf(s.t, model)).filter((r) => r.request_id === 'req-closed-unread');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 499, streamed: 1, output_tokens: 0, input_tokens: 10 });
    // Closing it again, or reading it after, adds nothing.
    await frames.return!(undefined);
    expect((await frames.next()).done).toBe(true);
    expect((await usageRowsOf(s.t, model)).filter((r) => r.request_id === 'req-closed-unread')).toHaveLength(1);
  });

  it('a client that disconnects mid-stream aborts the upstream request and is metered as 499, streamed', async () => {
    const port = await listenOnLoopback(s.t.app);
    const pieces = Array.from({ length: 40 }, (_, i) => ` word${i}`);
    s.fake.queue({ pieces, pieceDelayMs: 100 });
    const abortedBefore = s.fake.aborted;
    const requestsBefore = s.fake.requests.length;

    const req = http.request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: `${CLIENT}/chat/completions`,
      headers: { authorization: `Bearer ${s.token.value}`, 'content-type': 'application/json', 'x-request-id': 'req-disconnect' },
    });
    req.on('error', () => {}); // the destroy below
    const first = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      req.once('error', reject);
      req.once('response', (res) => {
        res.once('data', (chunk: Buffer) => {
          resolve({ status: res.statusCode ?? 0, text: chunk.toString('utf8') });
          req.destroy();
        });
      });
      req.end(JSON.stringify(chatBody(model, { stream: true })));
    });
    expect(first.status).toBe(200);
    expect(first.text.startsWith('data: {')).toBe(true);
    expect(first.text).not.toContain('[DONE]');

    await vi.waitFor(() => expect(s.fake.aborted).toBe(abortedBefore + 1), { timeout: 10_000, interval: 20 });
    expect(s.fake.requests.length).toBe(requestsBefore + 1);
    const rows = await vi.waitFor(
      async () => {
        const found = (await usageRowsOf(s.t, model)).filter((r) => r.request_id === 'req-disconnect');
        expect(found).toHaveLength(1);
        return found;
      },
      { timeout: 10_000, interval: 50 },
    );
    // What was streamed is billed: the prompt estimate (no upstream usage arrived) and the words sent so far.
    expect(rows[0]).toMatchObject({ status: 499, streamed: 1, service: 'chat', endpoint: '/chat/completions', input_tokens: 10 });
    expect(rows[0]!.output_tokens).toBeLessThan(pieces.length * 2);
  });
});
