import http from 'node:http';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext } from '../../src/context.js';
import { listenOnLoopback } from '../helpers/net.js';
import { BACKENDS } from '../helpers/app.js';
import { CLIENT, registerFakeModel, setupInference, type InferenceSetup } from '../helpers/inference.js';
import { chatBody } from '../helpers/models.js';
import { guardrail } from '../guardrails/support.js';

/**
 * Shutdown: a call cut at the end of the grace period (its connection closed by the server) is still metered, and a
 * stream that began before shutdown does not hold the server open once it ends.
 */
describe.each(BACKENDS)('shutdown on %s', (backend) => {
  let s: InferenceSetup;
  let model: string;
  let port: number;

  beforeAll(async () => {
    s = await setupInference({ backend, env: { WAYGATE_UPSTREAM_RETRIES: '0' } });
    model = await registerFakeModel(s.t, s.fake, { upstreamModel: 'gpt-shutdown' });
    port = await listenOnLoopback(s.t.app);
  });
  afterAll(async () => s.close());

  function send(body: Record<string, unknown>, requestId: string): Promise<string> {
    return new Promise((resolve) => {
      const request = http.request({
        host: '127.0.0.1', port, method: 'POST', path: `${CLIENT}/chat/completions`, agent: new http.Agent({ keepAlive: true }),
        headers: { authorization: `Bearer ${s.token.value}`, 'content-type': 'application/json', 'x-request-id': requestId },
      });
      request.once('error', () => resolve('connection closed'));
      request.once('response', (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        res.once('end', () => resolve(text));
        res.once('error', () => resolve('connection closed'));
      });
      request.end(JSON.stringify(body));
    });
  }

  it('a stream that began before shutdown ends, and its keep-alive socket does not hold close(); a call cut by the server is metered', async () => {
    // One stream whose pieces come slowly, and one call whose upstream never answers.
    s.fake.queue({ pieces: ['a', 'b', 'c'], pieceDelayMs: 150 }, { hang: true });
    const upstreamHas = async (n: number) => {
      while (s.fake.requests.length < n) await new Promise((resolve) => setTimeout(resolve, 10));
    };
    const streamed = send({ ...chatBody(model), stream: true }, 'shutdown-stream');
    await upstreamHas(1);
    const cut = send(chatBody(model), 'shutdown-cut');
    await upstreamHas(2);

    s.t.ctx.health.markStopping();
    const closing = s.t.app.close();
    expect(await streamed).toContain('data: [DONE]');
    // What the grace deadline does to the call that is still waiting for its upstream.
    s.t.app.server.closeAllConnections();
    expect(await cut).toBe('connection closed');
    const closedSoon = await Promise.race([closing.then(() => true), new Promise((resolve) => setTimeout(() => resolve(false), 5_000))]);
    expect(closedSoon).toBe(true);

    const reopened = await createContext(s.t.config, { logger: pino({ level: 'silent' }) });
    try {
      const rows = await reopened.database.db.selectFrom('usage_events').select(['request_id', 'status']).where('request_id', 'in', ['shutdown-stream', 'shutdown-cut']).orderBy('request_id').execute();
      expect(rows).toEqual([{ request_id: 'shutdown-cut', status: 499 }, { request_id: 'shutdown-stream', status: 200 }]);
    } finally {
      await reopened.close();
    }
  });
});

// Regression: the guardrail and audit writers closed while calls cut at shutdown were still unwinding, so what those
// calls recorded last (a judge's failed evaluation) was lost.
describe('shutdown with a judge model under way', () => {
  it("a call cut while its guardrail's judge runs has its evaluation written, not lost", async () => {
    const s = await setupInference({ backend: 'sqlite', env: { WAYGATE_UPSTREAM_RETRIES: '0' } });
    try {
      const judge = await registerFakeModel(s.t, s.fake, { capabilities: ['chat'] });
      await guardrail(s.t, { key: 'shutdown-judged', type: 'custom_prompt', config: { rules: 'Be polite.' }, modelKey: judge });
      const judged = await registerFakeModel(s.t, s.fake, { capabilities: ['chat'], guardrails: { input: ['shutdown-judged'] } });
      const port = await listenOnLoopback(s.t.app);
      s.fake.queue({ hang: true });
      const cut = new Promise<void>((resolve) => {
        const request = http.request({ host: '127.0.0.1', port, method: 'POST', path: `${CLIENT}/chat/completions`, headers: { authorization: `Bearer ${s.token.value}`, 'content-type': 'application/json', 'x-request-id': 'shutdown-judge' } });
        request.once('error', () => resolve());
        request.once('response', (res) => res.resume().once('end', resolve).once('error', () => resolve()));
        request.end(JSON.stringify(chatBody(judged)));
      });
      while (s.fake.requests.length < 1) await new Promise((resolve) => setTimeout(resolve, 10));

      s.t.ctx.health.markStopping();
      const closing = s.t.app.close();
      s.t.app.server.closeAllConnections();
      await cut;
      await closing;

      const reopened = await createContext(s.t.config, { logger: pino({ level: 'silent' }) });
      try {
        const evaluations = await reopened.database.db.selectFrom('guardrail_evaluations').select(['request_id', 'guardrail_key']).where('request_id', '=', 'shutdown-judge').execute();
        expect(evaluations).toEqual([{ request_id: 'shutdown-judge', guardrail_key: 'shutdown-judged' }]);
        const usage = await reopened.database.db.selectFrom('usage_events').select(['model', 'status']).where('request_id', '=', 'shutdown-judge').orderBy('model').execute();
        expect(usage.length).toBeGreaterThan(0);
      } finally {
        await reopened.close();
      }
    } finally {
      await s.fake.close();
    }
  });
});
