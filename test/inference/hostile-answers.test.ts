import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { post, registerFakeModel, setupInference, sseData, sseJson, usageRowsOf, type InferenceSetup } from '../helpers/inference.js';
import { chatBody } from '../helpers/models.js';
import { guardrail } from '../guardrails/support.js';

/**
 * Upstream answers that break OpenAI's shapes (found by fuzzing the client endpoints against a hostile fake): each
 * gets a clean answer or error, never a 500 or an error log, and is metered once with real token counts.
 */
describe('hostile upstream answers', () => {
  let s: InferenceSetup;
  let plain: string;
  let guarded: string;
  const errorLogs = () => s.t.logs.filter((line) => (JSON.parse(line) as { level: number }).level >= 50);

  beforeAll(async () => {
    s = await setupInference({ backend: 'sqlite', env: { WAYGATE_UPSTREAM_RETRIES: '0' } });
    plain = await registerFakeModel(s.t, s.fake, { capabilities: ['chat'] });
    await guardrail(s.t, { key: 'hostile-out', type: 'pii', target: 'output' });
    guarded = await registerFakeModel(s.t, s.fake, { capabilities: ['chat'], guardrails: { output: ['hostile-out'] } });
  });
  afterAll(async () => s.close());
  beforeEach(() => {
    s.t.logs.length = 0;
  });

  async function eventOf(model: string, requestId: string) {
    await s.t.ctx.services.usage.flush();
    const rows = (await usageRowsOf(s.t, model)).filter((r) => r.request_id === requestId);
    expect(rows).toHaveLength(1);
    return rows[0]!;
  }

  // Regression: a missing or broken completion_tokens was billed as 0 output tokens, so budgets never counted output.
  it.each([
    ['missing', { prompt_tokens: 10 }],
    ['a string', { prompt_tokens: 10, completion_tokens: '400' }],
    ['negative', { prompt_tokens: 10, completion_tokens: -400 }],
  ])('a chat answer whose completion_tokens is %s has its output counted', async (what, usage) => {
    const id = `hostile-usage-${what.replace(/ /g, "-")}`;
    const content = 'a reply of several words that must be counted as output tokens';
    s.fake.queue({ body: { id: 'c', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage } });
    const res = await post(s.t, s.token.value, '/chat/completions', chatBody(plain), { 'x-request-id': id });
    expect(res.statusCode, res.body).toBe(200);
    expect((await eventOf(plain, id)).output_tokens).toBeGreaterThan(5);
  });

  it('a stream whose usage counts are broken: the client gets one usage chunk, in numbers, and the output is counted', async () => {
    s.fake.queue({
      raw: 'data: {"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello there"},"finish_reason":"stop"}]}\n\n' +
        'data: {"id":"a","usage":{"prompt_tokens":"3","completion_tokens":"2"}}\n\ndata: [DONE]\n\n',
    });
    const res = await post(s.t, s.token.value, '/chat/completions', chatBody(plain, { stream: true, stream_options: { include_usage: true } }), { 'x-request-id': 'hostile-stream-usage' });
    expect(res.statusCode, res.body).toBe(200);
    const usageChunks = sseJson(res.body).filter((event) => event.usage !== undefined);
    expect(usageChunks).toHaveLength(1);
    expect(usageChunks[0]).toMatchObject({ choices: [], usage: { prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) } });
    expect((await eventOf(plain, 'hostile-stream-usage')).output_tokens).toBeGreaterThan(0);
  });

  it('a usage event without choices reaches only a client that asked for usage', async () => {
    const body = 'data: {"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n' +
      'data: {"id":"a","usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\ndata: [DONE]\n\n';
    s.fake.queue({ raw: body });
    const res = await post(s.t, s.token.value, '/chat/completions', chatBody(plain, { stream: true }));
    expect(res.statusCode, res.body).toBe(200);
    expect(sseJson(res.body).some((event) => event.usage !== undefined)).toBe(false);
    expect(sseData(res.body).at(-1)).toBe('[DONE]');
  });

  // Regression: a TypeError (500, an error log, no fallback) on a null choice.
  it('a stream request answered with one JSON completion holding a null choice is a 502', async () => {
    s.fake.queue({ raw: '{"id":"x","choices":[null]}' });
    const res = await post(s.t, s.token.value, '/chat/completions', chatBody(plain, { stream: true }));
    expect(res.statusCode, res.body).toBe(502);
    expect(res.json().error.message).toMatch(/choice/);
    expect(errorLogs()).toEqual([]);
  });

  // Regression: `choices is not iterable` (500) when output guardrails read a malformed answer.
  it('a guarded JSON answer whose choices are not a list is passed on, not a 500', async () => {
    s.fake.queue({ raw: '{"id":"a","choices":{"a":1},"usage":{"prompt_tokens":1,"completion_tokens":1}}' });
    const res = await post(s.t, s.token.value, '/chat/completions', chatBody(guarded));
    expect(res.statusCode, res.body).toBe(200);
    expect(errorLogs()).toEqual([]);
  });

  // Regression: a guarded stream ended with an internal_error event (and an error log) on null entries.
  it.each([
    ['a null choice', 'data: {"id":"a","choices":[null]}\n\n'],
    ['a null tool call', 'data: {"id":"a","choices":[{"index":0,"delta":{"tool_calls":[null]}}]}\n\n'],
  ])('a guarded stream with %s ends cleanly', async (_what, event) => {
    s.fake.queue({ raw: `data: {"id":"a","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n${event}data: {"id":"a","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n` });
    const res = await post(s.t, s.token.value, '/chat/completions', chatBody(guarded, { stream: true }));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body).not.toContain('internal_error');
    expect(sseData(res.body).at(-1)).toBe('[DONE]');
    expect(errorLogs()).toEqual([]);
  });

  // Regression: a guardrail's rewritten answer (and a batch item's stored one) went through JSON.stringify, which
  // overflows the stack past a few thousand levels: a 500.
  it('an answer nested more than 1000 levels deep is a malformed answer (502), as JSON and as a stream event', async () => {
    const nested = `${'['.repeat(5_000)}${']'.repeat(5_000)}`;
    const content = 'write to jane.doe@example.com';
    s.fake.queue({ raw: `{"id":"a","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"${content}"},"finish_reason":"stop"}],"x":${nested}}` });
    const json = await post(s.t, s.token.value, '/chat/completions', chatBody(guarded));
    expect(json.statusCode, json.body.slice(0, 300)).toBe(502);
    expect(json.json().error.message).toMatch(/nested more than 1000 levels/);
    s.fake.queue({ raw: `data: {"id":"a","choices":[{"index":0,"delta":{"content":"hi"}}],"x":${nested}}\n\ndata: [DONE]\n\n` });
    const stream = await post(s.t, s.token.value, '/chat/completions', chatBody(plain, { stream: true }));
    expect(stream.statusCode, stream.body.slice(0, 300)).toBe(502);
    // Deep but within the bound, and a long answer whose brackets sit in strings: answered as usual.
    s.fake.queue({ raw: `{"id":"a","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"${'[{'.repeat(3_000)}"},"finish_reason":"stop"}],"x":${'['.repeat(900)}${']'.repeat(900)}}` });
    expect((await post(s.t, s.token.value, '/chat/completions', chatBody(plain))).statusCode).toBe(200);
    expect(errorLogs()).toEqual([]);
  });

  it("a 200 holding only an error message (a string) is the upstream's failure, with its message", async () => {
    s.fake.queue({ raw: '{"error":"boom"}' });
    const res = await post(s.t, s.token.value, '/chat/completions', chatBody(plain));
    expect(res.statusCode, res.body).toBe(502);
    expect(res.json().error.message).toContain('boom');
  });

  it("an upstream's 499 is a failed upstream (502), not this client leaving", async () => {
    s.fake.queue({ status: 499, body: { error: { message: 'client closed request', type: 'server_error' } } });
    const res = await post(s.t, s.token.value, '/chat/completions', chatBody(plain), { 'x-request-id': 'hostile-499' });
    expect(res.statusCode, res.body).toBe(502);
    expect((await eventOf(plain, 'hostile-499')).status).toBe(502);
  });
});
