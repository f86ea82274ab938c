import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, call, createTestApp, type TestApp } from '../helpers/app.js';
import { expectClientError, otherTenant } from '../helpers/bad-input.js';
import { A2A, exposedAgent, expectRpcError, METHODS, rpc, rpcRaw, send, userMessage, type Version } from '../a2a/support.js';

describe.each(BACKENDS)('A2A: bad input on %s', (backend) => {
  let t: TestApp;
  let key: string;
  const card = (agentKey: string, token: string = t.ownerToken) => call(t.app, token, { method: 'GET', url: `${A2A}/${agentKey}/.well-known/agent-card.json` });
  const sendBody = { jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: userMessage('0.3', 'hi') } };

  beforeAll(async () => {
    t = await createTestApp({ backend, noWorkers: true });
    key = await exposedAgent(t);
  });
  afterAll(async () => t?.close());

  it("another tenant's exposed agent is a 404 like a missing one, on the card and the JSON-RPC endpoint", async () => {
    const token = (await otherTenant(t)).token;
    for (const target of [key, 'missing-agent']) {
      expectClientError(await card(target, token), 404, `Agent "${target}" not found`);
      expectClientError(await rpcRaw(t, target, sendBody, { token }), 404, `Agent "${target}" not found`);
      // Before any JSON-RPC: a broken body changes nothing.
      expectClientError(await rpcRaw(t, target, '{broken', { token }), 404, `Agent "${target}" not found`);
    }
    expect((await card(key)).statusCode).toBe(200);
  });

  it.each(['0.3', '1.0'] as Version[])("%s: another tenant's task and context ids are unknown to its own agent", async (version) => {
    const mine = await send(t, key, version, 'mine');
    const token = (await otherTenant(t)).token;
    const theirs = await exposedAgent(t, { modelKey: 'local-chat' }, {}, token);
    const m = METHODS[version];
    expectRpcError(await rpc(t, theirs, version, m.get, { id: mine.id }, 1, token), -32001);
    expectRpcError(await rpc(t, theirs, version, m.send, { message: userMessage(version, 'steal', { contextId: mine.contextId }) }, 1, token), -32602);
  });

  // Fastify's router refuses path parameters over 100 characters with 414 before the schema's 200 applies.
  it('an agent key over 200 characters is a 4xx {error} on both routes, not JSON-RPC', async () => {
    const long = 'a'.repeat(201);
    const cardRes = await card(long);
    expect([400, 404, 414], cardRes.body).toContain(cardRes.statusCode);
    expectClientError(cardRes, cardRes.statusCode);
    const rpcRes = await rpcRaw(t, long, sendBody);
    expect([400, 404, 414], rpcRes.body).toContain(rpcRes.statusCode);
    expectClientError(rpcRes, rpcRes.statusCode);
  });
});
