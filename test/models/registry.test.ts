import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { BACKENDS, call, createTestApp, type TestApp } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { chatBody } from '../helpers/models.js';
import { holdTogether } from '../helpers/races.js';

/** The model registry through the dashboard API: create, list, patch, delete, built-ins. */

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const newKey = () => `m-${randomBase32(8).toLowerCase()}`;

describe.each(BACKENDS)('model registry CRUD on %s', (backend) => {
  let t: TestApp;
  let fake: FakeUpstream;
  beforeAll(async () => {
    t = await createTestApp({ backend });
    fake = await startFakeOpenAi();
    // Models may only name guardrails that exist, for a stage their target allows.
    for (const [key, type, target] of [['pii', 'pii', 'input'], ['toxicity', 'moderation', 'output'], ['a', 'pii', 'input'], ['b', 'pii', 'output'], ['c', 'pii', 'input']]) {
      const res = await call(t.app, t.adminSession, { method: 'POST', url: '/api/guardrails', payload: { key, type, target } });
      expect(res.statusCode, res.body).toBe(201);
    }
  });
  afterAll(async () => {
    await fake?.close();
    await t?.close();
  });

  const create = (payload: Record<string, unknown>) => call(t.app, t.adminSession, { method: 'POST', url: '/api/models', payload });
  const patch = (key: string, payload: Record<string, unknown>) => call(t.app, t.adminSession, { method: 'PATCH', url: `/api/models/${key}`, payload });
  const list = async () => (await call(t.app, t.adminSession, { method: 'GET', url: '/api/models' })).json().models as Record<string, unknown>[];
  const chat = (model: string) => call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody(model) });
  /** Chats once through the model and returns the headers the fake upstream received. */
  async function upstreamHeaders(model: string) {
    const before = fake.requests.length;
    const res = await chat(model);
    expect(res.statusCode, res.body).toBe(200);
    expect(fake.requests.length).toBe(before + 1);
    return fake.requests.at(-1)!.headers;
  }

  it('POST /api/models answers 201 with the full view and the defaults (name and upstreamModel = key)', async () => {
    const key = newKey();
    const res = await create({ key, provider: { type: 'mock' }, capabilities: ['chat'] });
    expect(res.statusCode, res.body).toBe(201);
    const { model } = res.json();
    expect(model).toEqual({
      key,
      name: key,
      provider: { type: 'mock', baseUrl: null, apiVersion: null, deployment: null, mock: null, headerNames: [], hasApiKey: false },
      upstreamModel: key,
      capabilities: ['chat'],
      pricing: null,
      guardrails: { input: [], output: [] },
      fallbacks: [],
      builtIn: false,
      createdAt: expect.stringMatching(ISO),
      updatedAt: expect.stringMatching(ISO),
    });
    expect(new Date(model.createdAt).toISOString()).toBe(model.createdAt);
    expect((await list()).find((m) => m.key === key)).toEqual(model);
  });

  it('every given field is stored and shown, the API key only as hasApiKey and headers only by name', async () => {
    const fallback = newKey();
    expect((await create({ key: fallback, provider: { type: 'mock' }, capabilities: ['chat'] })).statusCode).toBe(201);
    const key = newKey();
    const body = {
      key,
      name: 'Azure GPT',
      provider: {
        type: 'azure-openai',
        baseUrl: 'https://example-resource.openai.azure.com',
        apiKey: 'azure-secret-key',
        apiVersion: '2024-10-21',
        deployment: 'gpt4o-deploy',
        headers: { 'X-Team': 'team-secret' },
      },
      upstreamModel: 'gpt-4o',
      capabilities: ['chat', 'embeddings'],
      pricing: { inputPer1M: 2.5, outputPer1M: 10, currency: 'EUR' },
      guardrails: { input: ['pii'], output: ['toxicity'] },
      fallbacks: [fallback, 'local-chat'],
    };
    const res = await create(body);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().model).toMatchObject({
      key,
      name: 'Azure GPT',
      provider: {
        type: 'azure-openai',
        baseUrl: 'https://example-resource.openai.azure.com',
        apiVersion: '2024-10-21',
        deployment: 'gpt4o-deploy',
        mock: null,
        headerNames: ['X-Team'],
        hasApiKey: true,
      },
      upstreamModel: 'gpt-4o',
      capabilities: ['chat', 'embeddings'],
      pricing: { inputPer1M: 2.5, outputPer1M: 10, currency: 'EUR' },
      guardrails: { input: ['pii'], output: ['toxicity'] },
      fallbacks: [fallback, 'local-chat'],
      builtIn: false,
    });
    expect(Object.keys(res.json().model.provider).sort()).toEqual(['apiVersion', 'baseUrl', 'deployment', 'hasApiKey', 'headerNames', 'mock', 'type']);
  });

  it('GET /api/models lists the built-ins first, then the registered models by key', async () => {
    const keys = [`zz-${randomBase32(6).toLowerCase()}`, `aa-${randomBase32(6).toLowerCase()}`];
    for (const key of keys) expect((await create({ key, provider: { type: 'mock' }, capabilities: ['chat'] })).statusCode).toBe(201);
    const models = await list();
    expect(models.slice(0, 2)).toMatchObject([
      { key: 'local-chat', builtIn: true, capabilities: ['chat'], provider: { type: 'local', hasApiKey: false } },
      { key: 'local-embed', builtIn: true, capabilities: ['embeddings'], provider: { type: 'local', hasApiKey: false } },
    ]);
    const registered = models.slice(2);
    expect(registered.every((m) => m.builtIn === false)).toBe(true);
    const registeredKeys = registered.map((m) => m.key as string);
    expect(registeredKeys).toEqual(expect.arrayContaining(keys));
    expect(registeredKeys).toEqual([...registeredKeys].sort());
    // The client API lists the same models.
    const client = await call(t.app, t.ownerToken, { method: 'GET', url: '/api/client/v1/models' });
    expect(client.json().data.map((m: { id: string }) => m.id)).toEqual(models.map((m) => m.key));
  });

  it('PATCH changes name, upstreamModel, capabilities, pricing (null clears), guardrails, fallbacks and baseUrl', async () => {
    const other = newKey();
    expect((await create({ key: other, provider: { type: 'mock' }, capabilities: ['chat'] })).statusCode).toBe(201);
    const key = newKey();
    const created = await create({
      key,
      provider: { type: 'openai-compatible', baseUrl: 'http://127.0.0.1:1/v1' },
      capabilities: ['chat'],
      pricing: { inputPer1M: 1, outputPer1M: 2, currency: 'USD' },
      guardrails: { input: ['a'], output: ['b'] },
    });
    expect(created.statusCode, created.body).toBe(201);
    const res = await patch(key, {
      name: 'Renamed',
      upstreamModel: 'upstream-name',
      capabilities: ['chat', 'moderation'],
      pricing: null,
      guardrails: { input: ['c'] },
      fallbacks: [other],
      provider: { baseUrl: fake.baseUrl },
    });
    expect(res.statusCode, res.body).toBe(200);
    const expected = {
      key,
      name: 'Renamed',
      upstreamModel: 'upstream-name',
      capabilities: ['chat', 'moderation'],
      pricing: null,
      guardrails: { input: ['c'], output: ['b'] },
      fallbacks: [other],
      provider: { type: 'openai-compatible', baseUrl: fake.baseUrl },
      createdAt: created.json().model.createdAt,
    };
    expect(res.json().model).toMatchObject(expected);
    expect((await list()).find((m) => m.key === key)).toMatchObject(expected);
    // The new baseUrl and upstreamModel are what a call uses.
    await upstreamHeaders(key);
    expect(fake.requests.at(-1)!.body.model).toBe('upstream-name');

    const cleared = await patch(key, { fallbacks: [], pricing: { inputPer1M: 0.5, outputPer1M: 0, currency: 'GBP' } });
    expect(cleared.json().model).toMatchObject({ fallbacks: [], pricing: { inputPer1M: 0.5, outputPer1M: 0, currency: 'GBP' }, name: 'Renamed' });
  });

  it('two PATCHes of different fields at once both hold: the later one starts again from the first one\'s result', async () => {
    const key = newKey();
    expect((await create({ key, provider: { type: 'mock' }, capabilities: ['chat'] })).statusCode).toBe(201);
    const restore = holdTogether((t.ctx.services.models as unknown as { store: object }).store, 'find', 2);
    const [renamed, priced] = await Promise.all([patch(key, { name: 'Renamed' }), patch(key, { pricing: { inputPer1M: 3, outputPer1M: 4, currency: 'USD' } })]);
    restore();
    expect([renamed.statusCode, priced.statusCode]).toEqual([200, 200]);
    expect((await list()).find((m) => m.key === key)).toMatchObject({ name: 'Renamed', pricing: { inputPer1M: 3, outputPer1M: 4, currency: 'USD' } });
  });

  it('PATCH can change the provider type (mock to openai-compatible) and calls then go to the new upstream', async () => {
    const key = newKey();
    expect((await create({ key, provider: { type: 'mock', mock: { reply: 'mocked' } }, capabilities: ['chat'] })).statusCode).toBe(201);
    expect((await chat(key)).json().choices[0].message.content).toBe('mocked');
    const res = await patch(key, { provider: { type: 'openai-compatible', baseUrl: fake.baseUrl, mock: null } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().model.provider).toMatchObject({ type: 'openai-compatible', baseUrl: fake.baseUrl, mock: null });
    const reply = await chat(key);
    expect(reply.statusCode, reply.body).toBe(200);
    expect(reply.json().choices[0].message.content).toBe('Hello from the fake upstream');
  });

  // Regression: a type change once kept the old type's baseUrl, so azure-openai was accepted without its own.
  it('changing the provider type without a baseUrl does not carry the old baseUrl over', async () => {
    const key = newKey();
    expect((await create({ key, provider: { type: 'openai-compatible', baseUrl: fake.baseUrl }, capabilities: ['chat'] })).statusCode).toBe(201);
    const toAzure = await patch(key, { provider: { type: 'azure-openai' } });
    expect(toAzure.statusCode, toAzure.body).toBe(400);
    const toMock = await patch(key, { provider: { type: 'mock' } });
    expect(toMock.statusCode, toMock.body).toBe(200);
    expect(toMock.json().model.provider.baseUrl).toBeNull();
  });

  // Regression: stored fallbacks were re-checked on every PATCH, so a deleted fallback blocked unrelated changes.
  it('a model whose fallback was deleted can still be renamed', async () => {
    const fallback = newKey();
    const key = newKey();
    expect((await create({ key: fallback, provider: { type: 'mock' }, capabilities: ['chat'] })).statusCode).toBe(201);
    expect((await create({ key, provider: { type: 'mock' }, capabilities: ['chat'], fallbacks: [fallback] })).statusCode).toBe(201);
    expect((await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/models/${fallback}` })).statusCode).toBe(200);
    expect((await chat(key)).statusCode).toBe(200); // calls skip the missing fallback
    const res = await patch(key, { name: 'Renamed' });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('the API key: omitted keeps it, a new one replaces it, null removes it (checked at the upstream)', async () => {
    const key = newKey();
    const created = await create({ key, provider: { type: 'openai-compatible', baseUrl: fake.baseUrl, apiKey: 'sk-first-key' }, capabilities: ['chat'] });
    expect(created.statusCode, created.body).toBe(201);
    expect((await upstreamHeaders(key)).authorization).toBe('Bearer sk-first-key');

    // Omitted, both at the top level and inside a provider patch.
    const renamed = await patch(key, { name: 'Still keyed' });
    expect(renamed.json().model.provider.hasApiKey).toBe(true);
    const moved = await patch(key, { provider: { baseUrl: fake.baseUrl, apiVersion: null } });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(moved.json().model.provider.hasApiKey).toBe(true);
    expect((await upstreamHeaders(key)).authorization).toBe('Bearer sk-first-key');

    const replaced = await patch(key, { provider: { apiKey: 'sk-second-key' } });
    expect(replaced.json().model.provider.hasApiKey).toBe(true);
    expect((await upstreamHeaders(key)).authorization).toBe('Bearer sk-second-key');

    const removed = await patch(key, { provider: { apiKey: null } });
    expect(removed.json().model.provider.hasApiKey).toBe(false);
    expect((await list()).find((m) => m.key === key)).toMatchObject({ provider: { hasApiKey: false } });
    expect((await upstreamHeaders(key)).authorization).toBeUndefined();
  });

  it('extra headers: omitted keeps them, an object replaces them, null removes them', async () => {
    const key = newKey();
    const created = await create({ key, provider: { type: 'openai-compatible', baseUrl: fake.baseUrl, headers: { 'X-Org': 'org-1' } }, capabilities: ['chat'] });
    expect(created.json().model.provider.headerNames).toEqual(['X-Org']);
    expect((await upstreamHeaders(key))['x-org']).toBe('org-1');
    expect((await patch(key, { name: 'n' })).json().model.provider.headerNames).toEqual(['X-Org']);
    expect((await upstreamHeaders(key))['x-org']).toBe('org-1');
    expect((await patch(key, { provider: { headers: { 'X-Other': 'o-2' } } })).json().model.provider.headerNames).toEqual(['X-Other']);
    const replaced = await upstreamHeaders(key);
    expect([replaced['x-org'], replaced['x-other']]).toEqual([undefined, 'o-2']);
    expect((await patch(key, { provider: { headers: null } })).json().model.provider.headerNames).toEqual([]);
    expect((await upstreamHeaders(key))['x-other']).toBeUndefined();
  });

  it('DELETE answers {success:true}; afterwards the model is gone (GET, PATCH, DELETE, chat all miss it)', async () => {
    const key = newKey();
    expect((await create({ key, provider: { type: 'mock' }, capabilities: ['chat'] })).statusCode).toBe(201);
    expect((await chat(key)).statusCode).toBe(200);
    const res = await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/models/${key}` });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true });
    expect((await list()).map((m) => m.key)).not.toContain(key);
    const again = await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/models/${key}` });
    expect(again.statusCode).toBe(404);
    expect(again.json().error.type).toBe('not_found_error');
    expect((await patch(key, { name: 'x' })).statusCode).toBe(404);
    expect((await chat(key)).statusCode).toBe(404);
    // The key is free again.
    expect((await create({ key, provider: { type: 'mock' }, capabilities: ['chat'] })).statusCode).toBe(201);
  });

  it('a duplicate key is 409 and leaves the first model unchanged', async () => {
    const key = newKey();
    expect((await create({ key, name: 'first', provider: { type: 'mock' }, capabilities: ['chat'] })).statusCode).toBe(201);
    const dup = await create({ key, name: 'second', provider: { type: 'mock' }, capabilities: ['embeddings'] });
    expect(dup.statusCode).toBe(409);
    expect(dup.json().error.message).toEqual(expect.any(String));
    expect((await list()).filter((m) => m.key === key)).toMatchObject([{ name: 'first', capabilities: ['chat'] }]);
  });

  it('built-in keys: create is 409, PATCH and DELETE are 400, and they keep working', async () => {
    for (const key of ['local-chat', 'local-embed']) {
      const created = await create({ key, provider: { type: 'mock' }, capabilities: ['chat'] });
      expect(created.statusCode).toBe(409);
      const patched = await patch(key, { name: 'mine' });
      expect(patched.statusCode).toBe(400);
      expect(patched.json().error.message).toContain(key);
      const deleted = await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/models/${key}` });
      expect(deleted.statusCode).toBe(400);
    }
    const builtIns = (await list()).filter((m) => m.builtIn);
    expect(builtIns.map((m) => m.key)).toEqual(['local-chat', 'local-embed']);
    expect(builtIns.map((m) => m.name)).not.toContain('mine');
    expect((await chat('local-chat')).statusCode).toBe(200);
  });
});

describe.each(BACKENDS)('WAYGATE_LOCAL_MODELS=false on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend, env: { WAYGATE_LOCAL_MODELS: 'false' } });
  });
  afterAll(async () => t?.close());

  it('there are no built-ins and a project may register its own local-chat key', async () => {
    const before = await call(t.app, t.adminSession, { method: 'GET', url: '/api/models' });
    expect(before.json().models).toEqual([]);
    const created = await call(t.app, t.adminSession, {
      method: 'POST',
      url: '/api/models',
      payload: { key: 'local-chat', provider: { type: 'mock', mock: { reply: 'my own local-chat' } }, capabilities: ['chat'] },
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json().model).toMatchObject({ key: 'local-chat', builtIn: false });
    const reply = await call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody('local-chat') });
    expect(reply.statusCode, reply.body).toBe(200);
    expect(reply.json().choices[0].message.content).toBe('my own local-chat');
    // It is an ordinary model now: it can be changed and deleted.
    expect((await call(t.app, t.adminSession, { method: 'PATCH', url: '/api/models/local-chat', payload: { name: 'Mine' } })).json().model.name).toBe('Mine');
    expect((await call(t.app, t.adminSession, { method: 'DELETE', url: '/api/models/local-chat' })).statusCode).toBe(200);
    expect((await call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody('local-embed') })).statusCode).toBe(404);
  });
});
