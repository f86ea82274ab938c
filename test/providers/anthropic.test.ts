import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTestApp, type TestApp } from '../helpers/app.js';
import { startFakeAnthropic, type FakeUpstream } from '../helpers/fake-upstream.js';
import { usageRowsOf } from '../helpers/inference.js';
import { chatBody, registerModel } from '../helpers/models.js';

/** The anthropic provider through the client API, against a fake Anthropic Messages API. */

const API_KEY = 'sk-ant-test-key';
const REPLY = 'Hello from the fake upstream';

/** The data of each SSE frame of a streamed answer, `[DONE]` included. */
function frames(body: string): string[] {
  return body
    .split('\n\n')
    .filter((f) => f.trim() !== '')
    .map((f) => {
      expect(f.startsWith('data: ')).toBe(true);
      return f.slice('data: '.length);
    });
}

type Chunk = { object: string; choices: { delta: Record<string, unknown>; finish_reason: string | null }[]; usage?: Record<string, number> };
const chunksOf = (body: string): Chunk[] => frames(body).slice(0, -1).map((f) => JSON.parse(f) as Chunk);
const sse = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

describe('anthropic provider', () => {
  let t: TestApp;
  let fake: FakeUpstream;
  let model: string;

  const chat = (body: Record<string, unknown>) => call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/chat/completions', payload: body });
  const lastRequest = () => fake.requests[fake.requests.length - 1]!;

  beforeAll(async () => {
    fake = await startFakeAnthropic();
    t = await createTestApp({ env: { WAYGATE_UPSTREAM_RETRIES: '0' } });
    model = await registerModel(t, { provider: { type: 'anthropic', baseUrl: fake.baseUrl, apiKey: API_KEY }, upstreamModel: 'claude-test' });
  });

  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  it('answers a chat call with an OpenAI chat.completion and usage', async () => {
    const res = await chat(chatBody(model));
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      id: 'msg_fake',
      object: 'chat.completion',
      model: 'claude-test',
      choices: [{ index: 0, message: { role: 'assistant', content: REPLY }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    });
  });

  it('sends x-api-key and anthropic-version, and a translated Messages body to /v1/messages', async () => {
    const res = await chat({ model, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }], max_tokens: 50 });
    expect(res.statusCode, res.body).toBe(200);
    const sent = lastRequest();
    expect(sent.method).toBe('POST');
    expect(sent.path).toBe('/v1/messages');
    expect(sent.headers['x-api-key']).toBe(API_KEY);
    expect(sent.headers['anthropic-version']).toBe('2023-06-01');
    expect(sent.headers.authorization).toBeUndefined();
    expect(sent.headers['content-type']).toMatch(/application\/json/);
    expect(sent.body).toEqual({ model: 'claude-test', system: 'Be brief.', messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }], max_tokens: 50 });
  });

  it('sends max_tokens 4096 when the request names none', async () => {
    expect((await chat(chatBody(model))).statusCode).toBe(200);
    expect(lastRequest().body.max_tokens).toBe(4096);
  });

  it('streams chat.completion.chunk events ending with [DONE], without the usage chunk unless asked', async () => {
    const res = await chat(chatBody(model, { stream: true }));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(lastRequest().body.stream).toBe(true);
    expect(lastRequest().headers.accept).toBe('text/event-stream');
    expect(frames(res.body).at(-1)).toBe('[DONE]');
    const chunks = chunksOf(res.body);
    for (const chunk of chunks) expect(chunk.object).toBe('chat.completion.chunk');
    expect(chunks[0]!.choices[0]!.delta).toMatchObject({ role: 'assistant' });
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(REPLY);
    expect(chunks.filter((c) => c.choices[0]?.finish_reason === 'stop')).toHaveLength(1);
    expect(chunks.some((c) => c.usage !== undefined || c.choices.length === 0)).toBe(false);
  });

  it('streams the usage chunk last when include_usage is set', async () => {
    const res = await chat(chatBody(model, { stream: true, stream_options: { include_usage: true } }));
    expect(res.statusCode, res.body).toBe(200);
    const chunks = chunksOf(res.body);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
    expect(chunks.filter((c) => c.usage !== undefined)).toHaveLength(1);
    expect(frames(res.body).at(-1)).toBe('[DONE]');
  });

  it("passes an Anthropic 400 through as 400 with the upstream's message and type", async () => {
    fake.queue({ status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message: 'messages: roles must alternate' } } });
    const res = await chat(chatBody(model));
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: { message: 'messages: roles must alternate', type: 'invalid_request_error', code: null } });
  });

  it('passes an Anthropic 400 on a stream request through as a JSON 400', async () => {
    fake.queue({ status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: too large' } } });
    const res = await chat(chatBody(model, { stream: true }));
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toMatch(/application\/json/);
    expect(res.json().error).toMatchObject({ message: 'max_tokens: too large', type: 'invalid_request_error' });
  });

  it('answers 502 for an Anthropic 529 overload (no retries configured)', async () => {
    const before = fake.requests.length;
    fake.queue({ status: 529, body: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } });
    const res = await chat(chatBody(model));
    expect(res.statusCode).toBe(502);
    expect(res.json().error.message).toContain('529');
    expect(fake.requests.length - before).toBe(1);
  });

  it('treats a 200 carrying an error, or an object that is no message, as a failure that falls back', async () => {
    const overloaded = { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } };
    for (const body of [overloaded, { error: { type: 'api_error', message: 'x' } }, {}, { type: 'completion', completion: 'hi' }]) {
      fake.queue({ body });
      const res = await chat(chatBody(model));
      expect(res.statusCode, JSON.stringify(body)).toBe(502);
      expect(res.json().error).toMatchObject({ type: 'server_error', message: expect.stringMatching(/^Upstream/) });
    }
    // A message without its `type` (some proxies leave it out) is still a message.
    fake.queue({ body: { id: 'msg_t', role: 'assistant', model: 'claude-test', content: [{ type: 'text', text: 'untyped' }], stop_reason: 'end_turn', usage: { input_tokens: 1, output_tokens: 1 } } });
    expect((await chat(chatBody(model))).json().choices[0].message.content).toBe('untyped');
    const primary = await registerModel(t, { provider: { type: 'anthropic', baseUrl: fake.baseUrl, apiKey: API_KEY }, fallbacks: [model] });
    const before = fake.requests.length;
    fake.queue({ body: overloaded });
    const res = await chat(chatBody(primary));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().choices[0].message.content).toBe(REPLY);
    expect(fake.requests.length - before).toBe(2);
  });

  it('counts the tokens itself when Anthropic reports no output count, rather than bill the output as nothing', async () => {
    const own = await registerModel(t, { provider: { type: 'anthropic', baseUrl: fake.baseUrl, apiKey: API_KEY }, upstreamModel: 'claude-test' });
    const message = { id: 'msg_u', type: 'message', role: 'assistant', model: 'claude-test', content: [{ type: 'text', text: 'some words that were written here' }], stop_reason: 'end_turn' };
    for (const usage of [{ input_tokens: 12 }, { input_tokens: 12, output_tokens: '7' }]) {
      fake.queue({ body: { ...message, usage } });
      const res = await chat(chatBody(own));
      expect(res.statusCode, res.body).toBe(200);
      // An answer whose upstream reported no usage shows none (README).
      expect(res.json().usage).toBeUndefined();
    }
    fake.queue({
      raw:
        sse('message_start', { message: { id: 'msg_s', model: 'claude-test', usage: { input_tokens: 12, output_tokens: 1 } } }) +
        sse('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'some words that were written here' } }) +
        sse('message_delta', { delta: { stop_reason: 'end_turn' }, usage: {} }) +
        sse('message_stop', {}),
    });
    const streamed = await chat(chatBody(own, { stream: true, stream_options: { include_usage: true } }));
    const usageChunks = chunksOf(streamed.body).filter((c) => c.usage);
    expect(usageChunks).toHaveLength(1);
    expect(usageChunks[0]!.usage!.completion_tokens).toBeGreaterThan(1);
    const rows = await usageRowsOf(t, own);
    expect(rows).toHaveLength(3);
    for (const row of rows) expect(row.output_tokens, JSON.stringify(row)).toBeGreaterThan(1);
  });

  it('maps a tool_use answer to tool_calls with JSON arguments', async () => {
    fake.queue({
      body: {
        id: 'msg_tool',
        type: 'message',
        role: 'assistant',
        model: 'claude-test',
        content: [{ type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Paris' } }],
        stop_reason: 'tool_use',
        usage: { input_tokens: 30, output_tokens: 8 },
      },
    });
    const tools = [{ type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
    const res = await chat(chatBody(model, { tools, tool_choice: 'required' }));
    expect(res.statusCode, res.body).toBe(200);
    expect(lastRequest().body).toMatchObject({ tools: [{ name: 'weather', input_schema: tools[0]!.function.parameters }], tool_choice: { type: 'any' } });
    const choice = res.json().choices[0];
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls[0]).toMatchObject({ id: 'toolu_1', type: 'function', function: { name: 'weather' } });
    expect(JSON.parse(choice.message.tool_calls[0].function.arguments)).toEqual({ city: 'Paris' });
    expect(res.json().usage).toEqual({ prompt_tokens: 30, completion_tokens: 8, total_tokens: 38 });
  });

  it('streams tool_use blocks as tool_calls deltas', async () => {
    fake.queue({
      raw:
        sse('message_start', { message: { id: 'msg_s', model: 'claude-test', usage: { input_tokens: 20, output_tokens: 1 } } }) +
        sse('content_block_start', { index: 0, content_block: { type: 'tool_use', id: 'toolu_9', name: 'weather', input: {} } }) +
        sse('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: '{"city":' } }) +
        sse('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: '"Rome"}' } }) +
        sse('content_block_stop', { index: 0 }) +
        sse('message_delta', { delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 9 } }) +
        sse('message_stop', {}),
    });
    const res = await chat(chatBody(model, { stream: true, stream_options: { include_usage: true } }));
    expect(res.statusCode, res.body).toBe(200);
    const chunks = chunksOf(res.body);
    type ToolDelta = { index: number; id?: string; function: { name?: string; arguments: string } };
    const toolDeltas = chunks.flatMap((c) => (c.choices[0]?.delta.tool_calls as ToolDelta[] | undefined) ?? []);
    expect(toolDeltas[0]).toMatchObject({ index: 0, id: 'toolu_9', type: 'function', function: { name: 'weather', arguments: '' } });
    expect(toolDeltas.every((d) => d.index === 0)).toBe(true);
    expect(toolDeltas.map((d) => d.function.arguments).join('')).toBe('{"city":"Rome"}');
    expect(chunks.some((c) => c.choices[0]?.finish_reason === 'tool_calls')).toBe(true);
    expect(chunks.at(-1)!.usage).toEqual({ prompt_tokens: 20, completion_tokens: 9, total_tokens: 29 });
  });

  it('ends the stream with an error event and [DONE] when Anthropic reports an error mid-stream', async () => {
    fake.queue({
      raw:
        sse('message_start', { message: { id: 'msg_e', model: 'claude-test', usage: { input_tokens: 3 } } }) +
        sse('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Partial' } }) +
        sse('error', { error: { type: 'overloaded_error', message: 'Overloaded' } }),
    });
    const res = await chat(chatBody(model, { stream: true }));
    expect(res.statusCode).toBe(200);
    const all = frames(res.body);
    expect(all.at(-1)).toBe('[DONE]');
    const error = JSON.parse(all.at(-2)!) as { error: { type: string; code: string } };
    expect(error.error).toMatchObject({ type: 'upstream_error', code: 'upstream_stream_failed' });
    expect(all.some((f) => f.includes('Partial'))).toBe(true);
  });

  it('ends the stream with an error event when Anthropic sends malformed JSON', async () => {
    fake.queue({ raw: sse('message_start', { message: { id: 'm' } }) + 'event: content_block_delta\ndata: {"broken": \n\n' });
    const res = await chat(chatBody(model, { stream: true }));
    const all = frames(res.body);
    expect(all.at(-1)).toBe('[DONE]');
    expect(JSON.parse(all.at(-2)!).error.code).toBe('upstream_stream_failed');
  });

  it('rejects embeddings and moderations on an anthropic model with 400', async () => {
    const embed = await call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/embeddings', payload: { model, input: 'hello' } });
    expect(embed.statusCode).toBe(400);
    expect(embed.json().error.type).toBe('invalid_request_error');
    // A model cannot claim them: the registry refuses what the provider does not offer.
    const claimed = await call(t.app, t.adminSession, { method: 'POST', url: '/api/models', payload: { key: 'claude-embed', provider: { type: 'anthropic', baseUrl: fake.baseUrl }, capabilities: ['chat', 'embeddings', 'moderation'] } });
    expect(claimed.statusCode).toBe(400);
    expect(claimed.json().error.message).toMatch(/embeddings, moderation are not offered by the anthropic provider/);
  });

  it('answers n > 1 with a 400 naming n, without calling Anthropic (its Messages API has one answer per call)', async () => {
    const before = fake.requests.length;
    for (const stream of [false, true]) {
      const res = await chat({ ...chatBody(model), n: 2, stream });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error).toMatchObject({ type: 'invalid_request_error', message: expect.stringMatching(/one choice.*\bn must be 1/) });
    }
    expect(fake.requests.length).toBe(before);
    expect((await chat({ ...chatBody(model), n: 1 })).statusCode).toBe(200);
  });

  it('sends no x-api-key when the model has no key', async () => {
    const keyless = await registerModel(t, { provider: { type: 'anthropic', baseUrl: fake.baseUrl } });
    expect((await chat(chatBody(keyless))).statusCode).toBe(200);
    expect(lastRequest().headers['x-api-key']).toBeUndefined();
    expect(lastRequest().headers['anthropic-version']).toBe('2023-06-01');
  });

  // Regression: the route schema does not check tool_calls, and a null entry once became a 500.
  it('answers a null tool call entry with a 4xx, not a 500', async () => {
    const res = await chat({ model, messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'y', tool_calls: [null] }, { role: 'user', content: 'z' }] });
    expect(res.statusCode).toBeLessThan(500);
  });
});
