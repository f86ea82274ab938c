import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { post, registerFakeModel, usageRowsOf } from '../helpers/inference.js';
import { chatBody } from '../helpers/models.js';
import { createAgent, publish, respond } from '../agents/support.js';
import { guardrail, judgeAnswer } from '../guardrails/support.js';

/**
 * Where a call's time goes: x-waygate-overhead-ms is the request's time minus every wait on an upstream (retries,
 * backoff, fallbacks, a stream's first chunk, judge models, agents), and each usage event's upstream latency covers
 * all of its attempts. The upstream waits here are 300 ms or more and Waygate's own work a few milliseconds, so
 * the bounds leave room for a slow machine.
 */

const WAIT_MS = 300;
/** Far above Waygate's own time for a call, far below WAIT_MS. */
const OWN_TIME_BOUND_MS = 150;

const overheadOf = (res: LightMyRequestResponse) => Number(res.headers['x-waygate-overhead-ms']);

describe('upstream time and overhead', () => {
  let t: TestApp;
  let fake: FakeUpstream;
  let second: FakeUpstream;
  let model: string;

  beforeAll(async () => {
    t = await createTestApp({ backend: 'sqlite', noWorkers: true, env: { WAYGATE_UPSTREAM_RETRIES: '1' } });
    [fake, second] = await Promise.all([startFakeOpenAi(), startFakeOpenAi()]);
    model = await registerFakeModel(t, fake, { capabilities: ['chat'] });
  });
  afterAll(async () => {
    await t?.close();
    await Promise.all([fake?.close(), second?.close()]);
  });
  beforeEach(() => {
    fake.queue();
  });

  /** The one usage event of a model's calls made with the given request id. */
  async function eventOf(key: string, requestId: string) {
    await t.ctx.services.usage.flush();
    const rows = (await usageRowsOf(t, key)).filter((r) => r.request_id === requestId);
    expect(rows).toHaveLength(1);
    return rows[0]!;
  }

  it('a JSON call: the upstream wait is upstream latency, not overhead', async () => {
    fake.queue({ delayMs: WAIT_MS });
    const res = await post(t, t.ownerToken, '/chat/completions', chatBody(model), { 'x-request-id': 'timing-json' });
    expect(res.statusCode, res.body).toBe(200);
    expect(overheadOf(res)).toBeLessThan(OWN_TIME_BOUND_MS);
    const event = await eventOf(model, 'timing-json');
    expect(event.upstream_latency_ms).toBeGreaterThanOrEqual(WAIT_MS);
    expect(event.latency_ms).toBeGreaterThanOrEqual(event.upstream_latency_ms);
  });

  // Regression: only the time to the response headers was upstream time, so a model's time to its first token
  // showed as Waygate's overhead.
  it("a stream: the upstream's time to its first chunk is upstream time", async () => {
    fake.queue({ firstEventDelayMs: WAIT_MS });
    const res = await post(t, t.ownerToken, '/chat/completions', chatBody(model, { stream: true }), { 'x-request-id': 'timing-stream' });
    expect(res.statusCode, res.body).toBe(200);
    expect(overheadOf(res)).toBeLessThan(OWN_TIME_BOUND_MS);
    expect((await eventOf(model, 'timing-stream')).upstream_latency_ms).toBeGreaterThanOrEqual(WAIT_MS);
  });

  // Regression: only the last attempt counted, so a retry's first attempt and its backoff showed as overhead.
  it('a retried call: every attempt and the backoff between them are upstream time', async () => {
    fake.queue({ status: 503, delayMs: WAIT_MS, headers: { 'retry-after': '0' } }, {});
    const res = await post(t, t.ownerToken, '/chat/completions', chatBody(model), { 'x-request-id': 'timing-retry' });
    expect(res.statusCode, res.body).toBe(200);
    expect(overheadOf(res)).toBeLessThan(OWN_TIME_BOUND_MS);
    expect((await eventOf(model, 'timing-retry')).upstream_latency_ms).toBeGreaterThanOrEqual(WAIT_MS);
  });

  // Regression: a failed call had no upstream time at all.
  it("an upstream's error: its time is upstream time too, for the header and the event", async () => {
    fake.queue({ status: 400, delayMs: WAIT_MS, body: { error: { message: 'bad', type: 'invalid_request_error' } } });
    const res = await post(t, t.ownerToken, '/chat/completions', chatBody(model), { 'x-request-id': 'timing-error' });
    expect(res.statusCode, res.body).toBe(400);
    expect(overheadOf(res)).toBeLessThan(OWN_TIME_BOUND_MS);
    expect((await eventOf(model, 'timing-error')).upstream_latency_ms).toBeGreaterThanOrEqual(WAIT_MS);
  });

  // Regression: a failed call was metered (and priced) as its primary model even when a fallback had answered it.
  it('a call that fails on its fallback is metered as the fallback, with the time of both', async () => {
    const fallback = await registerFakeModel(t, second, { capabilities: ['chat'], pricing: { inputPer1M: 1_000, outputPer1M: 1_000, currency: 'USD' } });
    const primary = await registerFakeModel(t, fake, { capabilities: ['chat'], fallbacks: [fallback] });
    fake.queue({ status: 503, delayMs: WAIT_MS / 2, headers: { 'retry-after': '0' } }, { status: 503, delayMs: WAIT_MS / 2, headers: { 'retry-after': '0' } });
    second.queue({ status: 400, body: { error: { message: 'refused by the fallback', type: 'invalid_request_error' } } });
    const res = await post(t, t.ownerToken, '/chat/completions', chatBody(primary), { 'x-request-id': 'timing-fallback' });
    expect(res.statusCode, res.body).toBe(400);
    expect(overheadOf(res)).toBeLessThan(OWN_TIME_BOUND_MS);
    await t.ctx.services.usage.flush();
    expect((await usageRowsOf(t, primary)).filter((r) => r.request_id === 'timing-fallback')).toEqual([]);
    const event = await eventOf(fallback, 'timing-fallback');
    expect(event).toMatchObject({ status: 400, provider: 'openai-compatible' });
    expect(event.upstream_latency_ms).toBeGreaterThanOrEqual(WAIT_MS);
  });

  // Regression: a judge's latency ran from the start of the request it judged, and its upstream time was overhead.
  it("a judge model's call: its latency is its own, and its upstream time is not the request's overhead", async () => {
    const judge = await registerFakeModel(t, fake, { capabilities: ['chat'] });
    await guardrail(t, { key: 'timing-judged', type: 'custom_prompt', target: 'output', config: { rules: 'Be polite.' }, modelKey: judge });
    const judged = await registerFakeModel(t, fake, { capabilities: ['chat'], guardrails: { output: ['timing-judged'] } });
    fake.queue({ delayMs: WAIT_MS }, { delayMs: WAIT_MS, body: judgeAnswer('{"passed": true, "reason": "polite"}') });
    const res = await post(t, t.ownerToken, '/chat/completions', chatBody(judged), { 'x-request-id': 'timing-judge' });
    expect(res.statusCode, res.body).toBe(200);
    expect(overheadOf(res)).toBeLessThan(OWN_TIME_BOUND_MS);
    const call = await eventOf(judged, 'timing-judge');
    const judging = await eventOf(judge, 'timing-judge');
    expect(judging.service).toBe('guardrails');
    expect(judging.upstream_latency_ms).toBeGreaterThanOrEqual(WAIT_MS);
    // It started once the answer was in: its latency leaves out the judged call's upstream wait.
    expect(judging.latency_ms).toBeLessThan(call.upstream_latency_ms + WAIT_MS);
    expect(judging.latency_ms).toBeLessThan(call.latency_ms);
  });

  // Regression: only the inference routes took upstream time out, so an agent's model call was all overhead.
  it("an agent's model call is upstream time in the agent's response", async () => {
    const agent = await createAgent(t, { name: 'Timing', config: { modelKey: model } });
    await publish(t, agent.key);
    fake.queue({ delayMs: WAIT_MS });
    const res = await respond(t, { model: agent.key, input: 'hello' });
    expect(res.statusCode, res.body).toBe(200);
    expect(overheadOf(res)).toBeLessThan(OWN_TIME_BOUND_MS);
  });
});
