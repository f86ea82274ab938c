import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTestApp, type TestApp } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { chatBody, registerModel } from '../helpers/models.js';

/**
 * The azure-openai provider through the client API. A small Azure-shaped server records the full request URL
 * (query string included), which the shared OpenAI fake does not keep.
 */

interface Seen {
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Record<string, unknown>;
}

interface AzureFake {
  origin: string;
  seen: Seen[];
  /** The next answer's status and body, once. */
  fail: { status: number; body: unknown; headers?: Record<string, string> } | null;
  close(): Promise<void>;
}

async function startAzure(): Promise<AzureFake> {
  const sockets = new Set<Socket>();
  const fake: AzureFake = { origin: '', seen: [], fail: null, close: async () => undefined };
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(parts).toString('utf8') || '{}') as Record<string, unknown>;
      fake.seen.push({ url: req.url ?? '', headers: req.headers, body });
      const path = (req.url ?? '').split('?')[0]!;
      const failure = fake.fail;
      fake.fail = null;
      if (failure) {
        res.writeHead(failure.status, { 'content-type': 'application/json', ...failure.headers });
        res.end(JSON.stringify(failure.body));
      } else if (path.endsWith('/chat/completions') && body.stream === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const chunk = (extra: Record<string, unknown>) => `data: ${JSON.stringify({ id: 'chatcmpl-az', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o', ...extra })}\n\n`;
        res.write(chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }));
        res.write(chunk({ choices: [{ index: 0, delta: { content: 'Hi from Azure' }, finish_reason: null }] }));
        res.write(chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }));
        res.write(chunk({ choices: [], usage: { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 } }));
        res.end('data: [DONE]\n\n');
      } else if (path.endsWith('/chat/completions')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ id: 'chatcmpl-az', object: 'chat.completion', created: 1, model: 'gpt-4o', choices: [{ index: 0, message: { role: 'assistant', content: 'Hi from Azure' }, finish_reason: 'stop' }], usage: { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 } }));
      } else if (path.endsWith('/embeddings')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data: [{ object: 'embedding', index: 0, embedding: [0.5, 0.5] }], model: 'emb', usage: { prompt_tokens: 2, total_tokens: 2 } }));
      } else {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { code: 'DeploymentNotFound', message: 'not here' } }));
      }
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.close = async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  };
  return fake;
}

describe('azure-openai provider', () => {
  let t: TestApp;
  let azure: AzureFake;
  const KEY = 'azure-secret-key';

  const chat = (body: Record<string, unknown>) => call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/chat/completions', payload: body });
  const last = () => azure.seen[azure.seen.length - 1]!;
  const azureModel = (provider: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    registerModel(t, { provider: { type: 'azure-openai', baseUrl: azure.origin, apiKey: KEY, ...provider }, upstreamModel: 'gpt-4o', ...extra });

  beforeAll(async () => {
    azure = await startAzure();
    t = await createTestApp({ env: { WAYGATE_UPSTREAM_RETRIES: '0' } });
  });

  afterAll(async () => {
    await t?.close();
    await azure?.close();
  });

  it('requires provider.baseUrl when the model is created', async () => {
    const res = await call(t.app, t.adminSession, {
      method: 'POST',
      url: '/api/models',
      payload: { key: 'azure-no-base', provider: { type: 'azure-openai', apiKey: KEY }, upstreamModel: 'gpt-4o', capabilities: ['chat'] },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/baseUrl/);
    const list = await call(t.app, t.adminSession, { method: 'GET', url: '/api/models' });
    expect(list.json().models.map((m: { key: string }) => m.key)).not.toContain('azure-no-base');
  });

  it('calls /openai/deployments/<deployment>/chat/completions?api-version=<version> with an api-key header', async () => {
    const model = await azureModel({ deployment: 'prod-gpt4o', apiVersion: '2024-06-01', headers: { 'x-team': 'blue' } });
    const res = await chat(chatBody(model));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ id: 'chatcmpl-az', choices: [{ message: { content: 'Hi from Azure' } }], usage: { total_tokens: 7 } });
    expect(last().url).toBe('/openai/deployments/prod-gpt4o/chat/completions?api-version=2024-06-01');
    expect(last().headers['api-key']).toBe(KEY);
    expect(last().headers.authorization).toBeUndefined();
    expect(last().headers['x-team']).toBe('blue');
    expect(last().body).toMatchObject({ model: 'gpt-4o', messages: [{ role: 'user', content: 'Say hello' }] });
  });

  it('defaults the deployment to the upstream model and the api-version to 2024-10-21', async () => {
    const model = await azureModel({});
    expect((await chat(chatBody(model))).statusCode).toBe(200);
    expect(last().url).toBe('/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21');
  });

  it('encodes the deployment and api-version, and joins a baseUrl with a path or a trailing slash', async () => {
    const odd = await azureModel({ deployment: 'my dep/x?y', apiVersion: '2024-10-01-preview&z=1' });
    expect((await chat(chatBody(odd))).statusCode).toBe(200);
    expect(last().url).toBe('/openai/deployments/my%20dep%2Fx%3Fy/chat/completions?api-version=2024-10-01-preview%26z%3D1');
    const slash = await azureModel({ baseUrl: `${azure.origin}/` });
    expect((await chat(chatBody(slash))).statusCode).toBe(200);
    expect(last().url).toBe('/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21');
    const prefixed = await azureModel({ baseUrl: `${azure.origin}/gateway/` });
    expect((await chat(chatBody(prefixed))).statusCode).toBe(200);
    expect(last().url).toBe('/gateway/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21');
  });

  it('streams from the same deployment URL, always asking for usage', async () => {
    const model = await azureModel({ deployment: 'stream-dep' });
    const res = await chat(chatBody(model, { stream: true }));
    expect(res.statusCode, res.body).toBe(200);
    expect(last().url).toBe('/openai/deployments/stream-dep/chat/completions?api-version=2024-10-21');
    expect(last().headers.accept).toBe('text/event-stream');
    expect(last().body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    const frames = res.body.split('\n\n').filter((f) => f !== '');
    expect(frames.at(-1)).toBe('data: [DONE]');
    // The client did not ask for usage, so the usage chunk Waygate asked for is not forwarded.
    expect(frames.some((f) => f.includes('"usage"'))).toBe(false);
    expect(frames.some((f) => f.includes('Hi from Azure'))).toBe(true);
  });

  it('calls /embeddings on the deployment', async () => {
    const model = await azureModel({ deployment: 'emb-dep' }, { upstreamModel: 'text-embedding-3-small', capabilities: ['embeddings'] });
    const res = await call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/embeddings', payload: { model, input: 'hello' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data[0].embedding).toEqual([0.5, 0.5]);
    expect(last().url).toBe('/openai/deployments/emb-dep/embeddings?api-version=2024-10-21');
    expect(last().headers['api-key']).toBe(KEY);
  });

  it("passes Azure's 429 through with its body and Retry-After", async () => {
    const model = await azureModel({});
    azure.fail = { status: 429, body: { error: { code: '429', message: 'Rate limit of the deployment reached' } }, headers: { 'retry-after': '3' } };
    const res = await chat(chatBody(model));
    expect(res.statusCode).toBe(429);
    expect(res.json().error.message).toBe('Rate limit of the deployment reached');
    expect(res.headers['retry-after']).toBe('3');
  });

  it('sends no api-key header when the model has no key', async () => {
    const model = await azureModel({ apiKey: null });
    expect((await chat(chatBody(model))).statusCode).toBe(200);
    expect(last().headers['api-key']).toBeUndefined();
  });
});

describe('azure-openai against the OpenAI-shaped fake', () => {
  let t: TestApp;
  let fake: FakeUpstream;

  beforeAll(async () => {
    fake = await startFakeOpenAi();
    t = await createTestApp({ env: { WAYGATE_UPSTREAM_RETRIES: '0' } });
  });

  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  it('uses the Azure path under the base URL and passes the 404 of an unknown path through', async () => {
    const model = await registerModel(t, { provider: { type: 'azure-openai', baseUrl: fake.baseUrl, apiKey: 'k1', deployment: 'd1' }, upstreamModel: 'gpt-4o' });
    const res = await call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody(model) });
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]!.path).toBe('/v1/openai/deployments/d1/chat/completions');
    expect(fake.requests[0]!.headers['api-key']).toBe('k1');
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toMatchObject({ message: 'no route /v1/openai/deployments/d1/chat/completions', type: 'invalid_request_error' });
  });
});
