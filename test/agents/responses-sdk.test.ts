import OpenAI, { BadRequestError, NotFoundError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, createTestApp, type TestApp } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { registerFakeModel } from '../helpers/inference.js';
import { createAgent, publish } from './support.js';

/**
 * Issue 6 "Done when": the official openai SDK's responses.create with baseURL .../api/client/v1/agents holds a
 * three-turn conversation whose full history reaches the upstream model.
 */
describe.each(BACKENDS)('openai SDK responses.create against an agent on %s', (backend) => {
  let t: TestApp;
  let fake: FakeUpstream;
  let client: OpenAI;

  beforeAll(async () => {
    fake = await startFakeOpenAi();
    t = await createTestApp({ backend, noWorkers: true, env: { WAYGATE_AGENT_ALLOW_PRIVATE_URLS: 'true' } });
    const origin = await t.app.listen({ port: 0, host: '127.0.0.1' });
    client = new OpenAI({ apiKey: t.ownerToken, baseURL: `${origin}/api/client/v1/agents`, maxRetries: 0, timeout: 10_000 });
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  it('holds a three-turn conversation; every turn sends the whole history to the model', async () => {
    const model = await registerFakeModel(t, fake, { capabilities: ['chat'] });
    const agent = await createAgent(t, { name: 'Support Bot', config: { modelKey: model, systemPrompt: 'You are terse.', temperature: 0.2, maxTokens: 200 } });
    await publish(t, agent.key);

    fake.queue({ reply: 'Hi! How can I help?' }, { reply: 'Paris.' }, { reply: 'About 2.1 million.' });
    const first = await client.responses.create({ model: agent.key, input: 'Hello' });
    expect(first).toMatchObject({ object: 'response', status: 'completed', model: agent.key, previous_response_id: null });
    expect(first.id).toMatch(/^resp_conv_[a-z2-7]{24}$/);
    expect(first.output_text).toBe('Hi! How can I help?');
    expect(first.output[0]).toMatchObject({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Hi! How can I help?', annotations: [] }] });
    expect(first.usage).toMatchObject({ input_tokens: 10, output_tokens: 5, total_tokens: 15 });

    const second = await client.responses.create({ model: agent.key, input: 'What is the capital of France?', previous_response_id: first.id });
    expect(second.id).toBe(first.id);
    expect(second.previous_response_id).toBe(first.id);
    expect(second.output_text).toBe('Paris.');

    const third = await client.responses.create({ model: agent.key, input: [{ role: 'user', content: 'And how many people live there?' }], previous_response_id: second.id });
    expect(third.output_text).toBe('About 2.1 million.');

    const sent = fake.requests.map((r) => r.body.messages);
    expect(sent[2]).toEqual([
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Hello' },
      { role: 'assistant', content: 'Hi! How can I help?' },
      { role: 'user', content: 'What is the capital of France?' },
      { role: 'assistant', content: 'Paris.' },
      { role: 'user', content: 'And how many people live there?' },
    ]);
    expect(fake.requests.every((r) => r.body.temperature === 0.2 && r.body.max_tokens === 200 && r.body.model === 'gpt-upstream')).toBe(true);
  });

  it('the SDK sees the documented errors: stream 400, unknown agent 404, never published 400', async () => {
    const draft = await createAgent(t, { name: 'Never Published', config: { modelKey: 'local-chat' } });
    const unpublished = await client.responses.create({ model: draft.key, input: 'hi' }).catch((err: unknown) => err);
    expect(unpublished).toBeInstanceOf(BadRequestError);
    expect((unpublished as BadRequestError).message).toMatch(/no published version/);
    const missing = await client.responses.create({ model: 'no-such-agent', input: 'hi' }).catch((err: unknown) => err);
    expect(missing).toBeInstanceOf(NotFoundError);
    await publish(t, draft.key);
    const streamed = await client.responses.create({ model: draft.key, input: 'hi', stream: true }).then(
      async (stream) => {
        for await (const _event of stream) break;
        return null;
      },
      (err: unknown) => err,
    );
    expect(streamed).toBeInstanceOf(BadRequestError);
  });
});
