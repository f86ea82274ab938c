import OpenAI, { APIError, AuthenticationError, BadRequestError, InternalServerError, NotFoundError, RateLimitError } from 'openai';
import type { ChatCompletionChunk, ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, createTestApp, createToken, type TestApp } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { registerModel } from '../helpers/models.js';

/**
 * The "Done when" of issue 3: the official openai SDK (v6) against a Waygate listening on a real loopback port,
 * with an upstream model registered at a fake OpenAI-compatible server and with the built-in local models.
 */

const FAKE_REPLY = 'Hello from the fake upstream';
const FAKE_VECTOR = [0.1, 0.2, 0.3];
const UPSTREAM_KEY = 'sk-upstream-secret';

/** Runs the promise and hands back what it rejected with (fails the test when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to fail, but it succeeded');
}

async function collect(stream: AsyncIterable<ChatCompletionChunk>): Promise<{ chunks: ChatCompletionChunk[]; content: string }> {
  const chunks: ChatCompletionChunk[] = [];
  let content = '';
  for await (const chunk of stream) {
    chunks.push(chunk);
    for (const choice of chunk.choices) content += choice.delta?.content ?? '';
  }
  return { chunks, content };
}

function l2(vector: number[]): number {
  return Math.sqrt(vector.reduce((sum, v) => sum + v * v, 0));
}

describe.each(BACKENDS)('official openai SDK against Waygate on %s', (backend) => {
  let t: TestApp;
  let fake: FakeUpstream;
  let baseURL: string;
  let client: OpenAI;
  let upstreamModel: string;
  let moderationModel: string;

  const sdk = (apiKey: string) => new OpenAI({ apiKey, baseURL, maxRetries: 0, timeout: 10_000 });

  beforeAll(async () => {
    fake = await startFakeOpenAi();
    t = await createTestApp({ backend });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const address = t.app.server.address();
    if (!address || typeof address === 'string') throw new Error('the app did not listen on a TCP port');
    baseURL = `http://127.0.0.1:${address.port}/api/client/v1`;
    client = sdk(t.ownerToken);
    upstreamModel = await registerModel(t, {
      provider: { type: 'openai-compatible', baseUrl: fake.baseUrl, apiKey: UPSTREAM_KEY },
      upstreamModel: 'gpt-fake-upstream',
      capabilities: ['chat', 'embeddings'],
    });
    moderationModel = await registerModel(t, { provider: { type: 'mock' }, upstreamModel: 'mock-moderation', capabilities: ['moderation'] });
  });

  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  it('models.list() pages through local-chat, local-embed and the registered upstream model', async () => {
    const ids: string[] = [];
    for await (const model of client.models.list()) {
      expect(model.object).toBe('model');
      expect(typeof model.created).toBe('number');
      ids.push(model.id);
    }
    expect(ids).toEqual(expect.arrayContaining(['local-chat', 'local-embed', upstreamModel, moderationModel]));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('models.retrieve() answers one model, and NotFoundError for a model the project does not have', async () => {
    expect(await client.models.retrieve(upstreamModel)).toMatchObject({ id: upstreamModel, object: 'model', owned_by: 'openai-compatible' });
    expect(await client.models.retrieve('local-chat')).toMatchObject({ id: 'local-chat', owned_by: 'local' });
    expect(await rejection(client.models.retrieve('no-such-model'))).toBeInstanceOf(NotFoundError);
  });

  describe('chat completions', () => {
    it('non-stream against the upstream model: the reply, usage, and the call forwarded with the provider key', async () => {
      const before = fake.requests.length;
      const completion = await client.chat.completions.create({ model: upstreamModel, messages: [{ role: 'user', content: 'Say hello' }] });
      expect(completion.object).toBe('chat.completion');
      expect(completion.choices[0]?.message.content).toBe(FAKE_REPLY);
      expect(completion.choices[0]?.finish_reason).toBe('stop');
      expect(completion.usage).toMatchObject({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
      const forwarded = fake.requests.slice(before);
      expect(forwarded).toHaveLength(1);
      expect(forwarded[0]).toMatchObject({ method: 'POST', path: '/v1/chat/completions', body: { model: 'gpt-fake-upstream' } });
      expect(forwarded[0]!.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
      expect(JSON.stringify(forwarded[0]!.headers)).not.toContain(t.ownerToken);
    });

    it('stream against the upstream model with include_usage: content assembled, the last chunk carries usage', async () => {
      const stream = await client.chat.completions.create({
        model: upstreamModel,
        messages: [{ role: 'user', content: 'Say hello' }],
        stream: true,
        stream_options: { include_usage: true },
      });
      const { chunks, content } = await collect(stream);
      expect(content).toBe(FAKE_REPLY);
      expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
      const last = chunks.at(-1)!;
      expect(last.choices).toEqual([]);
      expect(last.usage).toMatchObject({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
      expect(chunks.slice(0, -1).some((c) => c.usage)).toBe(false);
      expect(chunks.some((c) => c.choices[0]?.finish_reason === 'stop')).toBe(true);
    });

    it('stream against the upstream model without include_usage: no usage chunk reaches the client', async () => {
      const stream = await client.chat.completions.create({ model: upstreamModel, messages: [{ role: 'user', content: 'Say hello' }], stream: true });
      const { chunks, content } = await collect(stream);
      expect(content).toBe(FAKE_REPLY);
      expect(chunks.length).toBeGreaterThan(0);
      expect(chunks.some((c) => c.usage)).toBe(false);
      expect(chunks.every((c) => c.choices.length > 0)).toBe(true);
    });

    it('non-stream against local-chat: a deterministic echo of the last user message, with counted usage', async () => {
      const completion = await client.chat.completions.create({
        model: 'local-chat',
        messages: [
          { role: 'system', content: 'You are terse.' },
          { role: 'user', content: 'first question' },
          { role: 'assistant', content: 'an answer' },
          { role: 'user', content: 'The quick brown fox' },
        ],
      });
      expect(completion.choices[0]?.message.content).toBe('Echo: The quick brown fox');
      expect(completion.choices[0]?.finish_reason).toBe('stop');
      expect(completion.usage!.prompt_tokens).toBeGreaterThan(0);
      expect(completion.usage!.completion_tokens).toBeGreaterThan(0);
      expect(completion.usage!.total_tokens).toBe(completion.usage!.prompt_tokens + completion.usage!.completion_tokens);
    });

    it('stream against local-chat with include_usage: the same echo, word by word, then usage', async () => {
      const stream = await client.chat.completions.create({
        model: 'local-chat',
        messages: [{ role: 'user', content: 'streamed words arrive in order' }],
        stream: true,
        stream_options: { include_usage: true },
      });
      const { chunks, content } = await collect(stream);
      expect(content).toBe('Echo: streamed words arrive in order');
      expect(chunks.filter((c) => c.choices[0]?.delta?.content).length).toBeGreaterThan(1);
      const last = chunks.at(-1)!;
      expect(last.choices).toEqual([]);
      expect(last.usage!.prompt_tokens).toBeGreaterThan(0);
      expect(last.usage!.completion_tokens).toBeGreaterThan(0);
      expect(last.usage!.total_tokens).toBe(last.usage!.prompt_tokens + last.usage!.completion_tokens);
    });

    it('stream against local-chat without include_usage: no usage chunk', async () => {
      const stream = await client.chat.completions.create({ model: 'local-chat', messages: [{ role: 'user', content: 'no usage please' }], stream: true });
      const { chunks, content } = await collect(stream);
      expect(content).toBe('Echo: no usage please');
      expect(chunks.some((c) => c.usage)).toBe(false);
    });
  });

  describe('embeddings', () => {
    it('upstream model, SDK default (base64 asked for and decoded): [0.1, 0.2, 0.3]', async () => {
      const before = fake.requests.length;
      const result = await client.embeddings.create({ model: upstreamModel, input: 'hello' });
      expect(fake.requests[before]?.body).toMatchObject({ model: 'gpt-fake-upstream', encoding_format: 'base64' });
      expect(result.data).toHaveLength(1);
      const vector = result.data[0]!.embedding;
      expect(Array.isArray(vector)).toBe(true);
      expect(vector).toHaveLength(3);
      vector.forEach((v, i) => expect(v).toBeCloseTo(FAKE_VECTOR[i]!, 6));
      expect(result.usage.prompt_tokens).toBe(10);
    });

    it('upstream model, encoding_format float, two inputs', async () => {
      const result = await client.embeddings.create({ model: upstreamModel, input: ['a', 'b'], encoding_format: 'float' });
      expect(result.data.map((d) => d.index)).toEqual([0, 1]);
      for (const item of result.data) expect(item.embedding).toEqual(FAKE_VECTOR);
    });

    it('local-embed, SDK default: 384 dimensions, unit L2 norm, deterministic', async () => {
      const result = await client.embeddings.create({ model: 'local-embed', input: 'The quick brown fox jumps' });
      const vector = result.data[0]!.embedding;
      expect(vector).toHaveLength(384);
      expect(vector.every((v) => Number.isFinite(v))).toBe(true);
      expect(l2(vector)).toBeCloseTo(1, 5);
      const again = await client.embeddings.create({ model: 'local-embed', input: 'The quick brown fox jumps' });
      expect(again.data[0]!.embedding).toEqual(vector);
    });

    it('local-embed, encoding_format float: the same vector as the decoded base64 one (to float32 precision)', async () => {
      const input = ['overlapping text about foxes', 'overlapping text about dogs', 'zzz qqq'];
      const [floats, decoded] = await Promise.all([
        client.embeddings.create({ model: 'local-embed', input, encoding_format: 'float' }),
        client.embeddings.create({ model: 'local-embed', input }),
      ]);
      expect(floats.data).toHaveLength(3);
      for (const [i, item] of floats.data.entries()) {
        expect(item.embedding).toHaveLength(384);
        expect(l2(item.embedding)).toBeCloseTo(1, 9);
        const other = decoded.data[i]!.embedding;
        item.embedding.forEach((v, j) => expect(other[j]).toBeCloseTo(v, 6));
      }
      const cosine = (a: number[], b: number[]) => a.reduce((sum, v, k) => sum + v * b[k]!, 0);
      const [fox, dog, other] = floats.data.map((d) => d.embedding) as [number[], number[], number[]];
      expect(cosine(fox, dog)).toBeGreaterThan(cosine(fox, other));
    });
  });

  it('moderations.create against a mock model with the moderation capability: one result per input', async () => {
    const single = await client.moderations.create({ model: moderationModel, input: 'something harmless' });
    expect(single.results).toHaveLength(1);
    expect(single.results[0]!.flagged).toBe(false);
    const many = await client.moderations.create({ model: moderationModel, input: ['one', 'two', 'three'] });
    expect(many.results).toHaveLength(3);
    expect(many.model).toBe('mock-moderation');
  });

  describe('errors map to the SDK error classes', () => {
    it('unknown model -> NotFoundError 404 with the error body', async () => {
      const err = await rejection(client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }));
      expect(err).toBeInstanceOf(NotFoundError);
      expect((err as NotFoundError).status).toBe(404);
      expect((err as NotFoundError).message).toContain('no-such-model');
      expect((err as NotFoundError).headers.get('x-request-id')).toBeTruthy();
    });

    it('missing messages -> BadRequestError 400', async () => {
      const body = { model: 'local-chat' } as unknown as ChatCompletionCreateParamsNonStreaming;
      const err = await rejection(client.chat.completions.create(body));
      expect(err).toBeInstanceOf(BadRequestError);
      expect((err as BadRequestError).status).toBe(400);
      expect((err as BadRequestError).message).toContain('messages');
    });

    it('a model without the capability -> BadRequestError 400', async () => {
      const err = await rejection(client.embeddings.create({ model: 'local-chat', input: 'x' }));
      expect(err).toBeInstanceOf(BadRequestError);
      expect((err as BadRequestError).status).toBe(400);
    });

    it('an invalid token -> AuthenticationError 401, and nothing reaches the upstream', async () => {
      const before = fake.requests.length;
      const bad = sdk(`wgt_${'A'.repeat(43)}`);
      const err = await rejection(bad.chat.completions.create({ model: upstreamModel, messages: [{ role: 'user', content: 'hi' }] }));
      expect(err).toBeInstanceOf(AuthenticationError);
      expect((err as AuthenticationError).status).toBe(401);
      expect(await rejection(bad.models.list())).toBeInstanceOf(AuthenticationError);
      expect(fake.requests.length).toBe(before);
    });

    it('a token whose budget is used up -> RateLimitError 429, and nothing reaches the upstream', async () => {
      const { value } = await createToken(t, { role: 'member', budget: { maxTokens: 30, period: 'total' } });
      const limited = sdk(value);
      // local-chat echoes the message, so the reply alone would take more than the budget leaves: the call is capped
      // at what is left and uses the budget up.
      const first = await limited.chat.completions.create({
        model: 'local-chat',
        messages: [{ role: 'user', content: 'one two three four five six seven eight nine ten eleven twelve' }],
      });
      expect(first.usage!.total_tokens).toBeLessThanOrEqual(30);
      expect(first.choices[0]?.finish_reason).toBe('length');
      const before = fake.requests.length;
      const err = await rejection(limited.chat.completions.create({ model: upstreamModel, messages: [{ role: 'user', content: 'hi' }] }));
      expect(err).toBeInstanceOf(RateLimitError);
      expect((err as RateLimitError).status).toBe(429);
      expect((err as RateLimitError).message).toMatch(/budget/i);
      expect(fake.requests.length).toBe(before);
      // The SDK's stream path maps the same refusal before any chunk.
      expect(await rejection(limited.chat.completions.create({ model: 'local-chat', messages: [{ role: 'user', content: 'hi' }], stream: true }))).toBeInstanceOf(RateLimitError);
    });

    it('an upstream 500 on every attempt (Waygate retries included) -> InternalServerError with status 502', async () => {
      // Retry-After: 0 keeps Waygate's retries of the 5xx immediate; every attempt fails, then the default answer resumes.
      const attempts = t.config.upstream.retries + 1;
      const failure = { status: 500, body: { error: { message: 'boom', type: 'server_error' } }, headers: { 'retry-after': '0' } };
      fake.queue(...Array.from({ length: attempts }, () => failure));
      const before = fake.requests.length;
      const err = await rejection(client.chat.completions.create({ model: upstreamModel, messages: [{ role: 'user', content: 'hi' }] }));
      expect(err).toBeInstanceOf(APIError);
      expect(err).toBeInstanceOf(InternalServerError);
      expect((err as APIError).status).toBe(502);
      expect((err as InternalServerError).headers.get('x-waygate-overhead-ms')).toBeTruthy();
      expect(fake.requests.length - before).toBe(attempts);
      const recovered = await client.chat.completions.create({ model: upstreamModel, messages: [{ role: 'user', content: 'hi' }] });
      expect(recovered.choices[0]?.message.content).toBe(FAKE_REPLY);
    });
  });

  describe('response headers through withResponse() and asResponse()', () => {
    it('withResponse(): x-waygate-overhead-ms and x-request-id, and a client-chosen request id is echoed and forwarded', async () => {
      const before = fake.requests.length;
      const { data, response, request_id } = await client.chat.completions
        .create({ model: upstreamModel, messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'x-request-id': 'e2e-sdk-req-1' } })
        .withResponse();
      expect(data.choices[0]?.message.content).toBe(FAKE_REPLY);
      const overhead = response.headers.get('x-waygate-overhead-ms');
      expect(overhead).toMatch(/^\d+(\.\d+)?$/);
      expect(response.headers.get('x-request-id')).toBe('e2e-sdk-req-1');
      expect(request_id).toBe('e2e-sdk-req-1');
      expect(fake.requests[before]?.headers['x-request-id']).toBe('e2e-sdk-req-1');
    });

    it('withResponse() on a stream, embeddings and models carries both headers too', async () => {
      const streamed = await client.chat.completions.create({ model: 'local-chat', messages: [{ role: 'user', content: 'hi' }], stream: true }).withResponse();
      expect((await collect(streamed.data)).content).toBe('Echo: hi');
      const embedded = await client.embeddings.create({ model: 'local-embed', input: 'hi' }).withResponse();
      const listed = await client.models.list().withResponse();
      for (const { response } of [streamed, embedded, listed]) {
        expect(response.headers.get('x-waygate-overhead-ms')).toMatch(/^\d+(\.\d+)?$/);
        expect(response.headers.get('x-request-id')).toBeTruthy();
      }
      expect(new Set([streamed, embedded, listed].map((r) => r.response.headers.get('x-request-id'))).size).toBe(3);
    });

    it('asResponse(): the raw Response with both headers and the JSON body', async () => {
      const response = await client.embeddings.create({ model: upstreamModel, input: 'x', encoding_format: 'float' }).asResponse();
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toContain('application/json');
      expect(response.headers.get('x-waygate-overhead-ms')).toMatch(/^\d+(\.\d+)?$/);
      expect(response.headers.get('x-request-id')).toBeTruthy();
      const body = (await response.json()) as { data: { embedding: number[] }[] };
      expect(body.data[0]!.embedding).toEqual(FAKE_VECTOR);
    });
  });
});
