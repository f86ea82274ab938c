import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { post, registerFakeModel, setupInference, sseData, type InferenceSetup } from '../helpers/inference.js';
import { chatBody } from '../helpers/models.js';
import { freePort } from '../helpers/net.js';

/**
 * Upstream faults on the client endpoints: what is retried (and how often), what is passed through, what becomes
 * 502/504, and how fallback models take over. The database plays no part here, so one backend (SQLite) is enough.
 */

const RETRIES = 2;
const ATTEMPTS = 1 + RETRIES;
const READ_TIMEOUT_MS = 300;
/** undici checks its read timeouts on a coarse clock (ticks of about half a second): "slow" must be far slower. */
const FAR_TOO_SLOW_MS = 3_000;
/** A Retry-After of 0 makes a retryable failure retry at once (no backoff), which keeps the fallback tests fast. */
const NOW = { 'retry-after': '0' };

function times<T>(n: number, value: T): T[] {
  return Array.from({ length: n }, () => value);
}

function expectError(res: LightMyRequestResponse, status: number, code: string): { message: string } {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const { error } = res.json();
  expect(error).toMatchObject({ type: 'server_error', code });
  expect(typeof error.message).toBe('string');
  return error;
}

describe('upstream faults', () => {
  let s: InferenceSetup;
  let model: string;
  let fake: FakeUpstream;
  const sent = () => fake.requests.length;
  const chat = (extra: Record<string, unknown> = {}, key = model) => post(s.t, s.token.value, '/chat/completions', chatBody(key, extra));

  beforeAll(async () => {
    s = await setupInference({ env: { WAYGATE_UPSTREAM_RETRIES: String(RETRIES), WAYGATE_UPSTREAM_TIMEOUT_MS: String(READ_TIMEOUT_MS) } });
    fake = s.fake;
    model = await registerFakeModel(s.t, fake);
  });
  afterAll(async () => s.close());

  it('an upstream 4xx is passed through with its status and error body, and not retried', async () => {
    for (const status of [400, 404, 409, 422]) {
      const body = { error: { message: `upstream says ${status}`, type: 'invalid_request_error', code: `code_${status}` } };
      fake.queue({ status, body });
      const before = sent();
      const res = await chat({ temperature: 9 });
      expect(res.statusCode, res.body).toBe(status);
      expect(res.json()).toEqual(body);
      expect(sent()).toBe(before + 1);
    }
  });

  // Regression: the passed-through body went through the route's generic error schema, dropping `param`.
  it("an upstream 4xx in OpenAI's own shape (param, code: null) is passed through unchanged", async () => {
    const body = { error: { message: "Invalid value for 'temperature'", type: 'invalid_request_error', param: 'temperature', code: null } };
    fake.queue({ status: 400, body });
    const res = await chat({ temperature: 9 });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(body);
  });

  it('an upstream 4xx that is not JSON still answers with its status and an {error} body', async () => {
    fake.queue({ status: 422, raw: 'unprocessable by upstream policy' });
    const before = sent();
    const res = await post(s.t, s.token.value, '/embeddings', { model, input: 'x' });
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({ type: 'upstream_error', code: null, message: expect.stringContaining('unprocessable by upstream policy') });
    expect(sent()).toBe(before + 1);
  });

  // Regression: an upstream error without a code was passed on without one, where every error has message, type, code.
  it('an upstream 4xx without a type or code gets them, null for the code', async () => {
    for (const body of [{ error: { message: 'model not found' } }, { error: 'model not found' }, { message: 'model not found' }]) {
      fake.queue({ status: 404, body });
      const res = await chat();
      expect(res.statusCode).toBe(404);
      expect(res.json(), JSON.stringify(body)).toEqual({ error: { message: 'model not found', type: 'upstream_error', code: null } });
    }
  });

  it.each([401, 403])("an upstream %i (the model's own key or account refused) is a 502 that does not echo the upstream's text", async (status) => {
    fake.queue({ status, body: { error: { message: 'Incorrect API key provided: sk-abc***xyz.', type: 'invalid_request_error', code: 'invalid_api_key' } } });
    const before = sent();
    const error = expectError(await chat(), 502, 'upstream_error');
    expect(error.message).toContain(`configured for it (status ${status})`);
    expect(JSON.stringify(error)).not.toContain('sk-abc');
    expect(sent()).toBe(before + 1);
  });

  it('an upstream redirect is a 502, not passed through without its Location', async () => {
    fake.queue({ status: 302, headers: { location: 'http://127.0.0.1:1/elsewhere' }, raw: '' });
    const error = expectError(await post(s.t, s.token.value, '/embeddings', { model, input: 'x' }), 502, 'upstream_error');
    expect(error.message).toContain('302');
  });

  it('an upstream 5xx is retried (1 + retries attempts), then answered 502 {error}', async () => {
    fake.queue(...times(ATTEMPTS, { status: 503 }));
    const before = sent();
    const error = expectError(await chat(), 502, 'upstream_error');
    expect(error.message).toContain('503');
    expect(sent()).toBe(before + ATTEMPTS);
    // The same request, forwarded each time.
    const attempts = fake.requests.slice(before);
    for (const attempt of attempts) expect(attempt.body).toEqual(attempts[0]!.body);
  });

  it('a 5xx followed by a success is answered with the success', async () => {
    fake.queue({ status: 500, headers: NOW });
    const before = sent();
    const res = await post(s.t, s.token.value, '/moderations', { model, input: 'hello' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().id).toBe('modr-fake');
    expect(sent()).toBe(before + 2);
  });

  it('a stream whose upstream fails 5xx before the first byte gets 502 JSON, not an event stream', async () => {
    fake.queue(...times(ATTEMPTS, { status: 502, headers: NOW }));
    const before = sent();
    expectError(await chat({ stream: true }), 502, 'upstream_error');
    expect(sent()).toBe(before + ATTEMPTS);
  });

  it('a 429 with Retry-After is retried, then passed through as 429 with its body and Retry-After', async () => {
    const body = { error: { message: 'Rate limit reached for requests', type: 'rate_limit_error', code: 'rate_limit_exceeded' } };
    fake.queue(...times(ATTEMPTS, { status: 429, body, headers: NOW }));
    const before = sent();
    const res = await chat();
    expect(res.statusCode, res.body).toBe(429);
    expect(res.json()).toEqual(body);
    expect(res.headers['retry-after']).toBe('0');
    expect(sent()).toBe(before + ATTEMPTS);

    fake.queue({ status: 429, body, headers: NOW });
    const recovered = await chat();
    expect(recovered.statusCode, recovered.body).toBe(200);
    expect(sent()).toBe(before + ATTEMPTS + 2);
  });

  it('a 429 asking to wait longer than Waygate waits is passed through at once', async () => {
    fake.queue({ status: 429, body: { error: { message: 'come back in a minute', type: 'rate_limit_error' } }, headers: { 'retry-after': '60' } });
    const before = sent();
    const res = await chat();
    expect(res.statusCode).toBe(429);
    expect(res.headers['retry-after']).toBe('60');
    expect(res.json().error.message).toBe('come back in a minute');
    expect(sent()).toBe(before + 1);
  });

  it('an upstream that never answers times out: retried, then 504', async () => {
    fake.queue(...times(ATTEMPTS, { hang: true }));
    const before = sent();
    expectError(await chat(), 504, 'upstream_timeout');
    expect(sent()).toBe(before + ATTEMPTS);
  });

  it('an upstream slower than the read timeout is given up on (504); a timeout then a success is a success', async () => {
    fake.queue(...times(ATTEMPTS, { delayMs: FAR_TOO_SLOW_MS }));
    expectError(await post(s.t, s.token.value, '/embeddings', { model, input: 'slow' }), 504, 'upstream_timeout');

    fake.queue({ hang: true });
    const before = sent();
    const res = await chat();
    expect(res.statusCode, res.body).toBe(200);
    expect(sent()).toBe(before + 2);
  });

  it('a refused connection (nothing listening) is 502, streamed or not', async () => {
    const closed = await registerFakeModel(s.t, { baseUrl: `http://127.0.0.1:${await freePort()}/v1` });
    const cases = [
      ['/chat/completions', chatBody(closed)],
      ['/chat/completions', chatBody(closed, { stream: true })],
      ['/embeddings', { model: closed, input: 'x' }],
    ] as const;
    for (const [path, body] of cases) {
      const error = expectError(await post(s.t, s.token.value, path, body), 502, 'upstream_error');
      expect(error.message).toContain('ECONNREFUSED');
    }
  });

  it('a malformed JSON answer is 502 and is not retried', async () => {
    for (const raw of ['{"id": "chatcmpl-broken", "choices": [', 'null', '[1, 2]', '']) {
      fake.queue({ raw });
      const before = sent();
      const error = expectError(await chat(), 502, 'upstream_error');
      expect(error.message).toContain('malformed');
      expect(sent()).toBe(before + 1);
    }
  });

  describe('fallbacks', () => {
    let b: FakeUpstream;
    let c: FakeUpstream;
    let primary: string;
    const counts = () => [fake.requests.length, b.requests.length, c.requests.length];

    beforeAll(async () => {
      [b, c] = await Promise.all([startFakeOpenAi(), startFakeOpenAi()]);
      const keyB = await registerFakeModel(s.t, b, { upstreamModel: 'gpt-b', capabilities: ['chat'] });
      const keyC = await registerFakeModel(s.t, c, { upstreamModel: 'gpt-c' });
      primary = await registerFakeModel(s.t, fake, { upstreamModel: 'gpt-a', fallbacks: [keyB, keyC] });
    });
    afterAll(async () => {
      await Promise.all([b.close(), c.close()]);
    });

    it('a primary failing 5xx is answered by the first fallback, which gets its own upstream model', async () => {
      fake.queue(...times(ATTEMPTS, { status: 503, headers: NOW }));
      const [a0, b0, c0] = counts();
      const res = await chat({}, primary);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().model).toBe('gpt-b');
      expect(counts()).toEqual([a0! + ATTEMPTS, b0! + 1, c0]);
      expect(b.requests.at(-1)!.body.model).toBe('gpt-b');
    });

    it('fallbacks are tried in order: when the first fallback fails too, the second answers', async () => {
      fake.queue(...times(ATTEMPTS, { status: 500, headers: NOW }));
      b.queue(...times(ATTEMPTS, { status: 503, headers: NOW }));
      const [a0, b0, c0] = counts();
      const res = await chat({ stream: true }, primary);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
      expect(JSON.parse(sseData(res.body)[0]!).model).toBe('gpt-c');
      expect(counts()).toEqual([a0! + ATTEMPTS, b0! + ATTEMPTS, c0! + 1]);
    });

    it('a fallback without the capability is skipped', async () => {
      fake.queue(...times(ATTEMPTS, { status: 503, headers: NOW }));
      const [a0, b0, c0] = counts();
      const res = await post(s.t, s.token.value, '/embeddings', { model: primary, input: 'x' });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().model).toBe('gpt-c');
      expect(counts()).toEqual([a0! + ATTEMPTS, b0, c0! + 1]);
    });

    it('a malformed answer from the primary hands over to the fallback', async () => {
      fake.queue({ raw: 'not json' });
      const [a0, b0, c0] = counts();
      const res = await chat({}, primary);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().model).toBe('gpt-b');
      expect(counts()).toEqual([a0! + 1, b0! + 1, c0]);
    });

    it('a 4xx from the primary does not fall back: the caller gets it', async () => {
      const body = { error: { message: 'context_length_exceeded', type: 'invalid_request_error', code: 'context_length_exceeded' } };
      fake.queue({ status: 400, body });
      const [a0, b0, c0] = counts();
      const res = await chat({}, primary);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual(body);
      expect(counts()).toEqual([a0! + 1, b0, c0]);
    });

    it('when every candidate fails, the answer is 502 after each was tried', async () => {
      fake.queue(...times(ATTEMPTS, { status: 500, headers: NOW }));
      b.queue(...times(ATTEMPTS, { status: 500, headers: NOW }));
      c.queue(...times(ATTEMPTS, { status: 500, headers: NOW }));
      const [a0, b0, c0] = counts();
      expectError(await chat({}, primary), 502, 'upstream_error');
      expect(counts()).toEqual([a0! + ATTEMPTS, b0! + ATTEMPTS, c0! + ATTEMPTS]);
    });
  });
});
