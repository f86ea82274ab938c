import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { BACKENDS, call, createTestApp, createToken, type TestApp } from '../helpers/app.js';
import { expectClientError, otherTenant } from '../helpers/bad-input.js';
import { AGENTS, agentsCall, createAgent, publish, respond } from '../agents/support.js';

describe.each(BACKENDS)('agents: bad input on %s', (backend) => {
  let t: TestApp;
  let key: string;

  beforeAll(async () => {
    t = await createTestApp({ backend, noWorkers: true });
    key = (await createAgent(t, { name: 'Mine', description: 'kept', config: { modelKey: 'local-chat', systemPrompt: 'original' } })).key;
    await publish(t, key);
  });
  afterAll(async () => t?.close());

  it.each([
    ['a name that is not a string', { name: 42 }, /name/],
    ['an empty name', { name: '' }, /name/],
    ['a description that is not a string', { name: 'x', description: 5 }, /description/],
    ['a status that is not a string', { name: 'x', status: 1 }, /status/],
    ['config that is not an object', { name: 'x', config: 'native' }, /config/],
    ['an unknown kind', { name: 'x', config: { kind: 'robot' } }, /config\.kind/],
    ['a modelKey that is not a string', { name: 'x', config: { modelKey: 5 } }, /config\.modelKey/],
    ['a temperature that is not a number', { name: 'x', config: { temperature: 'hot' } }, /config\.temperature/],
    ['maxTokens that is not an integer', { name: 'x', config: { maxTokens: 1.5 } }, /config\.maxTokens/],
    ['maxTokens of 0', { name: 'x', config: { maxTokens: 0 } }, /config\.maxTokens/],
    ['a connection that is not an object', { name: 'x', config: { connection: 'http://example.com' } }, /config\.connection/],
    ['a connection without url', { name: 'x', config: { connection: { protocol: 'a2a' } } }, /config\.connection\.url/],
    ['an unknown protocol', { name: 'x', config: { connection: { protocol: 'grpc', url: 'https://example.com' } } }, /config\.connection\.protocol/],
    ['header values that are not strings', { name: 'x', config: { connection: { protocol: 'a2a', url: 'https://example.com', headers: { 'X-A': 1 } } } }, /config\.connection\.headers/],
    ['metadata that is an array', { name: 'x', metadata: ['a2a'] }, /metadata/],
    ['metadata that is a string', { name: 'x', metadata: 'a2a' }, /metadata/],
    ['an unknown top-level field', { name: 'x', key: 'chosen' }, /key is not a known field/],
  ])('POST /agents: 400 for %s', async (_case, payload, message) => {
    expectClientError(await agentsCall(t, { method: 'POST', url: AGENTS, payload }), 400, message);
  });

  it('POST /agents: 400 for a body that is not a JSON object', async () => {
    for (const payload of ['[]', '"agent"', '{"name":']) {
      expectClientError(await agentsCall(t, { method: 'POST', url: AGENTS, payload, headers: { 'content-type': 'application/json' } }), 400);
    }
  });

  it.each([
    ['a name that is not a string', { name: ['x'] }, /name/],
    ['a status that is not one of the statuses', { status: 'paused' }, /status/],
    ['config that is an array', { config: [] }, /config/],
    ['a topP above 1', { config: { topP: 1.5 } }, /config\.topP/],
    ['a guardrail key that is not a string', { config: { inputGuardrailKey: 7 } }, /config\.inputGuardrailKey/],
    ['an unknown guardrail', { config: { outputGuardrailKey: 'nope' } }, /config\.outputGuardrailKey: guardrail "nope" does not exist/],
    ['an unknown model', { config: { modelKey: 'nope' } }, /config\.modelKey: model "nope" does not exist/],
    ['a key (it cannot change)', { key: 'renamed' }, /key is not a known field/],
  ])('PATCH /agents/{key}: 400 for %s, and nothing changes', async (_case, payload, message) => {
    expectClientError(await agentsCall(t, { method: 'PATCH', url: `${AGENTS}/${key}`, payload }), 400, message);
    const agent = (await agentsCall(t, { method: 'GET', url: `${AGENTS}/${key}` })).json().agent;
    expect(agent).toMatchObject({ key, name: 'Mine', description: 'kept', status: 'active', config: { modelKey: 'local-chat', systemPrompt: 'original', inputGuardrailKey: null, outputGuardrailKey: null } });
  });

  it.each([
    ['a changelog that is not a string', { changelog: 5 }, /changelog/],
    ['an unknown field', { version: 7 }, /version is not a known field/],
  ])('POST /agents/{key}/publish: 400 for %s, and no version is made', async (_case, payload, message) => {
    expectClientError(await agentsCall(t, { method: 'POST', url: `${AGENTS}/${key}/publish`, payload }), 400, message);
    expect((await agentsCall(t, { method: 'GET', url: `${AGENTS}/${key}` })).json().agent.publishedVersion).toBe(1);
  });

  it.each([
    ['no model', { model: undefined, input: 'hi' }, /model is required/],
    ['a model that is not a string', { model: 5, input: 'hi' }, /model/],
    ['an input that is not a text or items', { input: 5 }, /input/],
    ['an input item with an unknown role', { input: [{ role: 'tool', content: 'x' }] }, /input/],
    ['an input item whose content is not text', { input: [{ role: 'user', content: 5 }] }, /input/],
    ['a version that is not an integer', { input: 'hi', version: 'latest' }, /version/],
    ['a version of 0', { input: 'hi', version: 0 }, /version/],
    ['a previous_response_id that is not a string', { input: 'hi', previous_response_id: 5 }, /previous_response_id/],
    ['stream that is not a boolean', { input: 'hi', stream: 'yes' }, /stream/],
  ])('POST /agents/responses: 400 for %s', async (_case, body, message) => {
    // `model: undefined` is left out of the JSON: the case without a model.
    expectClientError(await respond(t, 'model' in body ? body : { model: key, ...body }), 400, message);
  });

  it('POST /agents/responses: an unknown agent is a 404', async () => {
    expectClientError(await respond(t, { model: 'no-such-agent', input: 'hi' }), 404, /Agent "no-such-agent" not found/);
  });

  it.each(['project', 'tenant'])("another %s's agent is a 404 like a missing one on every agent route, and stays unchanged", async (scope) => {
    const token =
      scope === 'project'
        ? (await createToken(t, { role: 'owner', projectId: (await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: `Other ${randomBase32(4)}` } })).json().project.id })).value
        : (await otherTenant(t)).token;
    for (const target of [key, 'missing-agent']) {
      const requests = [
        { method: 'GET' as const, url: `${AGENTS}/${target}` },
        { method: 'PATCH' as const, url: `${AGENTS}/${target}`, payload: { name: 'Stolen', config: { systemPrompt: 'stolen' } } },
        { method: 'POST' as const, url: `${AGENTS}/${target}/publish`, payload: { changelog: 'stolen' } },
        { method: 'DELETE' as const, url: `${AGENTS}/${target}` },
      ];
      for (const options of requests) {
        const res = await agentsCall(t, options, token);
        expectClientError(res, 404);
        expect(res.json().error, `${options.method} ${options.url}`).toEqual({ message: `Agent "${target}" not found`, type: 'not_found_error', code: 'not_found' });
      }
      const run = await respond(t, { model: target, input: 'hi' }, token);
      expectClientError(run, 404);
      expect(run.json().error.message).toBe(`Agent "${target}" not found`);
    }
    expect((await agentsCall(t, { method: 'GET', url: AGENTS }, token)).json().agents).toEqual([]);
    const mine = (await agentsCall(t, { method: 'GET', url: `${AGENTS}/${key}` })).json().agent;
    expect(mine).toMatchObject({ key, name: 'Mine', publishedVersion: 1, config: { systemPrompt: 'original' } });
  });

  it('a conversation id of another tenant is a 404 as previous_response_id', async () => {
    const started = await respond(t, { model: key, input: 'mine' });
    expect(started.statusCode, started.body).toBe(200);
    const token = (await otherTenant(t)).token;
    const theirs = (await createAgent(t, { name: 'Theirs', config: { modelKey: 'local-chat' } }, token)).key;
    await publish(t, theirs, undefined, token);
    const res = await respond(t, { model: theirs, input: 'steal', previous_response_id: started.json().id }, token);
    expectClientError(res, 404);
  });
});
