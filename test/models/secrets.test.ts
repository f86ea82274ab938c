import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { SecretBox } from '../../src/platform/secrets.js';
import { BACKENDS, call, createTestApp, flushAudit, type TestApp } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { chatBody } from '../helpers/models.js';

/**
 * A model's API key and extra header values are write-only: they reach the upstream, and nothing else. Not a
 * response, not a log line, not an audit row; in the database they are sealed and the provider JSON holds none.
 */

const secret = (label: string) => `${label}-${randomBase32(24)}`;

describe.each(BACKENDS)('model secrets on %s', (backend) => {
  let t: TestApp;
  let fake: FakeUpstream;
  const key = `sec-${randomBase32(8).toLowerCase()}`;
  const apiKey = secret('sk-live');
  const headerValue = secret('hv');
  const newApiKey = secret('sk-rotated');
  const newHeaderValue = secret('hv-rotated');
  const ALL = [apiKey, headerValue, newApiKey, newHeaderValue];
  const responses: LightMyRequestResponse[] = [];

  /** Sends a dashboard request and keeps the response for the "never in a response" check. */
  async function dashboard(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: Record<string, unknown>) {
    const res = await call(t.app, t.adminSession, { method, url, payload });
    responses.push(res);
    return res;
  }
  async function client(url: string, payload?: Record<string, unknown>) {
    const res = await call(t.app, t.ownerToken, { method: payload ? 'POST' : 'GET', url, payload });
    responses.push(res);
    return res;
  }
  function expectNoSecret(text: string, where: string): void {
    for (const value of ALL) expect(text.includes(value), `${where} contains a secret`).toBe(false);
  }

  beforeAll(async () => {
    t = await createTestApp({ backend, env: { WAYGATE_UPSTREAM_RETRIES: '0' } });
    fake = await startFakeOpenAi();
    const created = await dashboard('POST', '/api/models', {
      key,
      provider: { type: 'openai-compatible', baseUrl: fake.baseUrl, apiKey, headers: { 'X-Secret-Header': headerValue } },
      capabilities: ['chat', 'embeddings'],
    });
    if (created.statusCode !== 201) throw new Error(`model create failed: ${created.body}`);
  });
  afterAll(async () => {
    await fake?.close();
    await t?.close();
  });

  it('the secrets reach the upstream (positive control)', async () => {
    const res = await client('/api/client/v1/chat/completions', chatBody(key));
    expect(res.statusCode, res.body).toBe(200);
    const seen = fake.requests.at(-1)!;
    expect(seen.headers.authorization).toBe(`Bearer ${apiKey}`);
    expect(seen.headers['x-secret-header']).toBe(headerValue);
  });

  it('create, list, patch and client responses show hasApiKey and header names, never the values', async () => {
    const list = await dashboard('GET', '/api/models');
    const view = list.json().models.find((m: { key: string }) => m.key === key);
    expect(view.provider).toMatchObject({ hasApiKey: true, headerNames: ['X-Secret-Header'] });
    expect(Object.keys(view.provider)).not.toContain('apiKey');
    expect(Object.keys(view.provider)).not.toContain('headers');

    const renamed = await dashboard('PATCH', `/api/models/${key}`, { name: 'Renamed' });
    expect(renamed.statusCode).toBe(200);
    expect(renamed.json().model.provider).toMatchObject({ hasApiKey: true, headerNames: ['X-Secret-Header'] });

    const rotated = await dashboard('PATCH', `/api/models/${key}`, { provider: { apiKey: newApiKey, headers: { 'X-Secret-Header': newHeaderValue } } });
    expect(rotated.statusCode).toBe(200);
    expect(rotated.json().model.provider).toMatchObject({ hasApiKey: true, headerNames: ['X-Secret-Header'] });

    await client('/api/client/v1/models');
    const chat = await client('/api/client/v1/chat/completions', chatBody(key));
    expect(chat.statusCode).toBe(200);
    expect(fake.requests.at(-1)!.headers.authorization).toBe(`Bearer ${newApiKey}`);
    await client('/api/client/v1/embeddings', { model: key, input: 'hello' });

    for (const res of responses) {
      expectNoSecret(res.body, `${res.statusCode} response ${res.body.slice(0, 200)}`);
      expectNoSecret(JSON.stringify(res.headers), 'response headers');
    }
  });

  it('refused bodies that carry a secret do not echo it', async () => {
    const refusals = [
      await dashboard('POST', '/api/models', { key: 'bad key', provider: { type: 'openai-compatible', baseUrl: fake.baseUrl, apiKey }, capabilities: ['chat'] }),
      await dashboard('POST', '/api/models', { key: `x-${randomBase32(6)}`, provider: { type: 'openai-compatible', apiKey, bogus: 1 }, capabilities: ['chat'] }),
      await dashboard('POST', '/api/models', { key: `x-${randomBase32(6)}`, provider: { type: 'mock', headers: { Authorization: `Bearer ${apiKey}` } }, capabilities: ['chat'] }),
      await dashboard('POST', '/api/models', { key: `x-${randomBase32(6)}`, provider: { type: 'mock', apiKey: apiKey.repeat(100) }, capabilities: ['chat'] }),
      await dashboard('POST', '/api/models', { key, provider: { type: 'mock', apiKey }, capabilities: ['chat'] }), // duplicate: 409
      await dashboard('PATCH', `/api/models/${key}`, { provider: { apiKey: newApiKey, headers: { host: headerValue } } }),
      await dashboard('PATCH', `/api/models/missing-${randomBase32(6)}`, { provider: { apiKey } }),
    ];
    expect(refusals.map((r) => r.statusCode)).toEqual([400, 400, 400, 400, 409, 400, 404]);
    for (const res of refusals) expectNoSecret(res.body, `refusal ${res.body}`);
  });

  it('upstream failures are logged without the secrets', async () => {
    fake.queue({ status: 500 });
    const failed = await client('/api/client/v1/chat/completions', chatBody(key));
    expect(failed.statusCode).toBeGreaterThanOrEqual(500);
    // A model whose upstream is not listening at all.
    const closed = await dashboard('POST', '/api/models', {
      key: `down-${randomBase32(6).toLowerCase()}`,
      provider: { type: 'openai-compatible', baseUrl: 'http://127.0.0.1:1/v1', apiKey, headers: { 'X-Secret-Header': headerValue } },
      capabilities: ['chat'],
    });
    expect(closed.statusCode).toBe(201);
    expect((await client('/api/client/v1/chat/completions', chatBody(closed.json().model.key))).statusCode).toBeGreaterThanOrEqual(500);

    const text = t.logs.join('\n');
    expect(text).toContain('upstream model failed'); // positive control: the failures were logged
    expectNoSecret(text, 'the log');
  });

  it('a create that fails inside the database logs no secret', async () => {
    // A lone surrogate in JSONB: PostgreSQL refuses the row (see validation.test.ts), SQLite stores it.
    const res = await dashboard('POST', '/api/models', {
      key: `db-${randomBase32(6).toLowerCase()}`,
      provider: { type: 'openai-compatible', baseUrl: fake.baseUrl, apiKey, headers: { 'X-Secret-Header': headerValue } },
      capabilities: ['chat'],
      guardrails: { input: ['\uD800'] },
    });
    if (backend === 'postgres' && res.statusCode === 500) expect(t.logs.join('\n')).toContain('request failed');
    expectNoSecret(t.logs.join('\n'), 'the log');
  });

  it('audit rows of model changes exist and hold none of the secrets', async () => {
    await flushAudit(t);
    const rows = await t.ctx.database.db.selectFrom('audit_events').selectAll().execute();
    const modelRows = rows.filter((r) => r.action.startsWith('models.'));
    expect(modelRows.map((r) => r.action)).toEqual(expect.arrayContaining(['models.create', 'models.update']));
    expect(modelRows.some((r) => r.resource_id === key)).toBe(true);
    expectNoSecret(JSON.stringify(rows), 'audit_events');
    const usage = await t.ctx.database.db.selectFrom('usage_events').selectAll().execute();
    expectNoSecret(JSON.stringify(usage), 'usage_events');
  });

  it('in the database the secrets are sealed in provider_secrets and absent from the provider JSON', async () => {
    const row = await t.ctx.database.db.selectFrom('models').selectAll().where('key', '=', key).executeTakeFirstOrThrow();
    const sealed = row.provider_secrets;
    expect(typeof sealed).toBe('string');
    expectNoSecret(sealed!, 'provider_secrets');
    // Not merely encoded: neither base64 nor hex of the key is in it.
    for (const value of ALL) {
      expect(sealed!.includes(Buffer.from(value).toString('base64').slice(0, 20))).toBe(false);
      expect(sealed!.includes(Buffer.from(value).toString('hex').slice(0, 20))).toBe(false);
    }
    // It is the current key, sealed: the instance's secret box opens it.
    expect(JSON.parse(t.ctx.secrets.decrypt(sealed!))).toEqual({ apiKey: newApiKey, headers: { 'X-Secret-Header': newHeaderValue } });

    const provider = typeof row.provider === 'string' ? row.provider : JSON.stringify(row.provider);
    expectNoSecret(provider, 'the provider column');
    expect(JSON.parse(provider)).toMatchObject({ hasApiKey: true, headerNames: ['X-Secret-Header'] });
    expectNoSecret(JSON.stringify({ ...row, provider_secrets: null }), 'the models row outside provider_secrets');
  });

  it('removing the key and headers clears provider_secrets', async () => {
    const res = await dashboard('PATCH', `/api/models/${key}`, { provider: { apiKey: null, headers: null } });
    expect(res.json().model.provider).toMatchObject({ hasApiKey: false, headerNames: [] });
    const row = await t.ctx.database.db.selectFrom('models').select('provider_secrets').where('key', '=', key).executeTakeFirstOrThrow();
    expect(row.provider_secrets).toBeNull();
  });
  it('stored credentials do not follow a model to another origin or provider type', async () => {
    const moving = `mv-${randomBase32(8).toLowerCase()}`;
    const created = await dashboard('POST', '/api/models', { key: moving, provider: { type: 'openai-compatible', baseUrl: fake.baseUrl, apiKey }, capabilities: ['chat'] });
    expect(created.statusCode).toBe(201);
    for (const provider of [{ baseUrl: 'https://attacker.example/v1' }, { baseUrl: null }, { type: 'anthropic' }, { baseUrl: 'https://attacker.example/v1', headers: null }]) {
      const refused = await dashboard('PATCH', `/api/models/${moving}`, { provider });
      expect(refused.statusCode, JSON.stringify(provider)).toBe(400);
      expect(refused.json().error.message).toMatch(/must be sent again/);
    }
    // Another path on the same origin keeps the key.
    const samePlace = await dashboard('PATCH', `/api/models/${moving}`, { provider: { baseUrl: `${fake.baseUrl}/` } });
    expect(samePlace.statusCode, samePlace.body).toBe(200);
    expect(samePlace.json().model.provider.hasApiKey).toBe(true);
    const moved = await dashboard('PATCH', `/api/models/${moving}`, { provider: { baseUrl: 'https://elsewhere.example/v1', apiKey: null, headers: null } });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(moved.json().model.provider).toMatchObject({ baseUrl: 'https://elsewhere.example/v1', hasApiKey: false });
    // Without credentials a model moves freely.
    expect((await dashboard('PATCH', `/api/models/${moving}`, { provider: { type: 'anthropic', baseUrl: null } })).statusCode).toBe(200);
  });

  // Regression: a stored header named in other letters than Waygate's own was sent beside it, the two joined.
  it("headers stored before Waygate's own names were reserved are replaced by Waygate's, not sent beside them", async () => {
    const legacy = `legacy-${randomBase32(8).toLowerCase()}`;
    const provider = { type: 'openai-compatible', baseUrl: fake.baseUrl, headers: { 'X-Team': 'blue' } };
    expect((await dashboard('POST', '/api/models', { key: legacy, provider, capabilities: ['chat'] })).statusCode).toBe(201);
    const stored = t.ctx.secrets.encrypt(JSON.stringify({ headers: { 'X-Team': 'blue', 'X-Request-Id': 'stored-id', Accept: 'text/html' } }));
    await t.ctx.database.db.updateTable('models').set({ provider_secrets: stored }).where('key', '=', legacy).execute();
    expect((await dashboard('PATCH', `/api/models/${legacy}`, { name: 'reload' })).statusCode).toBe(200);

    const res = await call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody(legacy, { stream: true }), headers: { 'x-request-id': 'legacy-call' } });
    expect(res.statusCode, res.body).toBe(200);
    const seen = fake.requests.at(-1)!.headers;
    expect(seen['x-request-id']).toBe('legacy-call');
    expect(seen.accept).toBe('text/event-stream');
    expect(seen['x-team']).toBe('blue');
  });

  it('a model whose credentials cannot be decrypted (another secret key) fails alone, with 503, until they are set again', async () => {
    const plain = `plain-${randomBase32(8).toLowerCase()}`;
    const keyOnly = `ko-${randomBase32(8).toLowerCase()}`;
    const both = `both-${randomBase32(8).toLowerCase()}`;
    const provider = { type: 'openai-compatible', baseUrl: fake.baseUrl };
    expect((await dashboard('POST', '/api/models', { key: plain, provider, capabilities: ['chat'] })).statusCode).toBe(201);
    expect((await dashboard('POST', '/api/models', { key: keyOnly, provider: { ...provider, apiKey }, capabilities: ['chat'] })).statusCode).toBe(201);
    expect((await dashboard('POST', '/api/models', { key: both, provider: { ...provider, apiKey, headers: { 'X-Secret-Header': headerValue } }, capabilities: ['chat'] })).statusCode).toBe(201);
    const foreign = new SecretBox(randomBase32(40)).encrypt(JSON.stringify({ apiKey: 'sealed-elsewhere' }));
    await t.ctx.database.db.updateTable('models').set({ provider_secrets: foreign }).where('key', 'in', [keyOnly, both]).execute();
    // Any change in the project makes every instance load its models again.
    expect((await dashboard('PATCH', `/api/models/${plain}`, { name: 'reload' })).statusCode).toBe(200);

    expect((await dashboard('GET', '/api/models')).statusCode).toBe(200);
    expect((await client('/api/client/v1/chat/completions', chatBody(plain))).statusCode).toBe(200);
    const before = fake.requests.length;
    const broken = await client('/api/client/v1/chat/completions', chatBody(keyOnly));
    expect(broken.statusCode).toBe(503);
    expect(broken.json().error.message).toMatch(/cannot be decrypted.*PATCH \/api\/models\//);
    expect(fake.requests.length).toBe(before);

    // A change that leaves the credentials alone keeps them sealed as they are; half of them cannot be kept.
    expect((await dashboard('PATCH', `/api/models/${both}`, { name: 'renamed' })).statusCode).toBe(200);
    const half = await dashboard('PATCH', `/api/models/${both}`, { provider: { apiKey: newApiKey } });
    expect(half.statusCode).toBe(400);
    expect(half.json().error.message).toMatch(/cannot be decrypted/);
    // Setting them again mends the model.
    expect((await dashboard('PATCH', `/api/models/${keyOnly}`, { provider: { apiKey: newApiKey } })).statusCode).toBe(200);
    const mended = await client('/api/client/v1/chat/completions', chatBody(keyOnly));
    expect(mended.statusCode, mended.body).toBe(200);
    expect(fake.requests.at(-1)!.headers.authorization).toBe(`Bearer ${newApiKey}`);
  });
});
