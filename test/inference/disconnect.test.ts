import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { listenOnLoopback } from '../helpers/net.js';
import { BACKENDS } from '../helpers/app.js';
import { CLIENT, registerFakeModel, setupInference, usageRowsOf, type InferenceSetup } from '../helpers/inference.js';
import { chatBody } from '../helpers/models.js';

/**
 * A client that goes away ends its upstream call (the connection's signal); the other calls of the same keep-alive
 * connection before it, and calls on other connections, are not touched.
 */
describe.each(BACKENDS)('client disconnects on %s', (backend) => {
  let s: InferenceSetup;
  let model: string;
  let port: number;

  beforeAll(async () => {
    s = await setupInference({ backend, env: { WAYGATE_UPSTREAM_RETRIES: '0' } });
    model = await registerFakeModel(s.t, s.fake, { upstreamModel: 'gpt-disconnect' });
    port = await listenOnLoopback(s.t.app);
  });
  afterAll(async () => s.close());

  function chat(agent: http.Agent, requestId: string): { done: Promise<number>; request: http.ClientRequest } {
    const request = http.request({
      host: '127.0.0.1',
      port,
      agent,
      method: 'POST',
      path: `${CLIENT}/chat/completions`,
      headers: { authorization: `Bearer ${s.token.value}`, 'content-type': 'application/json', 'x-request-id': requestId },
    });
    const done = new Promise<number>((resolve, reject) => {
      request.once('error', reject);
      request.once('response', (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? 0));
      });
    });
    request.end(JSON.stringify(chatBody(model)));
    return { done, request };
  }

  async function usageOf(requestId: string) {
    return vi.waitFor(
      async () => {
        const found = (await usageRowsOf(s.t, model)).filter((r) => r.request_id === requestId);
        expect(found).toHaveLength(1);
        return found[0]!;
      },
      { timeout: 10_000, interval: 50 },
    );
  }

  it('after answered calls on one keep-alive connection, a call whose client goes away is aborted upstream and metered 499', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const other = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (const id of ['ka-1', 'ka-2']) expect(await chat(agent, id).done).toBe(200);
      const abortedBefore = s.fake.aborted;
      s.fake.queue({ delayMs: 30_000 });
      const going = chat(agent, 'ka-gone');
      going.done.catch(() => undefined);
      await vi.waitFor(() => expect(s.fake.requests.at(-1)?.headers['x-request-id']).toBe('ka-gone'), { timeout: 5_000, interval: 10 });
      // Another connection's call, in flight while the first client leaves, is answered.
      s.fake.queue({ delayMs: 300 });
      const staying = chat(other, 'other-conn');
      await vi.waitFor(() => expect(s.fake.requests.at(-1)?.headers['x-request-id']).toBe('other-conn'), { timeout: 5_000, interval: 10 });
      going.request.destroy();
      await vi.waitFor(() => expect(s.fake.aborted).toBe(abortedBefore + 1), { timeout: 10_000, interval: 20 });
      expect(await staying.done).toBe(200);
      expect(s.fake.aborted).toBe(abortedBefore + 1);
      // The upstream had the call: its input is billed (chatBody's message is estimated at 10 tokens), never nothing.
      expect(await usageOf('ka-gone')).toMatchObject({ status: 499, streamed: 0, input_tokens: 10, output_tokens: 0 });
      for (const id of ['ka-1', 'ka-2', 'other-conn']) expect(await usageOf(id)).toMatchObject({ status: 200 });
    } finally {
      agent.destroy();
      other.destroy();
    }
  });
});
