import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/app.js';
import { awayFromMinuteEnd, chat, embed, expectRefused, fakeModel, first, limitedProject, SETUPS, startDeployment, token, useFakeUpstream, type Deployment } from './support.js';

const fake = useFakeUpstream();

describe.each(SETUPS)('rate limits on $backend with $counters counters', ({ backend, counters }) => {
  let d: Deployment;
  let model: string;
  let embedder: string;

  beforeAll(async () => {
    d = await startDeployment(backend, counters);
    model = await fakeModel(d, fake());
    embedder = await fakeModel(d, fake(), { capabilities: ['embeddings'] });
  });
  afterAll(async () => {
    await d?.close();
  });

  it('answers the (rpm+1)th request of a minute with 429 rate_limit_exceeded and Retry-After, without calling upstream', async () => {
    const { app } = first(d);
    const limited = await token(d, { rateLimit: { rpm: 3 } });
    const other = await token(d, { rateLimit: { rpm: 3 } });
    await awayFromMinuteEnd();
    for (let i = 0; i < 3; i++) expect((await chat(app, limited.value, model)).statusCode).toBe(200);
    const before = fake().requests.length;
    const refused = await chat(app, limited.value, model);
    expectRefused(refused, 'rate_limit_exceeded', [1, 60]);
    expect(refused.json().error.message).toMatch(/3 requests per minute/);
    // Other kinds of call count against the same limit, and stay refused.
    expectRefused(await embed(app, limited.value, embedder, 'hello'), 'rate_limit_exceeded', [1, 60]);
    expect(fake().requests.length).toBe(before);
    // Another token has its own limit.
    expect((await chat(app, other.value, model)).statusCode).toBe(200);
  });

  it('counts calls the upstream failed as requests too', async () => {
    const { app } = first(d);
    const limited = await token(d, { rateLimit: { rpm: 2 } });
    await awayFromMinuteEnd();
    fake().queue({ status: 400, body: { error: { message: 'bad request', type: 'invalid_request_error' } } });
    expect((await chat(app, limited.value, model)).statusCode).toBe(400);
    expect((await chat(app, limited.value, model)).statusCode).toBe(200);
    const before = fake().requests.length;
    expectRefused(await chat(app, limited.value, model), 'rate_limit_exceeded', [1, 60]);
    expect(fake().requests.length).toBe(before);
  });

  it('caps output at the tokens left in the minute, then refuses once tpm is used up', async () => {
    const { app } = first(d);
    const limited = await token(d, { rateLimit: { tpm: 75 } });
    await awayFromMinuteEnd();
    for (let i = 0; i < 2; i++) {
      const ok = await chat(app, limited.value, model);
      expect(ok.statusCode).toBe(200);
      expect(fake().requests.at(-1)!.body.max_tokens).toBe(20);
    }
    // 60 used; 10 input leave 5 output tokens.
    fake().usage = { prompt: 10, completion: 5 };
    const squeezed = await chat(app, limited.value, model);
    expect(squeezed.statusCode).toBe(200);
    expect(fake().requests.at(-1)!.body.max_tokens).toBe(5);
    const before = fake().requests.length;
    const refused = await chat(app, limited.value, model);
    expectRefused(refused, 'rate_limit_exceeded', [1, 60]);
    expect(refused.json().error.message).toMatch(/75 tokens per minute/);
    expect(fake().requests.length).toBe(before);
  });

  it('a call larger than the whole tokens-per-minute limit is told it can never be admitted, and not to retry', async () => {
    const { app } = first(d);
    const limited = await token(d, { rateLimit: { tpm: 20 } });
    const before = fake().requests.length;
    const refused = await chat(app, limited.value, model, { messages: [{ role: 'user', content: 'word '.repeat(60) }] });
    expect(refused.statusCode).toBe(429);
    expect(refused.json().error).toMatchObject({ code: 'rate_limit_exceeded', message: expect.stringMatching(/20 tokens per minute is smaller than this call needs .*never be admitted/) });
    expect(refused.headers['x-should-retry']).toBe('false');
    expect(refused.headers['retry-after']).toBeUndefined();
    expect(fake().requests.length).toBe(before);
  });

  it('gives back what a call reserved beyond what it used, so later calls fit', async () => {
    const { app } = first(d);
    const limited = await token(d, { rateLimit: { tpm: 100 } });
    await awayFromMinuteEnd();
    fake().usage = { prompt: 10, completion: 1 };
    // Each call reserves 10 + 80 but uses 11: nine calls fit in 100 only if the rest is given back each time.
    for (let i = 0; i < 8; i++) {
      expect((await chat(app, limited.value, model, { max_tokens: 80 })).statusCode).toBe(200);
    }
    // 88 used: the ninth gets 100 - 88 - 10 = 2 output tokens.
    expect((await chat(app, limited.value, model, { max_tokens: 80 })).statusCode).toBe(200);
    expect(fake().requests.at(-1)!.body.max_tokens).toBe(2);
    expectRefused(await chat(app, limited.value, model, { max_tokens: 80 }), 'rate_limit_exceeded', [1, 60]);
  });

  it('a project rate limit set with PATCH /api/projects is shared by every token of the project', async () => {
    const { app } = first(d);
    const project = await limitedProject(d, { rateLimit: { rpm: 3 } });
    const projectModel = await fakeModel(d, fake(), {}, project.key);
    const [a, b] = [await token(d, { projectId: project.key }), await token(d, { projectId: project.key })];
    await awayFromMinuteEnd();
    expect((await chat(app, a.value, projectModel)).statusCode).toBe(200);
    expect((await chat(app, b.value, projectModel)).statusCode).toBe(200);
    expect((await chat(app, a.value, projectModel)).statusCode).toBe(200);
    const before = fake().requests.length;
    const refused = await chat(app, b.value, projectModel);
    expectRefused(refused, 'rate_limit_exceeded', [1, 60]);
    expect(refused.json().error.message).toMatch(/project/i);
    expect(fake().requests.length).toBe(before);
    // Tokens of other projects are not affected.
    const outsider = await token(d, {});
    expect((await chat(app, outsider.value, model)).statusCode).toBe(200);
  });

  it('refuses on the tighter of a token limit and its project limit', async () => {
    const { app } = first(d);
    const project = await limitedProject(d, { rateLimit: { rpm: 5 } });
    const projectModel = await fakeModel(d, fake(), {}, project.key);
    const tight = await token(d, { projectId: project.key, rateLimit: { rpm: 1 } });
    const loose = await token(d, { projectId: project.key });
    await awayFromMinuteEnd();
    expect((await chat(app, tight.value, projectModel)).statusCode).toBe(200);
    const byToken = await chat(app, tight.value, projectModel);
    expectRefused(byToken, 'rate_limit_exceeded', [1, 60]);
    expect(byToken.json().error.message).toMatch(/token/i);
    // The token's refusal reserved nothing on the project: four more calls fit in its five.
    for (let i = 0; i < 4; i++) expect((await chat(app, loose.value, projectModel)).statusCode).toBe(200);
    expectRefused(await chat(app, loose.value, projectModel), 'rate_limit_exceeded', [1, 60]);
  });

  it('rejects a rate limit that limits nothing', async () => {
    const res = await first(d).app.inject({
      method: 'POST',
      url: '/api/tokens',
      headers: { authorization: `Bearer ${d.session}` },
      payload: { name: 'x', projectId: 'default', role: 'member', rateLimit: {} },
    });
    expect(res.statusCode).toBe(400);
  });
  // Regression: the window's key held the project's limit version, so any PATCH of its limits started a new minute.
  it('a PATCH of the project limits does not start the minute over', async () => {
    const { app } = first(d);
    const project = await limitedProject(d, { rateLimit: { rpm: 2 } });
    const projectModel = await fakeModel(d, fake(), {}, project.key);
    const t = await token(d, { projectId: project.key });
    await awayFromMinuteEnd();
    for (let i = 0; i < 2; i++) expect((await chat(app, t.value, projectModel)).statusCode).toBe(200);
    expectRefused(await chat(app, t.value, projectModel), 'rate_limit_exceeded', [1, 60]);
    const patched = await call(app, d.session, { method: 'PATCH', url: `/api/projects/${project.key}`, payload: { budget: { maxTokens: 1_000_000, period: 'total' } } });
    expect(patched.statusCode).toBe(200);
    expectRefused(await chat(app, t.value, projectModel), 'rate_limit_exceeded', [1, 60]);
  });

  // Regression: the evaluate endpoint's judge calls were charged afterwards but never admitted.
  it('POST /guardrails/evaluate with a judge model is refused once the caller is over its rate limit, without a model call', async () => {
    const { app } = first(d);
    const limited = await token(d, { rateLimit: { rpm: 1 } });
    const key = `judge-${Date.now().toString(36)}`;
    const created = await call(app, d.session, { method: 'POST', url: '/api/guardrails', payload: { key, name: key, type: 'custom_prompt', config: { rules: 'Never mention prices.' }, modelKey: model } });
    expect(created.statusCode, created.body).toBe(201);
    await awayFromMinuteEnd();
    expect((await chat(app, limited.value, model)).statusCode).toBe(200);
    const before = fake().requests.length;
    const refused = await call(app, limited.value, { method: 'POST', url: '/api/client/v1/guardrails/evaluate', payload: { guardrail_key: key, text: 'What does it cost?' } });
    expectRefused(refused, 'rate_limit_exceeded', [1, 60]);
    expect(fake().requests.length).toBe(before);
  });

  it('limits beyond what counters hold exactly are refused (400)', async () => {
    const { app } = first(d);
    const create = (limits: Record<string, unknown>) => call(app, d.session, { method: 'POST', url: '/api/tokens', payload: { name: 'huge', projectId: 'default', role: 'member', ...limits } });
    expect((await create({ rateLimit: { rpm: 1e9, tpm: 1e15 }, budget: { maxTokens: 1e15, maxCostUsd: 9e6, period: 'day' } })).statusCode).toBe(201);
    for (const limits of [{ rateLimit: { rpm: 1e12 } }, { rateLimit: { tpm: 1e19 } }, { budget: { maxTokens: 1e19, period: 'day' } }, { budget: { maxCostUsd: 1e10, period: 'total' } }]) {
      const res = await create(limits);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error.message).toMatch(/maximum|must be <=/i);
    }
  });
});
