import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { usageRowsOf } from '../helpers/inference.js';
import { createAgent, publish, respond } from './support.js';

/** What a connected agent's call is billed when the agent reports too little, or never answers. */
describe('connected agents: metering', () => {
  let t: TestApp;
  let fake: FakeUpstream;

  beforeAll(async () => {
    t = await createTestApp({ backend: 'sqlite', noWorkers: true, env: { WAYGATE_UPSTREAM_RETRIES: '0', WAYGATE_UPSTREAM_TIMEOUT_MS: '300', WAYGATE_AGENT_ALLOW_PRIVATE_URLS: 'true' } });
    fake = await startFakeOpenAi();
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  async function connectedAgent(): Promise<string> {
    const agent = await createAgent(t, { name: 'Remote', config: { connection: { protocol: 'openai-chat', url: fake.baseUrl, model: 'remote' } } });
    await publish(t, agent.key);
    return agent.key;
  }

  async function eventOf(key: string) {
    await t.ctx.services.usage.flush();
    const rows = await usageRowsOf(t, `agent:${key}`);
    expect(rows).toHaveLength(1);
    return rows[0]!;
  }

  // Regression: an answer reporting its input but no output was billed 0 output tokens.
  it('an answer that reports no output count has its output counted', async () => {
    const key = await connectedAgent();
    const content = 'a remote answer of a good many words that are output';
    fake.queue({ body: { id: 'c', object: 'chat.completion', created: 1, model: 'remote', choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage: { prompt_tokens: 4 } } });
    expect((await respond(t, { model: key, input: 'hello' })).statusCode).toBe(200);
    expect((await eventOf(key)).output_tokens).toBeGreaterThan(5);
  });

  // Regression: a call abandoned after the agent had it cost nothing, unlike a model call.
  it('a call that timed out after the agent had the request is billed its input', async () => {
    const key = await connectedAgent();
    fake.queue({ hang: true });
    const res = await respond(t, { model: key, input: 'are you there?' });
    expect(res.statusCode, res.body).toBe(504);
    const event = await eventOf(key);
    expect(event).toMatchObject({ status: 504, output_tokens: 0 });
    expect(event.input_tokens).toBeGreaterThan(0);
  });
});
