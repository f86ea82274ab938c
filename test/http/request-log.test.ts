import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTestApp, type TestApp } from '../helpers/app.js';
import { chatBody, registerModel } from '../helpers/models.js';

/**
 * Log lines of a request carry its id: the one `request` line every request ends with (written through the root
 * logger) and what the request's own logger writes (made only when something logs through it).
 */
interface Line {
  msg?: string;
  requestId?: string;
  statusCode?: number;
  url?: string;
}

describe('request log lines', () => {
  let t: TestApp;
  const lines = () => t.logs.map((line) => JSON.parse(line) as Line);
  const chat = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/chat/completions', payload: body, headers });

  beforeAll(async () => {
    t = await createTestApp({ env: { WAYGATE_UPSTREAM_RETRIES: '0', LOG_LEVEL: 'info' } });
  });
  afterAll(async () => t?.close());

  it('ends every request with one line naming its id, status and path', async () => {
    const res = await call(t.app, t.ownerToken, { method: 'GET', url: '/api/client/v1/models', headers: { 'x-request-id': 'log-line-1' } });
    expect(res.statusCode).toBe(200);
    const mine = lines().filter((l) => l.requestId === 'log-line-1');
    expect(mine).toEqual([expect.objectContaining({ msg: 'request', statusCode: 200, url: '/api/client/v1/models' })]);
  });

  it('names the id a body gave (request_id) when the header gave none', async () => {
    const res = await chat({ ...chatBody('local-chat'), request_id: 'log-line-2' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['x-request-id']).toBe('log-line-2');
    expect(lines().filter((l) => l.msg === 'request' && l.requestId === 'log-line-2')).toHaveLength(1);
  });

  it("writes what the request's own logger logs (a failed upstream) with the request's id", async () => {
    const model = await registerModel(t, { provider: { type: 'mock', mock: { failureRate: 1 } }, upstreamModel: 'mock-1' });
    const res = await chat(chatBody(model), { 'x-request-id': 'log-line-3' });
    expect(res.statusCode).toBe(502);
    const mine = lines().filter((l) => l.requestId === 'log-line-3');
    expect(mine.map((l) => l.msg)).toEqual(['upstream model failed', 'request']);
  });
});
