import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { call } from '../helpers/app.js';
import { chatBody } from '../helpers/models.js';
import { chat, embed, expectRefused, fakeModel, first, limitedProject, SETUPS, startDeployment, storedUsage, token, useFakeUpstream, type Deployment } from './support.js';

const fake = useFakeUpstream();

const DAY_S = 86_400;
const RETRY_AFTER: Record<string, [number, number] | null> = { day: [1, DAY_S], month: [1, 31 * DAY_S], total: null };

/**
 * Spends a budget of 75 (tokens or cents' worth) with calls of 10 input + 20 output: two whole calls, a third
 * capped at what is left (the fake then reports that many), and a fourth refused without an upstream call.
 */
async function spendDown(app: FastifyInstance, credentials: [string, string], model: string): Promise<{ capped: number; refused: Awaited<ReturnType<typeof chat>> }> {
  for (const credential of credentials) {
    const ok = await chat(app, credential, model);
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json().usage.total_tokens).toBe(30);
    expect(fake().requests.at(-1)!.body.max_tokens).toBe(20);
  }
  const squeezed = await chat(app, credentials[0], model);
  expect(squeezed.statusCode).toBe(200);
  const capped = fake().requests.at(-1)!.body.max_tokens as number;
  const before = fake().requests.length;
  fake().usage = { prompt: 10, completion: capped };
  const refused = await chat(app, credentials[1], model);
  expect(fake().requests.length).toBe(before);
  return { capped, refused };
}

describe.each(SETUPS)('budgets on $backend with $counters counters', ({ backend, counters }) => {
  let d: Deployment;
  let app: FastifyInstance;
  let model: string;

  beforeAll(async () => {
    d = await startDeployment(backend, counters);
    app = first(d).app;
    model = await fakeModel(d, fake());
  });
  afterAll(async () => {
    await d?.close();
  });

  it.each(['day', 'month', 'total'] as const)('a %s maxTokens budget caps the last call, then refuses with budget_exceeded', async (period) => {
    const t = await token(d, { budget: { maxTokens: 75, period } });
    const { capped, refused } = await spendDown(app, [t.value, t.value], model);
    // 60 used, 10 of the 15 left go to input.
    expect(capped).toBe(5);
    expectRefused(refused, 'budget_exceeded', RETRY_AFTER[period]!);
    expect(refused.json().error.message).toMatch(/75 tokens/);
    const stored = await storedUsage(d, { tokenId: t.id });
    expect(stored.events).toBe(3);
  });

  it('a maxCostUsd budget counts the priced model cost, caps the last call and refuses once spent', async () => {
    // $1000 per million tokens either way: one token costs $0.001, a 30-token call $0.03.
    const priced = await fakeModel(d, fake(), { pricing: { inputPer1M: 1000, outputPer1M: 1000, currency: 'USD' } });
    const t = await token(d, { budget: { maxCostUsd: 0.075, period: 'month' } });
    const { capped, refused } = await spendDown(app, [t.value, t.value], priced);
    // $0.015 left, $0.01 of it for input: 5 output tokens (4 should rounding of the float prices take a nano-dollar).
    expect(capped).toBeGreaterThanOrEqual(4);
    expect(capped).toBeLessThanOrEqual(5);
    expectRefused(refused, 'budget_exceeded', RETRY_AFTER.month!);
    expect(refused.json().error.message).toMatch(/0\.075 USD/);
  });

  it('with both maxTokens and maxCostUsd, the tighter one sets the cap', async () => {
    const priced = await fakeModel(d, fake(), { pricing: { inputPer1M: 1000, outputPer1M: 1000, currency: 'USD' } });
    // 40 tokens, or $1 (1000 tokens): the token limit leaves 30 output tokens, the cost limit 990.
    const t = await token(d, { budget: { maxTokens: 40, maxCostUsd: 1, period: 'total' } });
    expect((await chat(app, t.value, priced, { max_tokens: 500 })).statusCode).toBe(200);
    expect(fake().requests.at(-1)!.body.max_tokens).toBe(30);
  });

  it('caps a call that names no max_tokens at the budget left, and caps max_completion_tokens and max_tokens alike', async () => {
    const t = await token(d, { budget: { maxTokens: 1000, period: 'total' } });
    expect((await chat(app, t.value, model, {})).statusCode).toBe(200);
    expect(fake().requests.at(-1)!.body.max_tokens).toBe(990);
    // 30 used: 970 left, 960 after the input. This upstream is not OpenAI's: it may read only max_tokens.
    expect((await chat(app, t.value, model, { max_completion_tokens: 4000 })).statusCode).toBe(200);
    const sent = fake().requests.at(-1)!.body;
    expect(sent.max_completion_tokens).toBe(960);
    expect(sent.max_tokens).toBe(960);
    // A smaller request than the budget allows is left as it is.
    expect((await chat(app, t.value, model, { max_tokens: 7 })).statusCode).toBe(200);
    expect(fake().requests.at(-1)!.body.max_tokens).toBe(7);
  });

  // Regression: the smaller field set the reservation, and the larger went upstream unchanged.
  it('a request naming both limit fields is reserved by the larger, and both are capped', async () => {
    const t = await token(d, { budget: { maxTokens: 100, period: 'total' } });
    expect((await chat(app, t.value, model, { max_tokens: 100_000, max_completion_tokens: 1 })).statusCode).toBe(200);
    const sent = fake().requests.at(-1)!.body;
    // 100 left, 10 of them for the input.
    expect(sent.max_tokens).toBe(90);
    expect(sent.max_completion_tokens).toBe(1);
  });

  // Regression: the field was chosen for the primary model and sent unchanged to a fallback of another provider.
  it('a fallback of another provider type gets its own output limit field', async () => {
    const local = await fakeModel(d, fake(), { upstreamModel: 'fake-vllm' });
    const azure = await fakeModel(d, fake(), { provider: { type: 'azure-openai', baseUrl: fake().baseUrl.replace(/\/v1$/, ''), apiKey: 'k', deployment: 'dep' }, fallbacks: [local] });
    const t = await token(d, { budget: { maxTokens: 1000, period: 'total' } });
    fake().queue({ status: 503, headers: { 'retry-after': '0' } }, { status: 503, headers: { 'retry-after': '0' } }, { status: 503, headers: { 'retry-after': '0' } });
    const before = fake().requests.length;
    const res = await chat(app, t.value, azure, {});
    expect(res.statusCode, res.body).toBe(200);
    const sent = fake().requests.slice(before);
    expect(sent[0]!.body).toMatchObject({ max_completion_tokens: 990 });
    expect(sent[0]!.body.max_tokens).toBeUndefined();
    const toFallback = sent.at(-1)!.body;
    expect(toFallback).toMatchObject({ model: 'fake-vllm', max_tokens: 990 });
    expect(toFallback.max_completion_tokens).toBeUndefined();
  });

  it('a call is reserved at the dearest price of its model and fallbacks: a dearer fallback cannot pass a cost budget', async () => {
    const dear = await fakeModel(d, fake(), { upstreamModel: 'fake-dear', pricing: { inputPer1M: 0, outputPer1M: 100_000, currency: 'USD' } });
    const cheap = await fakeModel(d, fake(), { upstreamModel: 'fake-cheap', pricing: { inputPer1M: 0, outputPer1M: 1_000, currency: 'USD' }, fallbacks: [dear] });
    // $1 buys 1,000 output tokens of the cheap model and 10 of the dear one, which may end up answering.
    const t = await token(d, { budget: { maxCostUsd: 1, period: 'total' } });
    expect((await chat(app, t.value, cheap, { max_tokens: 500 })).statusCode).toBe(200);
    expect(fake().requests.at(-1)!.body).toMatchObject({ model: 'fake-cheap', max_tokens: 10 });
  });

  it('a call with n choices reserves max_tokens for each, and caps each at its share of what is left', async () => {
    const t = await token(d, { budget: { maxTokens: 1000, period: 'total' } });
    // 990 left after the input, shared by 4 choices.
    expect((await chat(app, t.value, model, { n: 4 })).statusCode).toBe(200);
    expect(fake().requests.at(-1)!.body).toMatchObject({ n: 4, max_tokens: 247 });
    // 970 left, 960 after the input: 4 x 100 fits and is sent as asked.
    expect((await chat(app, t.value, model, { n: 4, max_tokens: 100 })).statusCode).toBe(200);
    expect(fake().requests.at(-1)!.body).toMatchObject({ n: 4, max_tokens: 100 });
    // 4 x 300 does not: 940 left, 930 after the input, 232 for each choice.
    expect((await chat(app, t.value, model, { n: 4, max_tokens: 300 })).statusCode).toBe(200);
    expect(fake().requests.at(-1)!.body).toMatchObject({ n: 4, max_tokens: 232 });
  });

  it('a call that needs more than the whole budget is told so, without a Retry-After: no period will admit it', async () => {
    const big = { messages: [{ role: 'user', content: 'word '.repeat(60) }] };
    const t = await token(d, { budget: { maxTokens: 30, period: 'day' } });
    const before = fake().requests.length;
    const refused = await chat(app, t.value, model, big);
    expectRefused(refused, 'budget_exceeded', null);
    expect(refused.json().error.message).toMatch(/daily budget of 30 tokens is smaller than this call needs \(at least \d+ tokens\): it can never be admitted/);
    // A cost budget says so in dollars. $1 per million tokens: the call's input alone costs more than the budget.
    const priced = await fakeModel(d, fake(), { pricing: { inputPer1M: 1, outputPer1M: 1, currency: 'USD' } });
    const cheap = await token(d, { budget: { maxCostUsd: 0.00001, period: 'month' } });
    const costly = await chat(app, cheap.value, priced, big);
    expectRefused(costly, 'budget_exceeded', null);
    expect(costly.json().error.message).toMatch(/monthly budget of 0.00001 USD is smaller than this call needs \(at least 0\.0000\d+ USD\)/);
    expect(fake().requests.length).toBe(before);
  });

  it('a call with more choices than output tokens left is refused without an upstream call', async () => {
    // 13 tokens: 3 left after the 10 of input, one token each for 3 choices but not for 4.
    const t = await token(d, { budget: { maxTokens: 13, period: 'total' } });
    const before = fake().requests.length;
    expectRefused(await chat(app, t.value, model, { n: 4 }), 'budget_exceeded', null);
    expect(fake().requests.length).toBe(before);
    fake().usage = { prompt: 10, completion: 3 };
    expect((await chat(app, t.value, model, { n: 3 })).statusCode).toBe(200);
    expect(fake().requests.at(-1)!.body).toMatchObject({ n: 3, max_tokens: 1 });
  });

  it('streamed calls are settled with the usage the stream reports', async () => {
    const t = await token(d, { budget: { maxTokens: 75, period: 'total' } });
    for (let i = 0; i < 2; i++) {
      const res = await call(app, t.value, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody(model, { max_tokens: 20, stream: true }) });
      expect(res.statusCode).toBe(200);
      expect(res.body).toContain('[DONE]');
    }
    expect((await chat(app, t.value, model)).statusCode).toBe(200);
    expect(fake().requests.at(-1)!.body.max_tokens).toBe(5);
    fake().usage = { prompt: 10, completion: 5 };
    const stream = await call(app, t.value, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody(model, { max_tokens: 20, stream: true }) });
    expectRefused(stream, 'budget_exceeded', null);
  });

  it('usage that is not a number (a broken upstream) leaves the budget counting', async () => {
    const t = await token(d, { budget: { maxTokens: 100, period: 'total' } });
    fake().usage = { prompt: 10, completion: 'lots' as unknown as number };
    const stream = await call(app, t.value, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody(model, { max_tokens: 20, stream: true }) });
    expect(stream.statusCode).toBe(200);
    expect(stream.body).toContain('[DONE]');
    expect((await chat(app, t.value, model)).statusCode).toBe(200);
    // The stream and the JSON call each reported no valid output count: Waygate counted both of their token counts
    // itself (a broken count must not make the output free), and the budget holds what was counted.
    expect((await chat(app, t.value, model, { max_tokens: 1000 })).statusCode).toBe(200);
    const counted = await storedUsage(d, { tokenId: t.id });
    expect(counted.events).toBe(3);
    const rows = await first(d).ctx.database.db.selectFrom('usage_events').select(['input_tokens', 'output_tokens']).where('token_id', '=', t.id).orderBy('id').execute();
    const [streamed, json] = rows.map((r) => ({ input: Number(r.input_tokens), output: Number(r.output_tokens) }));
    for (const counted of [streamed!, json!]) expect(counted.output).toBeGreaterThan(0);
    // The last call reserves its input (the JSON call's, the same messages) and may have the rest as output.
    const spent = streamed!.input + streamed!.output + json!.input + json!.output;
    expect(fake().requests.at(-1)!.body.max_tokens).toBe(100 - spent - json!.input);
  });

  it('a failed upstream call gives its reservation back', async () => {
    const t = await token(d, { budget: { maxTokens: 60, period: 'total' } });
    fake().queue({ status: 400, body: { error: { message: 'no', type: 'invalid_request_error' } } });
    expect((await chat(app, t.value, model)).statusCode).toBe(400);
    for (let i = 0; i < 2; i++) expect((await chat(app, t.value, model)).statusCode).toBe(200);
    expectRefused(await chat(app, t.value, model), 'budget_exceeded', null);
  });

  it('a project budget set with PATCH /api/projects is shared by the tokens of the project', async () => {
    const project = await limitedProject(d, { budget: { maxTokens: 75, period: 'total' } });
    const projectModel = await fakeModel(d, fake(), {}, project.key);
    const a = await token(d, { projectId: project.key });
    const b = await token(d, { projectId: project.key });
    const { capped, refused } = await spendDown(app, [a.value, b.value], projectModel);
    expect(capped).toBe(5);
    expectRefused(refused, 'budget_exceeded', null);
    expect(refused.json().error.message).toMatch(/project/i);
    // A token created later starts from what the project has used.
    const late = await token(d, { projectId: project.key });
    expectRefused(await chat(app, late.value, projectModel), 'budget_exceeded', null);
    // Removing the budget lifts the limit.
    const lifted = await call(app, d.session, { method: 'PATCH', url: `/api/projects/${project.key}`, payload: { budget: null } });
    expect(lifted.statusCode).toBe(200);
    expect((await chat(app, late.value, projectModel)).statusCode).toBe(200);
  });

  // Regression: budget counters outlived a change of the budget, so a budget set again continued from a stale counter
  // instead of the stored usage a restart would start from. Counters are now keyed by the project's limit version.
  it('a project budget set again counts the usage made while it was lifted', async () => {
    const project = await limitedProject(d, { budget: { maxTokens: 100, period: 'total' } });
    const projectModel = await fakeModel(d, fake(), {}, project.key);
    const t = await token(d, { projectId: project.key });
    for (let i = 0; i < 2; i++) expect((await chat(app, t.value, projectModel)).statusCode).toBe(200);
    const patch = (budget: unknown) => call(app, d.session, { method: 'PATCH', url: `/api/projects/${project.key}`, payload: { budget } });
    expect((await patch(null)).statusCode).toBe(200);
    for (let i = 0; i < 2; i++) expect((await chat(app, t.value, projectModel)).statusCode).toBe(200);
    expect(await storedUsage(d, { projectId: project.id })).toEqual({ events: 4, tokens: 120 });
    expect((await patch({ maxTokens: 100, period: 'total' })).statusCode).toBe(200);
    // 120 of 100 used.
    expectRefused(await chat(app, t.value, projectModel), 'budget_exceeded', null);
  });

  it('a budget changed while usage is still buffered starts from that usage too', async () => {
    const project = await limitedProject(d, { budget: { maxTokens: 100, period: 'total' } });
    const projectModel = await fakeModel(d, fake(), {}, project.key);
    const t = await token(d, { projectId: project.key });
    for (let i = 0; i < 2; i++) expect((await chat(app, t.value, projectModel)).statusCode).toBe(200);
    // The two usage events wait in this instance's buffer; the new budget's counter starts from stored usage.
    const patched = await call(app, d.session, { method: 'PATCH', url: `/api/projects/${project.key}`, payload: { budget: { maxTokens: 76, period: 'total' } } });
    expect(patched.statusCode).toBe(200);
    // 60 of 76 used: 6 left after the input.
    expect((await chat(app, t.value, projectModel)).statusCode).toBe(200);
    expect(fake().requests.at(-1)!.body.max_tokens).toBe(6);
  });

  // Regression: every PATCH of a project's limits started new budget counters from stored usage, which does not hold
  // the calls still running: their reservations were forgotten and new calls passed the budget.
  it('a PATCH that starts counting nothing new keeps the reservations of calls still running', async () => {
    const project = await limitedProject(d, { budget: { maxTokens: 300, period: 'total' } });
    const projectModel = await fakeModel(d, fake(), {}, project.key);
    const t = await token(d, { projectId: project.key });
    const before = fake().requests.length;
    fake().queue({ delayMs: 400 }, { delayMs: 400 }, { delayMs: 400 });
    // 10 input + 90 output reserved by each.
    const running = [0, 1, 2].map(() => chat(app, t.value, projectModel, { max_tokens: 90 }));
    await vi.waitFor(() => expect(fake().requests.length).toBe(before + 3), { timeout: 5_000, interval: 10 });
    expectRefused(await chat(app, t.value, projectModel, { max_tokens: 90 }), 'budget_in_use', [1, 1]);
    const patched = await call(app, d.session, { method: 'PATCH', url: `/api/projects/${project.key}`, payload: { rateLimit: { rpm: 1000 } } });
    expect(patched.statusCode).toBe(200);
    expectRefused(await chat(app, t.value, projectModel, { max_tokens: 90 }), 'budget_in_use', [1, 1]);
    for (const res of await Promise.all(running)) expect(res.statusCode).toBe(200);
  });

  // Regression: a budget full of running calls' reservations, with almost nothing spent, was reported "used up", with
  // a Retry-After of the period's end.
  it('a budget taken by the reservations of running calls is a 429 budget_in_use with Retry-After 1; once they end, calls go on', async () => {
    const t = await token(d, { budget: { maxTokens: 10_000, period: 'day' } });
    const before = fake().requests.length;
    fake().queue({ delayMs: 400 }, { delayMs: 400 }, { delayMs: 400 });
    // With no max_tokens each reserves its input and 4096 output tokens: the third gets what is left.
    const running = [0, 1, 2].map(() => chat(app, t.value, model, {}));
    await vi.waitFor(() => expect(fake().requests.length).toBe(before + 3), { timeout: 5_000, interval: 10 });
    const refused = await chat(app, t.value, model, {});
    expectRefused(refused, 'budget_in_use', [1, 1]);
    expect(refused.json().error.message).toMatch(/10000 tokens is taken by the reservations of calls in progress/);
    expect(fake().requests.length).toBe(before + 3);
    for (const res of await Promise.all(running)) expect(res.statusCode).toBe(200);
    expect((await chat(app, t.value, model, {})).statusCode).toBe(200);
  });

  // Regression: the stored spending read for the refusal of a budget held by running calls was kept for a second, so
  // once those calls ended (the budget now used up) refusals still said budget_in_use, retry in 1 s.
  it('a budget used up by calls that just ended is budget_exceeded at once, not budget_in_use', async () => {
    const t = await token(d, { budget: { maxTokens: 205, period: 'day' } });
    fake().usage = { prompt: 10, completion: 90 };
    const before = fake().requests.length;
    fake().queue({ delayMs: 400 }, { delayMs: 400 });
    // 10 input + 90 output reserved by each: 5 tokens left, less than a call needs.
    const running = [0, 1].map(() => chat(app, t.value, model, { max_tokens: 90 }));
    await vi.waitFor(() => expect(fake().requests.length).toBe(before + 2), { timeout: 5_000, interval: 10 });
    expectRefused(await chat(app, t.value, model, { max_tokens: 90 }), 'budget_in_use', [1, 1]);
    for (const res of await Promise.all(running)) expect(res.statusCode).toBe(200);
    expectRefused(await chat(app, t.value, model, { max_tokens: 90 }), 'budget_exceeded', RETRY_AFTER.day!);
    expect(fake().requests.length).toBe(before + 2);
  });

  // Regressions: a PATCH that restarts the budget counters (another period) started them from stored usage, which
  // lacked the calls still running, and those calls were settled on the old counters only; calls admitted while the
  // project had no limits reserved nothing and were never counted at all. Either way the project could spend its
  // budget again.
  it.each([
    ['a PATCH that restarts the budget counters (another period)', { budget: { maxTokens: 300, period: 'day' } }, 'month'],
    ['a budget first set on a project without limits', {}, 'day'],
  ] as const)('calls running across %s are counted in the new counters when they end', async (_case, limits, period) => {
    const project = await limitedProject(d, limits);
    const projectModel = await fakeModel(d, fake(), {}, project.key);
    const t = await token(d, { projectId: project.key });
    fake().usage = { prompt: 10, completion: 90 };
    const before = fake().requests.length;
    fake().queue({ delayMs: 400 }, { delayMs: 400 }, { delayMs: 400 });
    const running = [0, 1, 2].map(() => chat(app, t.value, projectModel, { max_tokens: 90 }));
    await vi.waitFor(() => expect(fake().requests.length).toBe(before + 3), { timeout: 5_000, interval: 10 });
    const patched = await call(app, d.session, { method: 'PATCH', url: `/api/projects/${project.key}`, payload: { budget: { maxTokens: 300, period } } });
    expect(patched.statusCode).toBe(200);
    // A call admitted meanwhile starts the new counters from stored usage: the running calls' reservations are not
    // in it (the README says so), but their usage is added when they end.
    expect((await chat(app, t.value, projectModel, { max_tokens: 90 })).statusCode).toBe(200);
    for (const res of await Promise.all(running)) expect(res.statusCode).toBe(200);
    expectRefused(await chat(app, t.value, projectModel, { max_tokens: 90 }), 'budget_exceeded', RETRY_AFTER[period]!);
    expect(fake().requests.length).toBe(before + 4);
  });

  // Regression (found in review): a period changed and changed back brought the earlier period's counter back, which
  // had missed every call in between.
  it('a budget whose period changes and changes back counts the calls made in between', async () => {
    const project = await limitedProject(d, { budget: { maxTokens: 100, period: 'day' } });
    const projectModel = await fakeModel(d, fake(), {}, project.key);
    const t = await token(d, { projectId: project.key });
    const patch = (budget: unknown) => call(app, d.session, { method: 'PATCH', url: `/api/projects/${project.key}`, payload: { budget } });
    expect((await chat(app, t.value, projectModel)).statusCode).toBe(200);
    expect((await patch({ maxTokens: 100, period: 'month' })).statusCode).toBe(200);
    for (let i = 0; i < 2; i++) expect((await chat(app, t.value, projectModel)).statusCode).toBe(200);
    expect((await patch({ maxTokens: 100, period: 'day' })).statusCode).toBe(200);
    // 90 of 100 used today: the last 10 go to the input, so no output token is left.
    expectRefused(await chat(app, t.value, projectModel), 'budget_exceeded', [1, 86_400]);
  });

  it('embeddings count against a token budget, and are refused without an upstream call once it is spent', async () => {
    const embedder = await fakeModel(d, fake(), { capabilities: ['embeddings'] });
    const t = await token(d, { budget: { maxTokens: 30, period: 'total' } });
    fake().usage = { prompt: 10, completion: 0 };
    for (let i = 0; i < 3; i++) {
      const res = await embed(app, t.value, embedder, 'hello world');
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().usage.prompt_tokens).toBe(10);
    }
    const before = fake().requests.length;
    expectRefused(await embed(app, t.value, embedder, 'hello world'), 'budget_exceeded', null);
    // Chat shares the budget that embeddings spent.
    expectRefused(await chat(app, t.value, model), 'budget_exceeded', null);
    expect(fake().requests.length).toBe(before);
    expect(await storedUsage(d, { tokenId: t.id })).toEqual({ events: 3, tokens: 30 });
  });

  // Regression: budgeted embeddings and moderations bodies once went upstream with `max_tokens: 0`.
  it.each([
    ['embeddings', '/v1/embeddings'],
    ['moderations', '/v1/moderations'],
  ])('a budgeted %s call is sent upstream as the client sent it (no max_tokens added)', async (endpoint, upstreamPath) => {
    const capability = endpoint === 'embeddings' ? 'embeddings' : 'moderation';
    const key = await fakeModel(d, fake(), { capabilities: [capability] });
    const t = await token(d, { budget: { maxTokens: 1000, period: 'total' } });
    const res = await call(app, t.value, { method: 'POST', url: `/api/client/v1/${endpoint}`, payload: { model: key, input: 'hello world' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(fake().requests.at(-1)!.path).toBe(upstreamPath);
    expect(fake().requests.at(-1)!.body).toEqual({ model: 'fake-model', input: 'hello world' });
  });

  it('the built-in local-embed model counts against a budget too', async () => {
    const t = await token(d, { budget: { maxTokens: 20, period: 'total' } });
    let used = 0;
    let refusedAt = -1;
    for (let i = 0; i < 10 && refusedAt < 0; i++) {
      const res = await embed(app, t.value, 'local-embed', 'alpha beta gamma delta');
      if (res.statusCode === 429) {
        expectRefused(res, 'budget_exceeded', null);
        refusedAt = i;
      } else {
        expect(res.statusCode, res.body).toBe(200);
        used += res.json().usage.total_tokens as number;
      }
    }
    expect(refusedAt).toBeGreaterThan(0);
    expect(used).toBeLessThanOrEqual(20);
    expect(await storedUsage(d, { tokenId: t.id })).toMatchObject({ tokens: used });
  });

  it('rejects a budget that caps nothing', async () => {
    const res = await call(app, d.session, { method: 'POST', url: '/api/tokens', payload: { name: 'x', projectId: 'default', role: 'member', budget: { period: 'day' } } });
    expect(res.statusCode).toBe(400);
  });
});
