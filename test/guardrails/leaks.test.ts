import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BACKENDS, call, createTestApp, createToken, type TestApp } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { post, registerFakeModel, sseJson, streamedText, usageRowsOf } from '../helpers/inference.js';
import { chatBody } from '../helpers/models.js';
import { evaluationRows, guardrail, judgeAnswer } from './support.js';

const EMAIL = 'jane.doe@example.com';
/** A JWT longer than the stream's hold-back window, whose payload carries an email address. */
const LONG_JWT = `${Buffer.from('{"alg":"HS256","typ":"JWT"}').toString('base64url')}.${Buffer.from(JSON.stringify({ sub: EMAIL, roles: 'x'.repeat(600) })).toString('base64url')}.${'s'.repeat(43)}`;

/** Every place an answer may carry text: none of them may slip past an output guardrail. */
function answerWith(text: string) {
  return {
    id: 'chatcmpl-x', object: 'chat.completion', created: 1, model: 'm',
    choices: [{
      index: 0, finish_reason: 'tool_calls',
      message: { role: 'assistant', content: `See ${text}`, refusal: `No, ${text}`, reasoning_content: `They want ${text}`, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'mail', arguments: `{"to":"${text}"}` } }] },
      logprobs: { content: [{ token: text, logprob: -0.1 }] },
    }],
    usage: { prompt_tokens: 10, completion_tokens: 40, total_tokens: 50 },
  };
}

describe.each(BACKENDS)('guardrails leave nothing behind on %s', (backend) => {
  let t: TestApp;
  let fake: FakeUpstream;
  let judge: string;
  const model = (guardrails: { input?: string[]; output?: string[] }) => registerFakeModel(t, fake, { guardrails, capabilities: ['chat'] });
  const chat = (key: string, content: string, extra: Record<string, unknown> = {}, token = t.ownerToken) =>
    post(t, token, '/chat/completions', chatBody(key, { messages: [{ role: 'user', content }], ...extra }));

  beforeAll(async () => {
    t = await createTestApp({ backend, noWorkers: true, env: { WAYGATE_UPSTREAM_RETRIES: '0' } });
    fake = await startFakeOpenAi();
    judge = await registerFakeModel(t, fake, { capabilities: ['chat'] });
    await guardrail(t, { key: 'redact', type: 'pii', action: 'redact', target: 'both' });
    await guardrail(t, { key: 'block-out', type: 'pii', target: 'output' });
    await guardrail(t, { key: 'judge-in', type: 'custom_prompt', config: { rules: 'Be polite.' }, modelKey: judge });
    await guardrail(t, { key: 'judge-out', type: 'custom_prompt', target: 'output', config: { rules: 'Be polite.' }, modelKey: judge });
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });
  beforeEach(() => {
    fake.requests.length = 0;
  });

  it('a redacted answer is redacted everywhere it carries text, and loses its logprobs', async () => {
    const key = await model({ output: ['redact'] });
    fake.queue({ body: answerWith(EMAIL) });
    const res = await chat(key, 'hi');
    expect(res.statusCode).toBe(200);
    expect(res.body).not.toContain(EMAIL);
    const message = res.json().choices[0].message;
    expect(message).toMatchObject({ content: 'See [REDACTED:email]', refusal: 'No, [REDACTED:email]', reasoning_content: 'They want [REDACTED:email]' });
    expect(message.tool_calls[0].function.arguments).toBe('{"to":"[REDACTED:email]"}');
    expect(res.json().choices[0].logprobs).toBeUndefined();
  });

  it('a stream carrying the value in tool call arguments or a refusal is stopped before any of it goes out', async () => {
    const key = await model({ output: ['block-out'] });
    for (const deltas of [
      [{ tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'mail', arguments: '{"to":"jane.doe@' } }] }, { tool_calls: [{ index: 0, function: { arguments: 'example.com"}' } }] }],
      [{ refusal: `I cannot mail ${EMAIL}` }],
      [{ reasoning_content: `They want ${EMAIL}` }, { content: 'Done.' }],
    ]) {
      fake.queue({ deltas });
      const res = await chat(key, 'hi', { stream: true });
      expect(res.body).not.toContain('jane.doe');
      expect(sseJson(res.body).at(-1)).toMatchObject({ error: { type: 'guardrail_block', guardrail_key: 'block-out' } });
    }
  });

  it('tool calls in a redacted stream arrive whole, redacted, after the content', async () => {
    const key = await model({ output: ['redact'] });
    fake.queue({ deltas: [{ content: 'Mailing.' }, { tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'mail', arguments: '{"to":"jane.doe@' } }] }, { tool_calls: [{ index: 0, function: { arguments: 'example.com"}' } }] }] });
    const events = sseJson((await chat(key, 'hi', { stream: true })).body);
    const calls = events.flatMap((e) => ((e.choices as { delta?: { tool_calls?: unknown[] } }[] | undefined)?.[0]?.delta?.tool_calls ?? []) as { id?: string; function: { name?: string; arguments: string } }[]);
    expect(calls).toEqual([{ index: 0, id: 'c1', type: 'function', function: { name: 'mail', arguments: '{"to":"[REDACTED:email]"}' } }]);
    expect(streamedText(events)).toBe('Mailing.');
  });

  it('a stream with non-ASCII text and a later address is redacted, not stopped', async () => {
    const key = await model({ output: ['redact'] });
    const filler = '…価格は１００円です，ＯＫ。'.repeat(60);
    fake.queue({ pieces: [filler, ' write to ', 'jane.doe@exa', 'mple.com ', filler] });
    const res = await chat(key, 'hi', { stream: true });
    expect(streamedText(sseJson(res.body))).toBe(`${filler} write to [REDACTED:email] ${filler}`);
    // One record for the request, however often the stream was checked on its way.
    expect((await evaluationRows(t, 'redact')).filter((r) => r.model === key && r.stage === 'output')).toHaveLength(1);
  });

  it('a token longer than the hold-back window is held until it ends: a long JWT never leaks its start', async () => {
    const key = await model({ output: ['block-out'] });
    fake.queue({ pieces: ['Your token is ', ...LONG_JWT.match(/.{1,40}/g)!, ' keep it safe.'] });
    const res = await chat(key, 'hi', { stream: true });
    expect(res.body).not.toContain(LONG_JWT.slice(0, 20));
    expect(sseJson(res.body).at(-1)).toMatchObject({ error: { guardrail_key: 'block-out', findings: [{ category: 'api_key' }] } });
    // And its record shows no part of it.
    const [record] = (await evaluationRows(t, 'block-out')).filter((r) => r.model === key);
    expect(record!.masked_text).not.toContain(LONG_JWT.slice(0, 20));
  });

  it('a stream an output guardrail stops is billed for what the upstream made', async () => {
    const key = await model({ output: ['block-out'] });
    fake.queue({ pieces: ['Mail ', EMAIL] });
    await chat(key, 'hi', { stream: true });
    expect(await usageRowsOf(t, key)).toEqual([expect.objectContaining({ status: 400, input_tokens: 10, output_tokens: 5 })]);
  });

  it('judges are not admitted again under the caller\'s limits: an output judge works with a budget, an input judge does not use up rpm', async () => {
    const budgeted = await createToken(t, { name: 'budgeted', budget: { maxTokens: 5000, period: 'day' } });
    const key = await model({ output: ['judge-out'] });
    fake.queue({}, { body: judgeAnswer('{"passed": true, "reason": "polite"}') });
    const res = await chat(key, 'hi', {}, budgeted.value);
    expect(res.statusCode, res.body).toBe(200);
    expect(fake.requests).toHaveLength(2);
    const limited = await createToken(t, { name: 'rpm-2', rateLimit: { rpm: 2 } });
    const guarded = await model({ input: ['judge-in'] });
    for (let i = 0; i < 2; i++) {
      fake.queue({ body: judgeAnswer('{"passed": true, "reason": "polite"}') }, {});
      expect((await chat(guarded, 'hi', {}, limited.value)).statusCode).toBe(200);
    }
    expect((await chat(guarded, 'hi', {}, limited.value)).statusCode).toBe(429);
    // The judges' usage is still metered and counted on the token.
    expect((await usageRowsOf(t, judge)).filter((r) => r.token_id === limited.id).map((r) => r.service)).toEqual(['guardrails', 'guardrails']);
  });

  it('a model judging for an enabled guardrail cannot be deleted or lose chat; a broken guardrail can still be disabled', async () => {
    const judgeModel = await registerFakeModel(t, fake, { capabilities: ['chat'] });
    await guardrail(t, { key: 'uses-judge', type: 'custom_prompt', config: { rules: 'x' }, modelKey: judgeModel });
    const del = await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/models/${judgeModel}` });
    expect(del.statusCode).toBe(409);
    expect(del.json().error.message).toMatch(/judges for guardrail "uses-judge"/);
    expect((await call(t.app, t.adminSession, { method: 'PATCH', url: `/api/models/${judgeModel}`, payload: { capabilities: ['embeddings'] } })).statusCode).toBe(409);
    await t.ctx.database.db.deleteFrom('models').where('key', '=', judgeModel).execute();
    // Any model change through the API drops the project's cached models, so the deletion is seen at once.
    await registerFakeModel(t, fake);
    expect((await call(t.app, t.adminSession, { method: 'PATCH', url: '/api/guardrails/uses-judge', payload: { enabled: false } })).statusCode).toBe(200);
    expect((await call(t.app, t.adminSession, { method: 'PATCH', url: '/api/guardrails/uses-judge', payload: { enabled: true } })).statusCode).toBe(400);
  });

  it('a judge stored without what its guardrail needs stays editable; only a change that breaks the link is refused', async () => {
    const judgeModel = await registerFakeModel(t, fake, { capabilities: ['chat'] });
    await guardrail(t, { key: 'judge-lost-chat', type: 'custom_prompt', config: { rules: 'x' }, modelKey: judgeModel });
    // Stored without chat behind the rules' back (before they existed, or by an older instance).
    await t.ctx.database.db.updateTable('models').set({ capabilities: JSON.stringify(['embeddings']) }).where('key', '=', judgeModel).execute();
    const patch = (payload: Record<string, unknown>) => call(t.app, t.adminSession, { method: 'PATCH', url: `/api/models/${judgeModel}`, payload });
    const pricing = await patch({ pricing: { inputPer1M: 1, outputPer1M: 2, currency: 'USD' } });
    expect(pricing.statusCode, pricing.body).toBe(200);
    expect((await patch({ provider: { apiKey: 'sk-rotated' } })).statusCode).toBe(200);
    expect((await patch({ capabilities: ['chat'] })).statusCode).toBe(200);
    // Working again, so losing chat once more is refused.
    const lost = await patch({ capabilities: ['embeddings'] });
    expect(lost.statusCode).toBe(409);
    expect(lost.json().error.message).toMatch(/judges for guardrail "judge-lost-chat"/);
    expect((await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/models/${judgeModel}` })).statusCode).toBe(409);
  });

  it('extra moderation categories cannot go to a model that only knows its own categories', async () => {
    const moderator = await registerFakeModel(t, fake, { capabilities: ['moderation'] });
    const res = await call(t.app, t.adminSession, {
      method: 'POST', url: '/api/guardrails',
      payload: { key: 'extra-mod', type: 'moderation', config: { engine: 'model', extraCategories: [{ name: 'rivals', terms: ['acme'] }] }, modelKey: moderator },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/extraCategories cannot be judged/);
  });

  it('a chat judge of extra moderation categories cannot gain moderation, which would send them to an endpoint that ignores them', async () => {
    const judgeModel = await registerFakeModel(t, fake, { capabilities: ['chat'] });
    await guardrail(t, { key: 'extra-by-chat', type: 'moderation', config: { engine: 'model', extraCategories: [{ name: 'rivals', terms: ['acme'] }] }, modelKey: judgeModel });
    const gain = await call(t.app, t.adminSession, { method: 'PATCH', url: `/api/models/${judgeModel}`, payload: { capabilities: ['chat', 'moderation'] } });
    expect(gain.statusCode).toBe(409);
    expect(gain.json().error.message).toMatch(/judges for guardrail "extra-by-chat", whose config\.extraCategories a moderation endpoint cannot judge/);
    expect((await call(t.app, t.adminSession, { method: 'PATCH', url: '/api/guardrails/extra-by-chat', payload: { enabled: false } })).statusCode).toBe(200);
    expect((await call(t.app, t.adminSession, { method: 'PATCH', url: `/api/models/${judgeModel}`, payload: { capabilities: ['chat', 'moderation'] } })).statusCode).toBe(200);
    // A judge stored with moderation already (before this rule, or by an older instance) stays editable.
    expect((await call(t.app, t.adminSession, { method: 'PATCH', url: '/api/guardrails/extra-by-chat', payload: { enabled: true } })).statusCode).toBe(400);
    await t.ctx.database.db.updateTable('guardrails').set({ enabled: 1 }).where('key', '=', 'extra-by-chat').execute();
    const pricing = await call(t.app, t.adminSession, { method: 'PATCH', url: `/api/models/${judgeModel}`, payload: { pricing: { inputPer1M: 1, outputPer1M: 2, currency: 'USD' } } });
    expect(pricing.statusCode, pricing.body).toBe(200);
  });
});
