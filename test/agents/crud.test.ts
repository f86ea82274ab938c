import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, call, createTestApp, createToken, type TestApp } from '../helpers/app.js';
import { registerModel } from '../helpers/models.js';
import { AGENTS, agentsCall, createAgent, otherProject, publish, type AgentView } from './support.js';

const SECRET = 'sk-connected-agent-secret';

describe.each(BACKENDS)('agents: configuration and versions on %s', (backend) => {
  let t: TestApp;
  const get = (key: string, token = t.ownerToken) => agentsCall(t, { method: 'GET', url: `${AGENTS}/${key}` }, token);
  const patch = (key: string, payload: Record<string, unknown>) => agentsCall(t, { method: 'PATCH', url: `${AGENTS}/${key}`, payload });
  const connected = (extra: Record<string, unknown> = {}) => ({
    name: 'Remote Helper',
    config: { connection: { protocol: 'openai-chat', url: 'http://127.0.0.1:9/v1', model: 'remote-model', apiKey: SECRET, headers: { 'X-Team': 'team-secret' } } },
    ...extra,
  });

  beforeAll(async () => {
    t = await createTestApp({ backend, noWorkers: true, env: { WAYGATE_AGENT_ALLOW_PRIVATE_URLS: 'true' } });
  });
  afterAll(async () => t?.close());

  it('creates a native agent: 201 {agent}, a key made of the name and a short suffix, status active', async () => {
    const res = await agentsCall(t, { method: 'POST', url: AGENTS, payload: { name: 'Ünïcode Support Bot!', description: 'Helps', config: { modelKey: 'local-chat', systemPrompt: 'Be kind', temperature: 0.3, topP: 0.9, maxTokens: 100 }, metadata: { team: 'cx' } } });
    expect(res.statusCode, res.body).toBe(201);
    const agent = res.json().agent;
    expect(agent.key).toMatch(/^unicode-support-bot-[a-z2-7]{6}$/);
    expect(agent).toMatchObject({
      name: 'Ünïcode Support Bot!', description: 'Helps', status: 'active', kind: 'native', hasApiKey: false, modelKey: 'local-chat', temperature: 0.3, topP: 0.9, maxTokens: 100,
      metadata: { team: 'cx' }, publishedVersion: null, config: { kind: 'native', modelKey: 'local-chat', systemPrompt: 'Be kind', connection: null },
    });
    const again = await createAgent(t, { name: 'Ünïcode Support Bot!' });
    expect(again.key).not.toBe(agent.key);
    expect((await createAgent(t, { name: '???' })).key).toMatch(/^agent-[a-z2-7]{6}$/);
  });

  it('lists summaries per interface 2.4, filtered by status', async () => {
    const draft = await createAgent(t, { name: 'Drafty', status: 'draft', config: { modelKey: 'local-chat', temperature: 1 } });
    const list = (await agentsCall(t, { method: 'GET', url: `${AGENTS}?status=draft` })).json().agents;
    expect(list).toContainEqual({ key: draft.key, name: 'Drafty', description: null, status: 'draft', createdAt: expect.any(String), modelKey: 'local-chat', temperature: 1, topP: null, maxTokens: null });
    expect(list.every((a: { status: string }) => a.status === 'draft')).toBe(true);
    expect((await agentsCall(t, { method: 'GET', url: `${AGENTS}?status=deleted` })).statusCode).toBe(400);
  });

  it('a connected agent: its API key and header values are encrypted at rest and never shown', async () => {
    const agent = await createAgent(t, connected());
    expect(agent).toMatchObject({ kind: 'external', hasApiKey: true, config: { kind: 'external', connection: { protocol: 'openai-chat', url: 'http://127.0.0.1:9/v1', model: 'remote-model', headerNames: ['X-Team'], hasApiKey: true } } });
    const seen = [JSON.stringify(agent), (await get(agent.key)).body, (await agentsCall(t, { method: 'GET', url: AGENTS })).body];
    for (const text of seen) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain('team-secret');
    }
    const row = await t.ctx.database.db.selectFrom('agents').selectAll().where('key', '=', agent.key).executeTakeFirstOrThrow();
    expect(JSON.stringify(row)).not.toContain(SECRET);
    expect(JSON.stringify(row)).not.toContain('team-secret');
    expect(t.logs.join('\n')).not.toContain(SECRET);
  });

  it('PATCH: native settings never overwrite a connection; omitting apiKey keeps it, null removes it', async () => {
    const agent = await createAgent(t, connected());
    const native = await patch(agent.key, { config: { modelKey: 'local-chat', systemPrompt: 'x' } });
    expect(native.statusCode, native.body).toBe(200);
    expect(native.json().agent).toMatchObject({ kind: 'external', hasApiKey: true, config: { modelKey: 'local-chat', connection: { protocol: 'openai-chat', model: 'remote-model' } } });
    const moved = await patch(agent.key, { config: { connection: { protocol: 'openai-chat', url: 'http://127.0.0.1:9/v2', model: 'other' } } });
    expect(moved.json().agent.config.connection).toEqual({ protocol: 'openai-chat', url: 'http://127.0.0.1:9/v2', model: 'other', headerNames: ['X-Team'], hasApiKey: true });
    const stored = await t.ctx.database.db.selectFrom('agents').select('secrets').where('key', '=', agent.key).executeTakeFirstOrThrow();
    expect(JSON.parse(t.ctx.secrets.decrypt(stored.secrets!))).toEqual({ apiKey: SECRET, headers: { 'X-Team': 'team-secret' } });
    const cleared = await patch(agent.key, { config: { connection: { protocol: 'openai-chat', url: 'http://127.0.0.1:9/v2', model: 'other', apiKey: null, headers: null } } });
    expect(cleared.json().agent).toMatchObject({ hasApiKey: false, config: { connection: { headerNames: [], hasApiKey: false } } });
    const toNative = await patch(agent.key, { config: { kind: 'native', connection: null } });
    expect(toNative.json().agent).toMatchObject({ kind: 'native', config: { connection: null, modelKey: 'local-chat' } });
    const renamed = await patch(agent.key, { name: 'Renamed', status: 'inactive', description: null });
    expect(renamed.json().agent).toMatchObject({ key: agent.key, name: 'Renamed', status: 'inactive', description: null });
  });

  it('PATCH to another origin must send apiKey and headers again (or null): stored secrets never follow the URL', async () => {
    const agent = await createAgent(t, connected());
    for (const connection of [
      { protocol: 'openai-chat', url: 'http://127.0.0.1:10/v1', model: 'remote-model' },
      { protocol: 'openai-chat', url: 'https://127.0.0.1:9/v1', model: 'remote-model', apiKey: 'sk-new' },
      { protocol: 'openai-chat', url: 'http://localhost:9/v1', model: 'remote-model', headers: null },
    ]) {
      const refused = await patch(agent.key, { config: { connection } });
      expect(refused.statusCode, refused.body).toBe(400);
      expect(refused.json().error.message).toMatch(/moves the connection from http:\/\/127\.0\.0\.1:9 to .*send apiKey and headers again/);
    }
    const moved = await patch(agent.key, { config: { connection: { protocol: 'openai-chat', url: 'http://127.0.0.1:10/v1', model: 'remote-model', apiKey: 'sk-new', headers: null } } });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(moved.json().agent.config.connection).toMatchObject({ url: 'http://127.0.0.1:10/v1', headerNames: [], hasApiKey: true });
    const stored = await t.ctx.database.db.selectFrom('agents').select('secrets').where('key', '=', agent.key).executeTakeFirstOrThrow();
    expect(JSON.parse(t.ctx.secrets.decrypt(stored.secrets!))).toEqual({ apiKey: 'sk-new' });
    // Without stored secrets there is nothing to carry over: a move needs nothing more.
    const bare = await createAgent(t, { name: 'Bare', config: { connection: { protocol: 'a2a', url: 'http://127.0.0.1:9/a2a' } } });
    expect((await patch(bare.key, { config: { connection: { protocol: 'a2a', url: 'http://127.0.0.1:11/a2a' } } })).statusCode).toBe(200);
  });

  it('concurrent PATCHes of different fields all land (no lost update)', async () => {
    const agent = await createAgent(t, { name: 'Busy', config: { modelKey: 'local-chat' } });
    const changes = [
      { name: 'Busy renamed' },
      { description: 'described' },
      { config: { systemPrompt: 'prompted' } },
      { config: { temperature: 0.5 } },
      { config: { maxTokens: 42 } },
      { metadata: { team: 'blue' } },
      { status: 'draft' },
      { config: { topP: 0.5 } },
    ];
    const results = await Promise.all(changes.map((change) => patch(agent.key, change)));
    expect(results.map((r) => r.statusCode)).toEqual(changes.map(() => 200));
    expect((await get(agent.key)).json().agent).toMatchObject({
      name: 'Busy renamed', description: 'described', status: 'draft', metadata: { team: 'blue' },
      config: { modelKey: 'local-chat', systemPrompt: 'prompted', temperature: 0.5, maxTokens: 42, topP: 0.5 },
    });
  });

  it.each([
    ['no name', { config: {} }, /name is required/],
    ['an unknown model', { name: 'x', config: { modelKey: 'nope' } }, /config\.modelKey: model "nope" does not exist/],
    ['a model without chat', { name: 'x', config: { modelKey: 'local-embed' } }, /does not offer chat/],
    ['an unknown guardrail', { name: 'x', config: { inputGuardrailKey: 'nope' } }, /config\.inputGuardrailKey: guardrail "nope" does not exist/],
    ['an external agent without connection', { name: 'x', config: { kind: 'external' } }, /config\.connection is required/],
    ['a chat connection without model', { name: 'x', config: { connection: { protocol: 'openai-chat', url: 'http://127.0.0.1:9' } } }, /config\.connection\.model is required/],
    ['a connection URL that is not http', { name: 'x', config: { connection: { protocol: 'a2a', url: 'file:///etc/passwd' } } }, /absolute http/],
    ['a reserved header', { name: 'x', config: { connection: { protocol: 'a2a', url: 'http://127.0.0.1:9', headers: { Authorization: 'x' } } } }, /may not set Authorization/],
    ['a connection-control header', { name: 'x', config: { connection: { protocol: 'a2a', url: 'http://127.0.0.1:9', headers: { 'Transfer-Encoding': 'chunked' } } } }, /may not set Transfer-Encoding/],
    ['a cookie header', { name: 'x', config: { connection: { protocol: 'a2a', url: 'http://127.0.0.1:9', headers: { cookie: 'a=b' } } } }, /may not set cookie/],
    ['a header value with a line break', { name: 'x', config: { connection: { protocol: 'a2a', url: 'http://127.0.0.1:9', headers: { 'X-A': 'a\r\nX-B: b' } } } }, /headers\.X-A may only hold printable ASCII/],
    ['an apiKey with a line break', { name: 'x', config: { connection: { protocol: 'a2a', url: 'http://127.0.0.1:9', apiKey: 'sk\nx' } } }, /apiKey may only hold printable ASCII/],
    ['credentials in the URL', { name: 'x', config: { connection: { protocol: 'a2a', url: 'http://user:pw@127.0.0.1:9' } } }, /may not hold credentials/],
    ['too many headers', { name: 'x', config: { connection: { protocol: 'a2a', url: 'http://127.0.0.1:9', headers: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`X-H${i}`, 'v'])) } } }, /config\.connection\.headers must NOT have more than 50 properties/],
    ['a bad status', { name: 'x', status: 'paused' }, /status must be one of: active, inactive, draft/],
    ['a temperature out of range', { name: 'x', config: { temperature: 3 } }, /temperature/],
    ['an unknown config field', { name: 'x', config: { tools: [] } }, /config\.tools is not a known field/],
  ])('refuses %s (400)', async (_case, payload, message) => {
    const res = await agentsCall(t, { method: 'POST', url: AGENTS, payload });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error.message).toMatch(message);
  });

  it('publish: 201 {version} with increasing numbers; safe when publishes race; snapshots are immutable', async () => {
    const model = await registerModel(t, { provider: { type: 'mock' }, capabilities: ['chat'] });
    const agent = await createAgent(t, { name: 'Versioned', config: { modelKey: model, systemPrompt: 'v1' } });
    const res = await agentsCall(t, { method: 'POST', url: `${AGENTS}/${agent.key}/publish`, payload: { changelog: 'first' } });
    expect(res.statusCode).toBe(201);
    expect(res.json().version).toMatchObject({ agentKey: agent.key, number: 1, changelog: 'first', name: 'Versioned', config: { systemPrompt: 'v1' } });
    await patch(agent.key, { config: { systemPrompt: 'v2' } });
    const numbers = await Promise.all(Array.from({ length: 8 }, () => publish(t, agent.key)));
    expect(numbers.sort((a, b) => a - b)).toEqual([2, 3, 4, 5, 6, 7, 8, 9]);
    const rows = await t.ctx.database.db.selectFrom('agent_versions').select(['number', 'config']).where('agent_id', '=', (await t.ctx.database.db.selectFrom('agents').select('id').where('key', '=', agent.key).executeTakeFirstOrThrow()).id).orderBy('number').execute();
    const prompt = (config: unknown) => (typeof config === 'string' ? JSON.parse(config) : config).systemPrompt;
    expect(rows.map((r) => prompt(r.config))).toEqual(['v1', ...Array(8).fill('v2')]);
    expect((await get(agent.key)).json().agent.publishedVersion).toBe(9);
    expect((await agentsCall(t, { method: 'POST', url: `${AGENTS}/nope/publish` })).statusCode).toBe(404);
  });

  it('delete: 200 {success: true}, then 404 everywhere; its versions stay for audit', async () => {
    const agent = await createAgent(t, { name: 'Doomed', config: { modelKey: 'local-chat' } });
    await publish(t, agent.key);
    expect((await agentsCall(t, { method: 'DELETE', url: `${AGENTS}/${agent.key}` })).json()).toEqual({ success: true });
    expect((await get(agent.key)).statusCode).toBe(404);
    expect((await agentsCall(t, { method: 'DELETE', url: `${AGENTS}/${agent.key}` })).statusCode).toBe(404);
    expect((await patch(agent.key, { name: 'x' })).statusCode).toBe(404);
    expect((await agentsCall(t, { method: 'GET', url: AGENTS })).json().agents.map((a: AgentView) => a.key)).not.toContain(agent.key);
    expect(await t.ctx.database.db.selectFrom('agent_versions').innerJoin('agents', 'agents.id', 'agent_versions.agent_id').select('number').where('agents.key', '=', agent.key).execute()).toHaveLength(1);
  });

  it('writes need write permission (403); another project cannot see the agent (404)', async () => {
    const agent = await createAgent(t, { name: 'Guarded', config: { modelKey: 'local-chat' } });
    const viewer = await createToken(t, { role: 'viewer' });
    expect((await get(agent.key, viewer.value)).statusCode).toBe(200);
    for (const options of [
      { method: 'POST' as const, url: AGENTS, payload: { name: 'x' } },
      { method: 'PATCH' as const, url: `${AGENTS}/${agent.key}`, payload: { name: 'x' } },
      { method: 'DELETE' as const, url: `${AGENTS}/${agent.key}` },
      { method: 'POST' as const, url: `${AGENTS}/${agent.key}/publish` },
    ]) {
      expect((await agentsCall(t, options, viewer.value)).statusCode, options.method).toBe(403);
    }
    const otherToken = (await otherProject(t, 'Elsewhere')).token;
    expect((await get(agent.key, otherToken)).statusCode).toBe(404);
    expect((await agentsCall(t, { method: 'GET', url: AGENTS }, otherToken)).json().agents).toEqual([]);
  });
  it.each([
    ['POST a name that is not a string', 'POST', '', { name: 5 }, /body\.name must be of type string/],
    ['POST a config that is not an object', 'POST', '', { name: 'x', config: 'native' }, /body\.config must be of type object/],
    ['POST metadata that is an array', 'POST', '', { name: 'x', metadata: ['a'] }, /body\.metadata must be of type object/],
    ['POST a fractional maxTokens', 'POST', '', { name: 'x', config: { maxTokens: 1.5 } }, /body\.config\.maxTokens must be of type integer/],
    ['POST a connection without url', 'POST', '', { name: 'x', config: { connection: { protocol: 'a2a' } } }, /body\.config\.connection\.url is required/],
    ['POST an unknown protocol', 'POST', '', { name: 'x', config: { connection: { protocol: 'grpc', url: 'http://127.0.0.1:9' } } }, /protocol must be one of: a2a, openai-chat, openai-responses/],
    ['PATCH a temperature that is not a number', 'PATCH', '/:key', { config: { temperature: 'hot' } }, /body\.config\.temperature must be of type number/],
    ['PATCH an unknown field', 'PATCH', '/:key', { owner: 'me' }, /body\.owner is not a known field/],
    ['PATCH a bad status', 'PATCH', '/:key', { status: 'paused' }, /body\.status must be one of: active, inactive, draft/],
    ['publish a changelog that is not a string', 'POST', '/:key/publish', { changelog: 5 }, /body\.changelog must be of type string/],
    ['publish an unknown field', 'POST', '/:key/publish', { notes: 'x' }, /body\.notes is not a known field/],
  ] as const)('wrong types and unknown fields: %s is a 400 naming the field', async (_case, method, path, payload, message) => {
    const agent = await createAgent(t, { name: 'Typed', config: { modelKey: 'local-chat' } });
    const res = await agentsCall(t, { method, url: `${AGENTS}${path.replace(':key', agent.key)}`, payload });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error.message).toMatch(message);
    expect((await get(agent.key)).json().agent).toMatchObject({ name: 'Typed', status: 'active', publishedVersion: null, config: { temperature: null } });
  });

  it('an agent key too long for a key is a 4xx {error} on every route that takes one', async () => {
    const key = 'k'.repeat(201);
    for (const options of [
      { method: 'GET' as const, url: `${AGENTS}/${key}` },
      { method: 'PATCH' as const, url: `${AGENTS}/${key}`, payload: { name: 'x' } },
      { method: 'DELETE' as const, url: `${AGENTS}/${key}` },
      { method: 'POST' as const, url: `${AGENTS}/${key}/publish` },
    ]) {
      const res = await agentsCall(t, options);
      expect(res.statusCode, `${options.method} ${res.body}`).toBeGreaterThanOrEqual(400);
      expect(res.statusCode).toBeLessThan(500);
      expect(res.json().error).toMatchObject({ type: 'invalid_request_error', message: expect.any(String) });
    }
  });

  it("another project's agent is a 404 on GET, PATCH, DELETE and publish, and stays as it was", async () => {
    const agent = await createAgent(t, { name: 'Mine', config: { modelKey: 'local-chat' } });
    const other = await otherProject(t, 'Foreign writers');
    for (const options of [
      { method: 'GET' as const, url: `${AGENTS}/${agent.key}` },
      { method: 'PATCH' as const, url: `${AGENTS}/${agent.key}`, payload: { name: 'Taken' } },
      { method: 'DELETE' as const, url: `${AGENTS}/${agent.key}` },
      { method: 'POST' as const, url: `${AGENTS}/${agent.key}/publish`, payload: { changelog: 'theirs' } },
    ]) {
      const res = await agentsCall(t, options, other.token);
      expect(res.statusCode, options.method).toBe(404);
      expect(res.json().error).toMatchObject({ type: 'not_found_error', message: `Agent "${agent.key}" not found` });
    }
    expect((await get(agent.key)).json().agent).toMatchObject({ name: 'Mine', publishedVersion: null });
  });

  it("another project's model and guardrails cannot be named (400), on create and on PATCH", async () => {
    const other = await otherProject(t, 'Foreign references');
    const headers = { 'x-waygate-project': other.id };
    const theirModel = await registerModel(t, { provider: { type: 'mock' }, capabilities: ['chat'] }, { project: other.id });
    const guardrail = await call(t.app, t.adminSession, { method: 'POST', url: '/api/guardrails', headers, payload: { key: 'foreign-pii', type: 'pii', action: 'redact', target: 'both' } });
    expect(guardrail.statusCode, guardrail.body).toBe(201);
    for (const [config, message] of [
      [{ modelKey: theirModel }, `config.modelKey: model "${theirModel}" does not exist in this project`],
      [{ inputGuardrailKey: 'foreign-pii' }, 'config.inputGuardrailKey: guardrail "foreign-pii" does not exist in this project'],
      [{ outputGuardrailKey: 'foreign-pii' }, 'config.outputGuardrailKey: guardrail "foreign-pii" does not exist in this project'],
    ] as const) {
      const created = await agentsCall(t, { method: 'POST', url: AGENTS, payload: { name: 'x', config } });
      expect(created.statusCode, created.body).toBe(400);
      expect(created.json().error.message).toBe(message);
    }
    const agent = await createAgent(t, { name: 'Local refs', config: { modelKey: 'local-chat' } });
    const patched = await patch(agent.key, { config: { modelKey: theirModel } });
    expect(patched.statusCode, patched.body).toBe(400);
    expect((await get(agent.key)).json().agent.config.modelKey).toBe('local-chat');
    // In their own project the same references are fine.
    const theirs = await agentsCall(t, { method: 'POST', url: AGENTS, payload: { name: 'x', config: { modelKey: theirModel, inputGuardrailKey: 'foreign-pii' } } }, other.token);
    expect(theirs.statusCode, theirs.body).toBe(201);
  });
});
