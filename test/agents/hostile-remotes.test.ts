import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { registerFakeModel } from '../helpers/inference.js';
import { createAgent, publish, respond } from './support.js';

/**
 * Agents whose model or remote answers break the expected shapes (found by fuzzing): a clean 502 and nothing stored,
 * never a 500 or an empty reply stored as a success.
 */
describe('agents with hostile remotes and models', () => {
  let t: TestApp;
  let fake: FakeUpstream;
  let a2a: http.Server;
  let a2aAnswer: unknown = null;
  let model: string;
  const errorLogs = () => t.logs.filter((line) => (JSON.parse(line) as { level: number }).level >= 50);
  const text = (res: { json(): { output: { content: { text: string }[] }[] } }) => res.json().output[0]!.content[0]!.text;

  beforeAll(async () => {
    t = await createTestApp({ backend: 'sqlite', noWorkers: true, env: { WAYGATE_UPSTREAM_RETRIES: '0', WAYGATE_AGENT_ALLOW_PRIVATE_URLS: 'true' } });
    fake = await startFakeOpenAi();
    model = await registerFakeModel(t, fake, { capabilities: ['chat'] });
    a2a = http.createServer((req, res) => {
      req.resume().on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(a2aAnswer));
      });
    });
    await new Promise<void>((resolve) => a2a.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
    await new Promise((resolve) => a2a?.close(resolve));
  });
  beforeEach(() => {
    t.logs.length = 0;
  });

  async function agentWith(config: Record<string, unknown>): Promise<string> {
    const agent = await createAgent(t, { name: 'Hostile', config });
    await publish(t, agent.key);
    return agent.key;
  }

  async function storedMessages(): Promise<number> {
    return Number((await t.ctx.database.db.selectFrom('agent_messages').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
  }

  // Regression: `artifacts.flatMap is not a function` (a 500 and an error log) when artifacts was not a list.
  it.each([
    ['an object', {}],
    ['a list holding null', [null]],
  ])("an A2A task whose artifacts are %s is the remote's failure (502)", async (_what, artifacts) => {
    const key = await agentWith({ connection: { protocol: 'a2a', url: `http://127.0.0.1:${(a2a.address() as AddressInfo).port}/a2a` } });
    a2aAnswer = { jsonrpc: '2.0', id: 1, result: { kind: 'task', id: 't', contextId: 'c', status: { state: 'completed' }, artifacts } };
    const res = await respond(t, { model: key, input: 'hi' });
    expect(res.statusCode, res.body).toBe(502);
    expect(errorLogs()).toEqual([]);
  });

  // Regression: these were stored and answered as a completed, empty reply.
  it.each([
    ['a failed response', { status: 'failed', error: { message: 'The model crashed' }, output: [] }, /The model crashed/],
    ['an incomplete response', { status: 'incomplete', output: [{ type: 'reasoning', summary: [] }] }, /incomplete/],
    ['no message at all', { status: 'completed', output: [] }, /without text/],
    ['a null output item', { status: 'completed', output: [null] }, /without text/],
  ])("an openai-responses remote's %s fails the turn (502), and nothing is stored", async (_what, body, message) => {
    const key = await agentWith({ connection: { protocol: 'openai-responses', url: fake.baseUrl, model: 'remote' } });
    const before = await storedMessages();
    fake.queue({ body: { id: 'resp_x', object: 'response', ...body } });
    const res = await respond(t, { model: key, input: 'hi' });
    expect(res.statusCode, res.body).toBe(502);
    expect(res.json().error.message).toMatch(message);
    expect(await storedMessages()).toBe(before);
  });

  it("an openai-responses remote's refusal is its reply", async () => {
    const key = await agentWith({ connection: { protocol: 'openai-responses', url: fake.baseUrl, model: 'remote' } });
    fake.queue({ body: { id: 'resp_x', object: 'response', status: 'completed', output: [{ type: 'message', role: 'assistant', content: [{ type: 'refusal', refusal: 'I cannot help with that.' }] }] } });
    const res = await respond(t, { model: key, input: 'hi' });
    expect(res.statusCode, res.body).toBe(200);
    expect(text(res)).toBe('I cannot help with that.');
  });

  it("a native agent's model answering without a message text fails the turn (502), and nothing is stored", async () => {
    const key = await agentWith({ modelKey: model });
    const before = await storedMessages();
    for (const choices of [[], 'abc', [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [] }, finish_reason: 'tool_calls' }]]) {
      fake.queue({ body: { id: 'c', object: 'chat.completion', created: 1, model: 'm', choices, usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } } });
      const res = await respond(t, { model: key, input: 'hi' });
      expect(res.statusCode, JSON.stringify(choices)).toBe(502);
    }
    expect(await storedMessages()).toBe(before);
  });

  // Regression: the reply kept the surrogate, while the database stored other characters in its place.
  it('a lone surrogate in a reply is answered as it is stored: U+FFFD', async () => {
    const key = await agentWith({ modelKey: model });
    fake.queue({ body: { id: 'c', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'a\ud800b' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } } });
    const res = await respond(t, { model: key, input: 'hi' });
    expect(res.statusCode, res.body).toBe(200);
    expect(text(res)).toBe('a\uFFFDb');
    const stored = await t.ctx.database.db.selectFrom('agent_messages').select('content').where('role', '=', 'assistant').execute();
    expect(stored.map((m) => m.content)).toContain('a\uFFFDb');
  });
});
