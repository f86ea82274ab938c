import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, call, createTestApp, createToken, type TestApp } from '../helpers/app.js';
import { AGENTS, agentsCall, createAgent, otherProject, publish } from '../agents/support.js';
import { A2A, exposedAgent, METHODS, rpc, rpcRaw, userMessage } from './support.js';

/** Interface 4.1 rule 1 and the Agent Card: exposure is opt-in, a hidden agent is a missing one, inactive is 400. */
describe.each(BACKENDS)('A2A exposure and Agent Card on %s', (backend) => {
  let t: TestApp;
  const card = (key: string, headers: Record<string, string> = {}, token: string | null = t.ownerToken) =>
    call(t.app, token, { method: 'GET', url: `${A2A}/${key}/.well-known/agent-card.json`, headers });
  const sendBody = { jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: userMessage('0.3', 'hi') } };

  beforeAll(async () => {
    t = await createTestApp({ backend, noWorkers: true, env: { WAYGATE_AGENT_ALLOW_PRIVATE_URLS: 'true' } });
  });
  afterAll(async () => t?.close());

  it('serves the 0.3 card without A2A-Version: url from the request host, JSONRPC, both interfaces, bearer security', async () => {
    const key = await exposedAgent(t, { modelKey: 'local-chat' }, { name: 'Travel Desk', description: 'Books trips' });
    const res = await card(key, { host: 'agents.example.test:8443' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.headers.vary).toMatch(/A2A-Version/i);
    const url = `http://agents.example.test:8443${A2A}/${key}`;
    expect(res.json()).toEqual({
      name: 'Travel Desk',
      description: 'Books trips',
      version: '1',
      protocolVersion: '0.3.0',
      url,
      preferredTransport: 'JSONRPC',
      additionalInterfaces: [{ url, transport: 'JSONRPC' }],
      supportedInterfaces: [
        { url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
        { url, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
      ],
      capabilities: { streaming: false, pushNotifications: false },
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: expect.stringContaining('Bearer') } },
      security: [{ bearer: [] }],
      defaultInputModes: ['text/plain'],
      defaultOutputModes: ['text/plain'],
      skills: [{ id: key, name: 'Travel Desk', description: 'Books trips', tags: expect.arrayContaining(['agent']), inputModes: ['text/plain'], outputModes: ['text/plain'] }],
      supportsAuthenticatedExtendedCard: false,
    });
  });

  it.each(['1.0', '1', '1.0.0', ' 1.0 '])('serves the 1.0 card (proto JSON, no 0.3 fields) for A2A-Version "%s"', async (version) => {
    const key = await exposedAgent(t);
    const res = await card(key, { 'a2a-version': version });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    const url = `http://localhost:80${A2A}/${key}`;
    expect(body).toMatchObject({
      name: 'A2A agent',
      version: '1',
      supportedInterfaces: [
        { url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
        { url, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
      ],
      capabilities: { streaming: false, pushNotifications: false, extendedAgentCard: false },
      securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: 'Bearer' } } },
      securityRequirements: [{ schemes: { bearer: { list: [] } } }],
      defaultInputModes: ['text/plain'],
      defaultOutputModes: ['text/plain'],
    });
    expect(body.skills).toHaveLength(1);
    for (const legacy of ['url', 'protocolVersion', 'preferredTransport', 'additionalInterfaces', 'security', 'supportsAuthenticatedExtendedCard']) expect(body).not.toHaveProperty(legacy);
  });

  it('the card version follows publishing; an exposed agent never published shows version 0 and cannot run (-32602)', async () => {
    const key = await exposedAgent(t);
    await publish(t, key);
    expect((await card(key)).json().version).toBe('2');
    const draft = await createAgent(t, { name: 'Unpublished', config: { modelKey: 'local-chat' }, metadata: { a2a: { enabled: true } } });
    expect((await card(draft.key)).json().version).toBe('0');
    const res = await rpc(t, draft.key, '0.3', METHODS['0.3'].send, { message: userMessage('0.3', 'hi') });
    expect(res.statusCode).toBe(200);
    expect(res.json().error).toMatchObject({ code: -32602, message: expect.stringMatching(/no published version/), data: { status: 400 } });
  });

  it('a non-exposed agent answers exactly like a missing one (404), on both routes', async () => {
    const hidden = [
      await exposedAgent(t, { modelKey: 'local-chat' }, { metadata: {} }),
      await exposedAgent(t, { modelKey: 'local-chat' }, { metadata: { a2a: { enabled: false } } }),
      await exposedAgent(t, { modelKey: 'local-chat' }, { metadata: { a2a: { enabled: 'true' } } }),
      await exposedAgent(t, { modelKey: 'local-chat' }, { metadata: { a2a: true } }),
    ];
    for (const key of hidden) {
      const answers = [await card(key), await rpcRaw(t, key, sendBody), await rpcRaw(t, key, '{broken')];
      // Deleting the agent makes it missing: the answers stay the same, byte for byte.
      expect((await agentsCall(t, { method: 'DELETE', url: `${AGENTS}/${key}` })).statusCode).toBe(200);
      const missing = [await card(key), await rpcRaw(t, key, sendBody), await rpcRaw(t, key, '{broken')];
      for (const [i, res] of answers.entries()) {
        expect(res.statusCode, res.body).toBe(404);
        expect(res.json()).toEqual({ error: { message: `Agent "${key}" not found`, type: 'not_found_error', code: 'not_found' } });
        expect(res.body).toBe(missing[i]!.body);
        expect(missing[i]!.statusCode).toBe(404);
      }
    }
  });

  it("another project's exposed agent is a 404 like a missing one; so is an agent exposed and then hidden", async () => {
    const key = await exposedAgent(t);
    const otherToken = (await otherProject(t, 'A2A elsewhere')).token;
    expect((await card(key, {}, otherToken)).statusCode).toBe(404);
    const foreign = await rpcRaw(t, key, sendBody, { token: otherToken });
    expect(foreign.statusCode).toBe(404);
    expect(foreign.json().error.message).toBe(`Agent "${key}" not found`);
    const theirs = await exposedAgent(t, { modelKey: 'local-chat' }, {}, otherToken);
    expect((await card(theirs)).statusCode).toBe(404);
    expect((await card(theirs, {}, otherToken)).statusCode).toBe(200);

    await agentsCall(t, { method: 'PATCH', url: `${AGENTS}/${key}`, payload: { metadata: { a2a: { enabled: false } } } });
    expect((await card(key)).statusCode).toBe(404);
    expect((await rpcRaw(t, key, sendBody)).statusCode).toBe(404);
  });

  it.each(['inactive', 'draft'])('a %s agent is refused with HTTP 400 before dispatch (whatever the body); its card is still served', async (status) => {
    const key = await exposedAgent(t);
    await agentsCall(t, { method: 'PATCH', url: `${AGENTS}/${key}`, payload: { status } });
    for (const body of [sendBody, '{broken', { jsonrpc: '2.0', id: 1, method: 'nope' }]) {
      const res = await rpcRaw(t, key, body);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error).toMatchObject({ type: 'invalid_request_error', message: `Agent "${key}" is ${status}; only active agents answer` });
    }
    expect((await rpcRaw(t, key, sendBody, { version: '1.0' })).statusCode).toBe(400);
    expect((await card(key)).statusCode).toBe(200);
  });

  it('needs an API token (401 in the error envelope, not JSON-RPC) and read permission on agents (403); sending a message needs read on models', async () => {
    const key = await exposedAgent(t);
    for (const res of [await card(key, {}, null), await rpcRaw(t, key, sendBody, { token: null }), await rpcRaw(t, key, sendBody, { token: 'wgt_not-a-token' })]) {
      expect(res.statusCode).toBe(401);
      expect(res.json().error.type).toBe('authentication_error');
      expect(res.json().jsonrpc).toBeUndefined();
    }
    const noAgents = await createToken(t, { role: 'member', permissions: { agents: 'none', models: 'read' } });
    expect((await card(key, {}, noAgents.value)).statusCode).toBe(403);
    expect((await rpcRaw(t, key, sendBody, { token: noAgents.value })).statusCode).toBe(403);
    // The agent calls a model: a token that may not call it directly may not call it through A2A either.
    const noModels = await createToken(t, { role: 'member', permissions: { agents: 'read', models: 'none' } });
    expect((await card(key, {}, noModels.value)).statusCode).toBe(200);
    // Refused inside the run, as a budget refusal is: a JSON-RPC error.
    const refused = await rpcRaw(t, key, sendBody, { token: noModels.value });
    expect(refused.statusCode).toBe(200);
    expect(refused.json()).toMatchObject({ jsonrpc: '2.0', id: 1, error: { message: expect.stringMatching(/models service, which running an agent needs/) } });
    const viewer = await createToken(t, { role: 'viewer' });
    expect((await card(key, {}, viewer.value)).statusCode).toBe(200);
    const ran = await rpcRaw(t, key, sendBody, { token: viewer.value });
    expect(ran.statusCode).toBe(200);
    expect(ran.json().result.status.state).toBe('completed');
    // Reading a task calls no model: that needs only read on agents.
    const read = await rpcRaw(t, key, { jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { id: ran.json().result.id } }, { token: noModels.value });
    expect(read.statusCode, read.body).toBe(200);
    expect(read.json().result.id).toBe(ran.json().result.id);
  });
  it('an unknown agent key is a 404 {error} on both routes; a key too long for a key a 4xx {error}, not JSON-RPC', async () => {
    for (const res of [await card('no-such-agent'), await rpcRaw(t, 'no-such-agent', sendBody)]) {
      expect(res.statusCode, res.body).toBe(404);
      expect(res.json()).toEqual({ error: { message: 'Agent "no-such-agent" not found', type: 'not_found_error', code: 'not_found' } });
    }
    const long = 'k'.repeat(201);
    for (const res of [await card(long), await rpcRaw(t, long, sendBody)]) {
      expect(res.statusCode, res.body).toBeGreaterThanOrEqual(400);
      expect(res.statusCode).toBeLessThan(500);
      expect(res.json().error).toMatchObject({ type: 'invalid_request_error', message: expect.any(String) });
      expect(res.json().jsonrpc).toBeUndefined();
    }
  });
});
