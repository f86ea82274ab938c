import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTestApp, type TestApp } from '../helpers/app.js';
import { chatBody, registerModel } from '../helpers/models.js';

/** The scriptable `mock` provider through the client API. */

type Body = Record<string, unknown>;

describe('mock provider', () => {
  let t: TestApp;
  const chat = (body: Body) => call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/chat/completions', payload: body });
  const post = (path: string, payload: Body) => call(t.app, t.ownerToken, { method: 'POST', url: `/api/client/v1/${path}`, payload });
  const mockModel = (mock: Body | null, extra: Body = {}) => registerModel(t, { provider: { type: 'mock', mock }, upstreamModel: 'mock-1', ...extra });
  /** Log lines saying a call to this model failed and was handed over to the next candidate (or given up). */
  const handOvers = (key: string) =>
    t.logs.map((line) => JSON.parse(line) as { msg?: string; model?: string; status?: number }).filter((l) => l.msg === 'upstream call failed; trying the next fallback' && l.model === key);

  beforeAll(async () => {
    t = await createTestApp({ env: { WAYGATE_UPSTREAM_RETRIES: '0' } });
  });
  afterAll(async () => t?.close());

  it('answers the scripted reply with counted usage', async () => {
    const model = await mockModel({ reply: 'Scripted answer, every time.' });
    const res = await chat(chatBody(model));
    expect(res.statusCode, res.body).toBe(200);
    const json = res.json();
    expect(json).toMatchObject({ object: 'chat.completion', model: 'mock-1', choices: [{ message: { role: 'assistant', content: 'Scripted answer, every time.' }, finish_reason: 'stop' }] });
    expect(json.usage.prompt_tokens).toBeGreaterThan(0);
    expect(json.usage.completion_tokens).toBeGreaterThan(0);
    expect(json.usage.total_tokens).toBe(json.usage.prompt_tokens + json.usage.completion_tokens);
  });

  it('answers every one of the n choices asked for, plain and streamed', async () => {
    const model = await mockModel({ reply: 'Twice over.' });
    const one = (await chat(chatBody(model))).json();
    const two = (await chat(chatBody(model, { n: 2 }))).json();
    expect(two.choices.map((c: { index: number; message: { content: string } }) => [c.index, c.message.content])).toEqual([[0, 'Twice over.'], [1, 'Twice over.']]);
    expect(two.usage.completion_tokens).toBe(2 * one.usage.completion_tokens);
    const streamed = (await chat(chatBody(model, { n: 2, stream: true }))).body;
    const indexes = new Set(streamed.split('\n\n').filter((f) => f.startsWith('data: {')).flatMap((f) => (JSON.parse(f.slice(6)).choices as { index: number }[]).map((c) => c.index)));
    expect([...indexes].sort()).toEqual([0, 1]);
  });

  it('answers "This is a mock reply." without a script', async () => {
    for (const mock of [null, {}]) {
      const model = await mockModel(mock);
      expect((await chat(chatBody(model))).json().choices[0].message.content).toBe('This is a mock reply.');
    }
  });

  it('cuts the scripted reply at max_tokens', async () => {
    const model = await mockModel({ reply: 'one two six ten red big old' });
    const json = (await chat(chatBody(model, { max_tokens: 3 }))).json();
    expect(json.choices[0].finish_reason).toBe('length');
    expect(json.choices[0].message.content).toBe('one two six');
  });

  it('streams the scripted reply with usage and [DONE]', async () => {
    const model = await mockModel({ reply: 'Streamed mock words' });
    const res = await chat(chatBody(model, { stream: true, stream_options: { include_usage: true } }));
    expect(res.statusCode, res.body).toBe(200);
    const frames = res.body.split('\n\n').filter((f) => f !== '');
    expect(frames.at(-1)).toBe('data: [DONE]');
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f.replace(/^data: /, '')) as { choices: { delta: { content?: string } }[]; usage?: { total_tokens: number } });
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Streamed mock words');
    expect(chunks.at(-1)!.usage!.total_tokens).toBeGreaterThan(0);
  });

  it('answers after the scripted latency, streamed or not', async () => {
    const model = await mockModel({ reply: 'Slow but sure', latencyMs: 30 });
    const res = await chat(chatBody(model));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().choices[0].message.content).toBe('Slow but sure');
    const streamed = await chat(chatBody(model, { stream: true }));
    expect(streamed.statusCode).toBe(200);
    expect(streamed.body).toContain('Slow');
    expect(streamed.body.trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('never fails with failureRate 0', async () => {
    const model = await mockModel({ failureRate: 0 });
    for (let i = 0; i < 5; i++) expect((await chat(chatBody(model))).statusCode).toBe(200);
  });

  it('fails every call with failureRate 1: the scripted 503 reaches the client as 502, tried once', async () => {
    const model = await mockModel({ failureRate: 1, reply: 'never seen' });
    const res = await chat(chatBody(model));
    expect(res.statusCode).toBe(502);
    expect(res.json()).toEqual({ error: { message: 'Upstream model failed with status 503: Scripted mock failure', type: 'server_error', code: 'upstream_error' } });
    // The 503 counts as retryable, so the service hands over to the next candidate; there is none, so one attempt.
    expect(handOvers(model)).toHaveLength(1);
    expect(handOvers(model)[0]!.status).toBe(503);
  });

  it('fails a stream request with failureRate 1 before any byte: a JSON 502, not an event stream', async () => {
    const model = await mockModel({ failureRate: 1 });
    const res = await chat(chatBody(model, { stream: true }));
    expect(res.statusCode).toBe(502);
    expect(res.headers['content-type']).toMatch(/application\/json/);
    expect(res.json().error.code).toBe('upstream_error');
  });

  it('hands a failing mock over to its fallback', async () => {
    const failing = await mockModel({ failureRate: 1 });
    const alsoFailing = await mockModel({ failureRate: 1 });
    const healthy = await mockModel({ reply: 'fallback answered' });
    const primary = await mockModel({ failureRate: 1 }, { fallbacks: [alsoFailing, healthy] });
    const res = await chat(chatBody(primary));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().choices[0].message.content).toBe('fallback answered');
    expect(handOvers(primary)).toHaveLength(1);
    expect(handOvers(alsoFailing)).toHaveLength(1);
    // To the built-in echo model as well.
    const toLocal = await mockModel({ failureRate: 1 }, { fallbacks: ['local-chat'] });
    expect((await chat(chatBody(toLocal))).json().choices[0].message.content).toBe('Echo: Say hello');
    // When every candidate fails, the client gets the last failure.
    const allFail = await mockModel({ failureRate: 1 }, { fallbacks: [failing] });
    expect((await chat(chatBody(allFail))).statusCode).toBe(502);
    expect(handOvers(allFail)).toHaveLength(1);
    expect(handOvers(failing)).toHaveLength(1);
  });

  it('answers moderation with one unflagged result per input', async () => {
    const model = await mockModel(null, { capabilities: ['moderation'] });
    const one = await post('moderations', { model, input: 'I will hurt you' });
    expect(one.statusCode, one.body).toBe(200);
    expect(one.json()).toMatchObject({ model: 'mock-1', results: [{ flagged: false, categories: {}, category_scores: {} }] });
    expect(typeof one.json().id).toBe('string');
    const many = await post('moderations', { model, input: ['a', 'b', 'c'] });
    expect(many.json().results).toHaveLength(3);
    expect(many.json().results.every((r: { flagged: boolean }) => r.flagged === false)).toBe(true);
  });

  it('answers embeddings from the built-in embedder', async () => {
    const model = await mockModel(null, { capabilities: ['embeddings'] });
    const res = await post('embeddings', { model, input: ['mock me', 'and me'] });
    expect(res.statusCode, res.body).toBe(200);
    const json = res.json();
    expect(json).toMatchObject({ object: 'list', model: 'mock-1' });
    expect(json.data).toHaveLength(2);
    expect(json.data[0].embedding).toHaveLength(384);
    const local = await post('embeddings', { model: 'local-embed', input: 'mock me' });
    expect(json.data[0].embedding).toEqual(local.json().data[0].embedding);
    const small = await post('embeddings', { model, input: 'x', dimensions: 8 });
    expect(small.json().data[0].embedding).toHaveLength(8);
  });

  it('fails embeddings and moderation too with failureRate 1', async () => {
    const model = await mockModel({ failureRate: 1 }, { capabilities: ['embeddings', 'moderation'] });
    expect((await post('embeddings', { model, input: 'x' })).statusCode).toBe(502);
    expect((await post('moderations', { model, input: 'x' })).statusCode).toBe(502);
  });

  it('offers only the capabilities the model was registered with', async () => {
    const model = await mockModel(null, { capabilities: ['chat'] });
    const res = await post('embeddings', { model, input: 'x' });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/does not offer embeddings/);
  });
});
