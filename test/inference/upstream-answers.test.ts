import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeAnthropic, type FakeUpstream } from '../helpers/fake-upstream.js';
import { post, registerFakeModel, setupInference, sseData, type InferenceSetup } from '../helpers/inference.js';
import { chatBody, registerModel } from '../helpers/models.js';

/**
 * Odd but possible upstream answers: streams cut off without their end marker, answers without usage, errors inside
 * a 200, events that are not objects, and upstreams that end their body a little after the end of the answer. Each
 * case is one an earlier version got wrong (a 500, an unfinished answer passed off as complete, zero tokens metered).
 */

const chunk = (delta: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ id: 'chatcmpl-a', object: 'chat.completion.chunk', created: 1, model: 'up', choices: [{ index: 0, delta, finish_reason: finish }], ...extra });
const sseOf = (...data: string[]) => data.map((d) => `data: ${d}\n\n`).join('');
const anthropicEvent = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

describe('answers of OpenAI-compatible and Anthropic upstreams', () => {
  let s: InferenceSetup;
  let anthropicFake: FakeUpstream;
  let openai: string;
  let fallback: string;
  let claude: string;
  const chat = (model: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) => post(s.t, s.token.value, '/chat/completions', chatBody(model, extra), headers);
  const eventOf = async (model: string, requestId: string) => {
    await s.t.ctx.services.usage.flush();
    const row = await s.t.ctx.database.db.selectFrom('usage_events').selectAll().where('model', '=', model).where('request_id', '=', requestId).executeTakeFirstOrThrow();
    return { status: Number(row.status), input: Number(row.input_tokens), output: Number(row.output_tokens) };
  };

  beforeAll(async () => {
    s = await setupInference({ env: { WAYGATE_UPSTREAM_RETRIES: '0', WAYGATE_UPSTREAM_TIMEOUT_MS: '700' } });
    anthropicFake = await startFakeAnthropic();
    fallback = await registerFakeModel(s.t, s.fake, { upstreamModel: 'the-fallback' });
    openai = await registerFakeModel(s.t, s.fake, { fallbacks: [fallback] });
    claude = await registerModel(s.t, { provider: { type: 'anthropic', baseUrl: anthropicFake.baseUrl, apiKey: 'sk-ant' }, upstreamModel: 'claude-test' });
  });
  afterAll(async () => {
    await s.close();
    await anthropicFake.close();
  });

  describe('OpenAI-compatible streams', () => {
    it('a stream that ends without [DONE] and before any choice finished is a failed stream (502), not a complete one', async () => {
      s.fake.queue({ raw: sseOf(chunk({ role: 'assistant', content: 'Hel' })) });
      const res = await chat(openai, { stream: true }, { 'x-request-id': 'cut-stream' });
      const data = sseData(res.body);
      expect(data[0]).toBe(chunk({ role: 'assistant', content: 'Hel' }));
      expect(JSON.parse(data.at(-2)!).error).toMatchObject({ code: 'upstream_stream_failed', message: expect.stringContaining('ended before it was complete') });
      expect(data.at(-1)).toBe('[DONE]');
      expect((await eventOf(openai, 'cut-stream')).status).toBe(502);
    });

    it('a stream whose choices finished is complete without [DONE] (servers that never send it)', async () => {
      s.fake.queue({ raw: sseOf(chunk({ role: 'assistant', content: 'Hi' }), chunk({}, 'stop')) });
      const res = await chat(openai, { stream: true }, { 'x-request-id': 'no-done' });
      expect(sseData(res.body)).toEqual([chunk({ role: 'assistant', content: 'Hi' }), chunk({}, 'stop'), '[DONE]']);
      expect((await eventOf(openai, 'no-done')).status).toBe(200);
    });

    it('an empty stream body is a failed call: nothing was sent yet, so the fallback model answers', async () => {
      s.fake.queue({ raw: '' });
      const before = s.fake.requests.length;
      const res = await chat(openai, { stream: true, stream_options: { include_usage: true } });
      expect(res.statusCode).toBe(200);
      expect(s.fake.requests.slice(before).map((r) => r.body.model)).toEqual(['gpt-upstream', 'the-fallback']);
      expect(sseData(res.body).at(-1)).toBe('[DONE]');
    });

    it('without a fallback, a stream that fails before its first chunk answers 502 as JSON, not a 200 stream', async () => {
      s.fake.queue({ raw: '' });
      const res = await chat(fallback, { stream: true }, { 'x-request-id': 'empty-no-fallback' });
      expect(res.statusCode).toBe(502);
      expect(res.json().error.message).toContain('empty body');
      expect((await eventOf(fallback, 'empty-no-fallback')).status).toBe(502);
    });

    // Regression: `data: [DONE]` alone was a complete 200 stream with no chunk in it.
    it('a stream of [DONE] alone is a failed call like an empty one: the fallback answers, or a JSON 502', async () => {
      s.fake.queue({ raw: sseOf('[DONE]') });
      const before = s.fake.requests.length;
      const res = await chat(openai, { stream: true });
      expect(res.statusCode).toBe(200);
      expect(s.fake.requests.slice(before).map((r) => r.body.model)).toEqual(['gpt-upstream', 'the-fallback']);
      expect(sseData(res.body).some((d) => d.includes('"content"'))).toBe(true);
      s.fake.queue({ raw: sseOf('[DONE]') });
      const alone = await chat(fallback, { stream: true }, { 'x-request-id': 'done-alone' });
      expect(alone.statusCode).toBe(502);
      expect(alone.json().error.message).toContain('before its first chunk');
      expect((await eventOf(fallback, 'done-alone')).status).toBe(502);
    });

    // Regression: an event that was a JSON array was forwarded to the client as a chunk.
    it('an event that is a JSON array, a number or a string is a failed stream, and never reaches the client', async () => {
      for (const data of ['[1,2]', '5', '"text"']) {
        s.fake.queue({ raw: sseOf(chunk({ role: 'assistant', content: 'Hi' }), data, chunk({}, 'stop')) });
        const res = await chat(fallback, { stream: true });
        const frames = sseData(res.body);
        expect(frames, data).not.toContain(data);
        expect(JSON.parse(frames.at(-2)!).error).toMatchObject({ code: 'upstream_stream_failed', message: expect.stringContaining('not a JSON object') });
      }
    });

    // Regression: a stream abandoned (or timed out) before its first chunk was billed nothing, unlike a JSON call.
    it('a stream whose upstream times out before its first chunk answers 504 and is billed its input', async () => {
      s.fake.queue({ firstEventDelayMs: 4_000 });
      const res = await chat(fallback, { stream: true }, { 'x-request-id': 'silent-start' });
      expect(res.statusCode, res.body).toBe(504);
      expect(await eventOf(fallback, 'silent-start')).toEqual({ status: 504, input: 10, output: 0 });
    });

    it('a call the upstream refused (429) is not billed its input', async () => {
      s.fake.queue({ status: 429, headers: { 'retry-after': '0' } });
      const res = await chat(fallback, {}, { 'x-request-id': 'refused-429' });
      expect(res.statusCode).toBe(429);
      expect(await eventOf(fallback, 'refused-429')).toEqual({ status: 429, input: 0, output: 0 });
    });

    it('an error as the first stream event hands over to the fallback model', async () => {
      s.fake.queue({ raw: sseOf(JSON.stringify({ error: { message: 'overloaded', type: 'server_error' } })) });
      const before = s.fake.requests.length;
      const res = await chat(openai, { stream: true });
      expect(res.statusCode).toBe(200);
      expect(s.fake.requests.slice(before).map((r) => r.body.model)).toEqual(['gpt-upstream', 'the-fallback']);
      expect(sseData(res.body).some((d) => d.includes('"error"'))).toBe(false);
    });

    it('[DONE] followed by white space still ends the answer', async () => {
      s.fake.queue({ raw: sseOf(chunk({ content: 'Hi' }), chunk({}, 'stop')).concat('data: [DONE] \n\n') });
      const res = await chat(openai, { stream: true });
      expect(sseData(res.body)).toEqual([chunk({ content: 'Hi' }), chunk({}, 'stop'), '[DONE]']);
    });

    it("an error the upstream reports mid-stream keeps the upstream's message and code", async () => {
      s.fake.queue({ raw: sseOf(chunk({ content: 'Hi' }), JSON.stringify({ error: { message: 'context too long', code: 'context_length_exceeded' } })) });
      const res = await chat(openai, { stream: true });
      const error = JSON.parse(sseData(res.body).at(-2)!).error;
      expect(error).toEqual({ message: 'Upstream stream failed: context too long (context_length_exceeded)', type: 'upstream_error', code: 'upstream_stream_failed' });
    });

    it('a tool-call-only stream without usage is metered with its arguments counted, not zero output', async () => {
      const call = { index: 0, id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"city":"Paris","units":"metric","days":5}' } };
      s.fake.queue({ deltas: [{ tool_calls: [call] }], omitUsage: true });
      const res = await chat(openai, { stream: true }, { 'x-request-id': 'tools-stream' });
      expect(res.statusCode).toBe(200);
      expect((await eventOf(openai, 'tools-stream')).output).toBeGreaterThan(5);
    });

    it('a usage chunk not in OpenAI form is withheld, so the client gets exactly one usage chunk (Waygate counts)', async () => {
      const odd = JSON.stringify({ id: 'chatcmpl-a', object: 'chat.completion.chunk', created: 1, model: 'up', choices: [], usage: { input_tokens: 3, output_tokens: 1 } });
      s.fake.queue({ raw: sseOf(chunk({ content: 'Hi' }, 'stop'), odd, '[DONE]') });
      const res = await chat(openai, { stream: true, stream_options: { include_usage: true } });
      const usageChunks = sseData(res.body).filter((d) => d.includes('"usage"'));
      expect(usageChunks).toHaveLength(1);
      expect(JSON.parse(usageChunks[0]!).usage).toHaveProperty('prompt_tokens');
    });

    // Regression: a usage chunk sent twice reached the client twice, and one with `choices: null` kept its null.
    it('the client gets one usage chunk, with a choices list, however many the upstream sends', async () => {
      const usageChunk = (choices: unknown, prompt: number) => JSON.stringify({ id: 'chatcmpl-a', object: 'chat.completion.chunk', created: 1, model: 'up', choices, usage: { prompt_tokens: prompt, completion_tokens: 2, total_tokens: prompt + 2 } });
      // The second differs: what is billed must be what the client was shown.
      s.fake.queue({ raw: sseOf(chunk({ content: 'Hi' }, 'stop'), usageChunk(null, 4), usageChunk([], 9), '[DONE]') });
      const res = await chat(openai, { stream: true, stream_options: { include_usage: true } }, { 'x-request-id': 'two-usage' });
      const usageChunks = sseData(res.body).filter((d) => d.includes('"usage"')).map((d) => JSON.parse(d));
      expect(usageChunks).toEqual([{ id: 'chatcmpl-a', object: 'chat.completion.chunk', created: 1, model: 'up', choices: [], usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 } }]);
      expect(await eventOf(openai, 'two-usage')).toEqual({ status: 200, input: 4, output: 2 });
      // Not asked for: none of them.
      s.fake.queue({ raw: sseOf(chunk({ content: 'Hi' }, 'stop'), usageChunk(null, 4), usageChunk([], 4), '[DONE]') });
      const quiet = await chat(openai, { stream: true });
      expect(sseData(quiet.body).filter((d) => d.includes('"usage"'))).toEqual([]);
    });

    it('a counted usage chunk has an id, a created time and a model even when the upstream chunks had none', async () => {
      s.fake.queue({ raw: sseOf(JSON.stringify({ choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: 'stop' }] }), '[DONE]') });
      const res = await chat(openai, { stream: true, stream_options: { include_usage: true } });
      const counted = JSON.parse(sseData(res.body).at(-2)!);
      expect(counted).toMatchObject({ id: expect.stringMatching(/^chatcmpl-/), object: 'chat.completion.chunk', created: expect.any(Number), model: openai, choices: [] });
    });

    // Regression: stopping at [DONE] aborted an upstream body that was still open, which closed the connection: every
    // stream paid for a new connection (and TLS handshake) to an upstream that ends its body just after [DONE].
    it('a body that ends a little after [DONE] is read to its end, so the upstream connection is kept', async () => {
      const aborted = s.fake.aborted;
      for (let i = 0; i < 3; i++) {
        s.fake.queue({ endDelayMs: 30 });
        const res = await chat(openai, { stream: true });
        expect(sseData(res.body).at(-1)).toBe('[DONE]');
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(s.fake.aborted).toBe(aborted);
    });
  });

  describe('OpenAI-compatible answers', () => {
    it('an answer without usage is metered with its output counted (content and tool call arguments)', async () => {
      const message = { role: 'assistant', content: 'Here is a fairly long answer with quite a few words in it', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{"a":"bcdefgh"}' } }] };
      s.fake.queue({ body: { id: 'x', object: 'chat.completion', created: 1, model: 'up', choices: [{ index: 0, message, finish_reason: 'tool_calls' }] } });
      const res = await chat(openai, {}, { 'x-request-id': 'no-usage' });
      expect(res.statusCode).toBe(200);
      expect((await eventOf(openai, 'no-usage')).output).toBeGreaterThan(12);
    });

    it('a 200 whose body is only an error (OpenRouter style) is a failure: the fallback model answers', async () => {
      s.fake.queue({ body: { error: { message: 'Provider returned error', code: 502 } } });
      const before = s.fake.requests.length;
      const res = await chat(openai);
      expect(res.statusCode, res.body).toBe(200);
      expect(s.fake.requests.slice(before).map((r) => r.body.model)).toEqual(['gpt-upstream', 'the-fallback']);
      expect(res.json().choices[0].message.content).toBeTypeOf('string');
    });

    it('without a fallback, a 200 holding only an error answers 502 with the upstream error', async () => {
      s.fake.queue({ body: { error: { message: 'Provider returned error', code: 502 } } });
      const res = await chat(fallback);
      expect(res.statusCode).toBe(502);
      expect(res.json().error.message).toBeTypeOf('string');
    });
  });

  describe('Anthropic', () => {
    it('a stream that stops before message_start is a failed call (JSON 502), not an empty 200 stream', async () => {
      anthropicFake.queue({ raw: anthropicEvent('message_stop', {}) });
      const res = await chat(claude, { stream: true }, { 'x-request-id': 'stop-alone' });
      expect(res.statusCode).toBe(502);
      expect(res.json().error.message).toContain('before its first chunk');
      expect((await eventOf(claude, 'stop-alone')).status).toBe(502);
    });

    it('a stream event whose data is null is a failed stream (502), not an internal error', async () => {
      anthropicFake.queue({ raw: anthropicEvent('message_start', { message: { id: 'm', usage: { input_tokens: 3 } } }) + 'event: content_block_delta\ndata: null\n\n' });
      const res = await chat(claude, { stream: true }, { 'x-request-id': 'null-event' });
      const error = JSON.parse(sseData(res.body).at(-2)!).error;
      expect(error.code).toBe('upstream_stream_failed');
      expect((await eventOf(claude, 'null-event')).status).toBe(502);
      expect(s.t.logs.some((line) => line.includes('stream failed') && line.includes('null-event'))).toBe(false);
    });

    // Anthropic may answer 200 and then send overloaded_error as its first event.
    it('an error event before any content hands over to the fallback model', async () => {
      const claudeWithFallback = await registerModel(s.t, { provider: { type: 'anthropic', baseUrl: anthropicFake.baseUrl, apiKey: 'sk-ant' }, upstreamModel: 'claude-test', fallbacks: [fallback] });
      anthropicFake.queue({ raw: anthropicEvent('error', { error: { type: 'overloaded_error', message: 'Overloaded' } }) });
      const before = s.fake.requests.length;
      const res = await chat(claudeWithFallback, { stream: true });
      expect(res.statusCode).toBe(200);
      expect(s.fake.requests.slice(before).map((r) => r.body.model)).toEqual(['the-fallback']);
      expect(sseData(res.body).at(-1)).toBe('[DONE]');
    });

    it('a stream that ends without message_stop is a failed stream', async () => {
      anthropicFake.queue({
        raw: anthropicEvent('message_start', { message: { id: 'm', usage: { input_tokens: 3 } } }) + anthropicEvent('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hi' } }),
      });
      const res = await chat(claude, { stream: true }, { 'x-request-id': 'no-stop' });
      expect(JSON.parse(sseData(res.body).at(-2)!).error.message).toContain('message_stop');
      expect((await eventOf(claude, 'no-stop')).status).toBe(502);
    });

    it('a null content block is skipped, not a 500', async () => {
      anthropicFake.queue({ body: { id: 'm', type: 'message', content: [null, { type: 'text', text: 'Hi' }], stop_reason: 'end_turn', usage: { input_tokens: 1, output_tokens: 1 } } });
      const res = await chat(claude);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().choices[0].message.content).toBe('Hi');
    });

    it('an answer without usage shows none and is metered with counted tokens', async () => {
      anthropicFake.queue({ body: { id: 'm', type: 'message', content: [{ type: 'text', text: 'A reply of several words to count' }], stop_reason: 'end_turn' } });
      const res = await chat(claude, {}, { 'x-request-id': 'claude-no-usage' });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).not.toHaveProperty('usage');
      const event = await eventOf(claude, 'claude-no-usage');
      expect(event.input).toBeGreaterThan(0);
      expect(event.output).toBeGreaterThan(0);
    });

    it('a stream without usage in message_start gets one counted usage chunk, and is metered with counted tokens', async () => {
      anthropicFake.queue({
        raw:
          anthropicEvent('message_start', { message: { id: 'm' } }) +
          anthropicEvent('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Counted words here' } }) +
          anthropicEvent('message_delta', { delta: { stop_reason: 'end_turn' } }) +
          anthropicEvent('message_stop', {}),
      });
      const res = await chat(claude, { stream: true, stream_options: { include_usage: true } }, { 'x-request-id': 'claude-stream-no-usage' });
      const usageChunks = sseData(res.body).filter((d) => d.includes('"usage"'));
      expect(usageChunks).toHaveLength(1);
      expect(JSON.parse(usageChunks[0]!).usage.completion_tokens).toBeGreaterThan(0);
      const event = await eventOf(claude, 'claude-stream-no-usage');
      expect(event.input).toBeGreaterThan(0);
      expect(event.output).toBeGreaterThan(0);
    });
  });
});
