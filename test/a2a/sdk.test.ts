import { randomUUID } from 'node:crypto';
import { Role, TaskState, type AgentCard, type Message, type Task } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, type Client } from '@a2a-js/sdk/client';
import { parseLegacyAgentCard } from '@a2a-js/sdk/compat/v0_3/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, createTestApp, type TestApp } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { registerFakeModel } from '../helpers/inference.js';
import { A2A, exposedAgent } from './support.js';

/**
 * Issue 6 "Done when": the official @a2a-js/sdk 1.3 client, in its default 1.0 mode and in its 0.3 compatibility
 * mode, discovers an exposed agent's card with a bearer token, holds a conversation through contextId, reads the
 * task back and is refused a cancel with -32004.
 */

interface SentRequest {
  url: string;
  method: string;
  headers: Headers;
  body: Record<string, unknown> | null;
}

/** fetch with the API token, recording what the SDK sends. */
function recordingFetch(token: string, sent: SentRequest[]): typeof fetch {
  return async (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${token}`);
    const url = input instanceof Request ? input.url : String(input);
    sent.push({ url, method: init?.method ?? 'GET', headers, body: typeof init?.body === 'string' ? (JSON.parse(init.body) as Record<string, unknown>) : null });
    return fetch(input, { ...init, headers });
  };
}

function userMessage(text: string, contextId = ''): Message {
  return {
    messageId: randomUUID(),
    contextId,
    taskId: '',
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function asTask(result: Task | Message): Task {
  expect('status' in result, 'the answer is a task').toBe(true);
  return result as Task;
}

function artifactText(task: Task): string {
  const content = task.artifacts[0]?.parts[0]?.content;
  return content?.$case === 'text' ? content.value : '';
}

describe.each(BACKENDS)('@a2a-js/sdk client against an exposed agent on %s', (backend) => {
  let t: TestApp;
  let fake: FakeUpstream;
  let origin: string;
  let model: string;

  beforeAll(async () => {
    fake = await startFakeOpenAi();
    t = await createTestApp({ backend, noWorkers: true, env: { WAYGATE_AGENT_ALLOW_PRIVATE_URLS: 'true' } });
    origin = await t.app.listen({ port: 0, host: '127.0.0.1' });
    model = await registerFakeModel(t, fake, { capabilities: ['chat'] });
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  /** Sends, continues through contextId, reads the task back and tries to cancel: the same story in both modes. */
  async function conversation(client: Client, key: string) {
    fake.queue({ reply: 'Hi! How can I help?' }, { reply: 'Paris.' });
    const first = asTask(await client.sendMessage({ tenant: '', message: userMessage('Hello'), configuration: undefined, metadata: undefined }));
    expect(first.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(first.contextId).toMatch(/^conv_[a-z2-7]{24}$/);
    expect(first.id).toBe(`task_${first.contextId.slice(5)}_1`);
    expect(artifactText(first)).toBe('Hi! How can I help?');
    expect(first.history.map((m) => [m.role, m.parts[0]?.content?.value])).toEqual([
      [Role.ROLE_USER, 'Hello'],
      [Role.ROLE_AGENT, 'Hi! How can I help?'],
    ]);

    const second = asTask(await client.sendMessage({ tenant: '', message: userMessage('Capital of France?', first.contextId), configuration: undefined, metadata: undefined }));
    expect(second.contextId).toBe(first.contextId);
    expect(second.id).toBe(`task_${first.contextId.slice(5)}_3`);
    expect(artifactText(second)).toBe('Paris.');
    expect(fake.requests.at(-1)!.body.messages).toEqual([
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Hello' },
      { role: 'assistant', content: 'Hi! How can I help?' },
      { role: 'user', content: 'Capital of France?' },
    ]);

    const again = await client.getTask({ tenant: '', id: first.id, historyLength: undefined });
    expect(again).toEqual(first);
    const short = await client.getTask({ tenant: '', id: second.id, historyLength: 1 });
    expect(short.history.map((m) => m.role)).toEqual([Role.ROLE_AGENT]);

    const cancel = await client.cancelTask({ tenant: '', id: second.id, metadata: undefined }).catch((err: unknown) => err);
    expect(cancel).toMatchObject({ envelopeCode: -32004 });
    const missing = await client.getTask({ tenant: '', id: `task_${'a'.repeat(24)}_1`, historyLength: undefined }).catch((err: unknown) => err);
    expect(missing).toMatchObject({ envelopeCode: -32001 });
    expect(key).toBeTruthy();
  }

  it('1.0 (default): the card through the resolver, SendMessage, contextId, GetTask, CancelTask -32004', async () => {
    const key = await exposedAgent(t, { modelKey: model, systemPrompt: 'You are terse.' });
    const sent: SentRequest[] = [];
    const fetchImpl = recordingFetch(t.ownerToken, sent);
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
        transports: [new JsonRpcTransportFactory({ fetchImpl })],
      }),
    );
    const client = await factory.createFromUrl(`${origin}${A2A}/${key}/`);
    expect(client.protocolVersion).toBe('1.0');
    const card = await client.getAgentCard();
    expect(card.name).toBe('A2A agent');
    expect(card.supportedInterfaces).toEqual([
      { url: `${origin}${A2A}/${key}`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
      { url: `${origin}${A2A}/${key}`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '0.3' },
    ]);
    expect(card.securitySchemes.bearer?.scheme).toEqual({ $case: 'httpAuthSecurityScheme', value: expect.objectContaining({ scheme: 'Bearer' }) });
    expect(card.securityRequirements).toEqual([{ schemes: { bearer: { list: [] } } }]);

    await conversation(client, key);
    expect(sent[0]).toMatchObject({ url: `${origin}${A2A}/${key}/.well-known/agent-card.json`, method: 'GET' });
    const calls = sent.slice(1);
    expect(calls.map((c) => c.body?.method)).toEqual(['SendMessage', 'SendMessage', 'GetTask', 'GetTask', 'CancelTask', 'GetTask']);
    expect(calls.every((c) => c.headers.get('a2a-version') === '1.0' && c.url === `${origin}${A2A}/${key}`)).toBe(true);
  });

  it('0.3 compatibility: the 0.3 card (no A2A-Version) through the legacy transport, message/send, tasks/get, tasks/cancel -32004', async () => {
    const key = await exposedAgent(t, { modelKey: model, systemPrompt: 'You are terse.' });
    const sent: SentRequest[] = [];
    const fetchImpl = recordingFetch(t.ownerToken, sent);
    // A 0.3 client asks for the card without A2A-Version and reads it with the 0.3 rules.
    const res = await fetchImpl(`${origin}${A2A}/${key}/.well-known/agent-card.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('vary')).toMatch(/A2A-Version/i);
    const raw = (await res.json()) as Record<string, unknown>;
    expect(raw).toMatchObject({ url: `${origin}${A2A}/${key}`, protocolVersion: '0.3.0', preferredTransport: 'JSONRPC', security: [{ bearer: [] }] });
    const card: AgentCard = parseLegacyAgentCard(raw as never);
    expect(card.supportedInterfaces.map((i) => i.protocolVersion)).toEqual(['0.3.0', '0.3']);
    expect(card.securitySchemes.bearer?.scheme).toEqual({ $case: 'httpAuthSecurityScheme', value: expect.objectContaining({ scheme: 'bearer' }) });

    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } }),
        transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
      }),
    );
    const client = await factory.createFromAgentCard(card);
    expect(client.protocolVersion).toBe('0.3');

    await conversation(client, key);
    const calls = sent.slice(1);
    expect(calls.map((c) => c.body?.method)).toEqual(['message/send', 'message/send', 'tasks/get', 'tasks/get', 'tasks/cancel', 'tasks/get']);
    expect(calls.every((c) => c.headers.get('a2a-version') === '0.3')).toBe(true);
    expect((calls[0]!.body!.params as { message: { kind: string } }).message.kind).toBe('message');
  });

  it('the resolver in compatibility mode still picks 1.0 from the card, and an unexposed agent has no card (404)', async () => {
    const key = await exposedAgent(t);
    const fetchImpl = recordingFetch(t.ownerToken, []);
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } }),
        transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
      }),
    );
    const client = await factory.createFromUrl(`${origin}${A2A}/${key}/`);
    expect(client.protocolVersion).toBe('1.0');
    const task = asTask(await client.sendMessage({ tenant: '', message: userMessage('ping'), configuration: undefined, metadata: undefined }));
    expect(artifactText(task)).toBe('Echo: ping');

    const hidden = await exposedAgent(t, { modelKey: 'local-chat' }, { metadata: {} });
    await expect(factory.createFromUrl(`${origin}${A2A}/${hidden}/`)).rejects.toThrow(/404/);
  });

  it("Waygate's own A2A connector (a connected agent) talks to an exposed Waygate agent and continues its context", async () => {
    const remote = await exposedAgent(t);
    const connected = await exposedAgent(t, { connection: { protocol: 'a2a', url: `${origin}${A2A}/${remote}`, apiKey: t.ownerToken } });
    const ask = (input: string, previous?: string) =>
      fetch(`${origin}/api/client/v1/agents/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${t.ownerToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: connected, input, ...(previous ? { previous_response_id: previous } : {}) }),
      }).then(async (res) => ({ status: res.status, body: (await res.json()) as { id: string; output: { content: { text: string }[] }[] } }));
    const first = await ask('ping');
    expect(first.status).toBe(200);
    expect(first.body.output[0]!.content[0]!.text).toBe('Echo: ping');
    const second = await ask('pong', first.body.id);
    expect(second.body.output[0]!.content[0]!.text).toBe('Echo: pong');
    // The remote side held both turns in one conversation (the connector sent back the contextId it was given).
    const conversations = await t.ctx.database.db
      .selectFrom('agent_conversations')
      .innerJoin('agents', 'agents.id', 'agent_conversations.agent_id')
      .select('agent_conversations.id')
      .where('agents.key', '=', remote)
      .execute();
    expect(conversations).toHaveLength(1);
  });
});
