import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BACKENDS, call, createTestApp, createToken, type TestApp } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { registerFakeModel, usageRowsOf } from '../helpers/inference.js';
import { CHAT, chatLines, chatRequest, countsAgree, createBatch, EMBEDDINGS, itemsOf, resultsOf, waitForBatch } from './support.js';

/** Requests the fake saw for one batch item (Waygate sends its request id upstream). */
function callsOf(fake: FakeUpstream, itemId: string): number {
  return fake.requests.filter((r) => r.headers['x-request-id'] === `batch_req_${itemId}`).length;
}

describe.each(BACKENDS)('running batches on %s', (backend) => {
  let t: TestApp;
  let fake: FakeUpstream;
  let model: string;

  beforeAll(async () => {
    // One item at a time, no retries inside the inference core and short batch retry waits: scripted upstream
    // answers land on the items in index order, and every upstream call is counted exactly.
    t = await createTestApp({
      backend,
      env: { WAYGATE_BATCH_CONCURRENCY: '1', WAYGATE_UPSTREAM_RETRIES: '0', WAYGATE_BATCH_RETRY_DELAY_MS: '20', WAYGATE_UPSTREAM_TIMEOUT_MS: '1000' },
    });
    fake = await startFakeOpenAi();
    model = await registerFakeModel(t, fake, { pricing: { inputPer1M: 1, outputPer1M: 2, currency: 'USD' } });
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });
  beforeEach(() => {
    fake.requests.length = 0;
  });

  it('runs every chat line through the model and records status, body, usage and times per item', async () => {
    const token = await createToken(t, { name: 'batch-submitter' });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 4) }, token.value);
    const batch = await waitForBatch(t, created.id, ['completed'], token.value);
    expect(batch).toMatchObject({
      status: 'completed',
      request_counts: { total: 4, completed: 4, failed: 0, cancelled: 0 },
      usage: { input_tokens: 40, output_tokens: 20, total_tokens: 60 },
      error_message: null,
      cancelled_at: null,
    });
    expect(batch.completed_at).toBeGreaterThanOrEqual(batch.created_at);
    await countsAgree(t, batch.id);

    const items = await itemsOf(t, batch.id);
    expect(items).toHaveLength(4);
    for (const [index, item] of items.entries()) {
      expect(item).toMatchObject({
        index,
        custom_id: `c${index}`,
        status: 'succeeded',
        response_status_code: 200,
        error_message: null,
        usage: { input_tokens: 10, output_tokens: 5, total_tokens: 15 },
        response_body: { object: 'chat.completion', choices: [{ message: { content: 'Hello from the fake upstream' } }] },
      });
      expect(item.started_at).toEqual(expect.any(Number));
      expect(item.ended_at as number).toBeGreaterThanOrEqual(item.started_at as number);
      // Exactly one upstream call per item, non-streaming, for the upstream model.
      expect(callsOf(fake, item.id as string)).toBe(1);
    }
    expect(fake.requests.every((r) => r.body.model === 'gpt-upstream' && r.body.stream !== true)).toBe(true);
    expect(fake.requests.map((r) => (r.body.messages as { content: string }[])[0]!.content)).toEqual(['line 0', 'line 1', 'line 2', 'line 3']);

    // Each item is metered like a direct call: service "batches", the submitting token, the item's request id.
    const usage = (await usageRowsOf(t, model)).filter((row) => row.service === 'batches' && row.token_id === token.id);
    expect(usage.map((row) => row.request_id).sort()).toEqual(items.map((item) => `batch_req_${item.id}`).sort());
    expect(usage.every((row) => row.status === 200 && row.input_tokens === 10 && row.output_tokens === 5 && row.endpoint === '/chat/completions')).toBe(true);
    expect(usage[0]!.cost).toBeCloseTo((10 * 1 + 5 * 2) / 1e6, 12);
  });

  it('writes result lines exactly per interface 2.3, one per item in index order', async () => {
    const created = await createBatch(t, { endpoint: CHAT, requests: [{ custom_id: 'first', body: chatRequest(model) }, { body: chatRequest(model) }] });
    await waitForBatch(t, created.id, ['completed']);
    const items = await itemsOf(t, created.id);
    const { res, lines } = await resultsOf(t, created.id);
    expect(res.headers['content-type']).toBe('application/jsonl');
    expect(lines).toEqual([
      { id: `batch_req_${items[0]!.id}`, custom_id: 'first', response: { status_code: 200, body: items[0]!.response_body }, error: null },
      { id: `batch_req_${items[1]!.id}`, custom_id: null, response: { status_code: 200, body: items[1]!.response_body }, error: null },
    ]);
    expect(Object.keys(lines[0]!)).toEqual(['id', 'custom_id', 'response', 'error']);
  });

  it('runs embeddings lines', async () => {
    const created = await createBatch(t, { endpoint: EMBEDDINGS, requests: [{ custom_id: 'e', body: { model, input: ['a', 'b'] } }, { body: { model: 'local-embed', input: 'hello' } }] });
    const batch = await waitForBatch(t, created.id, ['completed']);
    expect(batch.request_counts).toEqual({ total: 2, completed: 2, failed: 0, cancelled: 0 });
    const { lines } = await resultsOf(t, created.id);
    expect(lines[0]!.response.body).toMatchObject({ object: 'list', data: [{ embedding: [0.1, 0.2, 0.3] }, { index: 1 }] });
    expect((lines[1]!.response.body as { data: { embedding: number[] }[] }).data[0]!.embedding).toHaveLength(384);
    expect(fake.requests.map((r) => r.path)).toEqual(['/v1/embeddings']);
  });

  it("an upstream 4xx fails that item with the upstream's status and message; the others succeed and the batch completes", async () => {
    fake.queue({}, { status: 400, body: { error: { message: 'context length exceeded', type: 'invalid_request_error', code: 'context_length_exceeded' } } });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 3) });
    const batch = await waitForBatch(t, created.id);
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 3, completed: 2, failed: 1, cancelled: 0 }, usage: { input_tokens: 20, output_tokens: 10 } });
    await countsAgree(t, batch.id);
    const items = await itemsOf(t, batch.id);
    expect(items[1]).toMatchObject({ status: 'failed', response_status_code: 400, response_body: null, usage: null, error_message: 'context length exceeded' });
    expect(callsOf(fake, items[1]!.id as string)).toBe(1);
    const { lines } = await resultsOf(t, batch.id);
    expect(lines[1]).toEqual({ id: `batch_req_${items[1]!.id}`, custom_id: 'c1', response: { status_code: 400, body: null }, error: { code: 'failed', message: 'context length exceeded' } });
    expect((await resultsOf(t, batch.id, '?status=failed')).lines.map((l) => l.custom_id)).toEqual(['c1']);
    expect((await resultsOf(t, batch.id, '?status=succeeded')).lines.map((l) => l.custom_id)).toEqual(['c0', 'c2']);
  });

  it("an upstream message holding a NUL is stored with U+FFFD in its place (PostgreSQL text refuses NUL), and the batch completes", async () => {
    fake.queue({ status: 400, body: { error: { message: 'bad\u0000input', type: 'invalid_request_error' } } });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 2) });
    const batch = await waitForBatch(t, created.id);
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 2, completed: 1, failed: 1, cancelled: 0 } });
    await countsAgree(t, batch.id);
    expect((await itemsOf(t, batch.id))[0]).toMatchObject({ status: 'failed', response_status_code: 400, error_message: 'bad\uFFFDinput' });
  });

  it("a pretty-printed answer is stored on one line, the upstream's text otherwise kept", async () => {
    const answer = { id: 'c', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'two\nlines' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } };
    fake.queue({ raw: JSON.stringify(answer, null, 2).replace(/\n/g, '\r\n') });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 1) });
    await waitForBatch(t, created.id);
    const { res, lines } = await resultsOf(t, created.id);
    expect(res.body.trimEnd().split('\n')).toHaveLength(1);
    expect(lines[0]!.response!.body).toEqual(answer);
  });

  // Regression: flattening the answer with JSON.stringify(JSON.parse(...)) overflowed the stack outside the item's
  // error handling, so the item stayed running until its lease ran out, ran (and was billed) three times, and failed
  // with a wrong reason; its items page was a 500.
  it('an answer nested too deep to handle fails its item as a malformed answer, and the batch reads back', async () => {
    const deep = `{"id":"c","object":"chat.completion","choices":[],"x":\n${'['.repeat(20_000)}${']'.repeat(20_000)}}`;
    fake.queue({ raw: deep }, { raw: deep }, { raw: deep });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 1) });
    const batch = await waitForBatch(t, created.id);
    expect(batch.request_counts).toEqual({ total: 1, completed: 0, failed: 1, cancelled: 0 });
    const [item] = await itemsOf(t, batch.id);
    expect(item).toMatchObject({ status: 'failed', response_status_code: 502, error_message: expect.stringMatching(/nested more than 1000 levels/) });
    expect(t.logs.filter((line) => (JSON.parse(line) as { level: number }).level >= 50)).toEqual([]);
  });

  it('transient upstream failures (5xx, a timeout) are retried and the item succeeds', async () => {
    fake.queue({ status: 500 }, { hang: true });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 1) });
    const batch = await waitForBatch(t, created.id);
    expect(batch.request_counts).toEqual({ total: 1, completed: 1, failed: 0, cancelled: 0 });
    const [item] = await itemsOf(t, batch.id);
    expect(callsOf(fake, item!.id as string)).toBe(3);
    const row = await t.ctx.database.db.selectFrom('batch_items').select('attempts').where('id', '=', item!.id as string).executeTakeFirstOrThrow();
    expect(Number(row.attempts)).toBe(3);
  });

  it('an upstream that keeps failing fails the item after 3 attempts (502)', async () => {
    fake.queue({ status: 500 }, { status: 502 }, { status: 500 });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 1) });
    const batch = await waitForBatch(t, created.id);
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 1, completed: 0, failed: 1 } });
    const [item] = await itemsOf(t, batch.id);
    expect(item).toMatchObject({ status: 'failed', response_status_code: 502, error_message: expect.stringMatching(/Upstream model failed with status 500/) });
    expect(callsOf(fake, item!.id as string)).toBe(3);
  });

  it("an upstream 429 (with OpenAI's rate_limit_exceeded code) is a transient failure: 3 attempts, then failed with 429", async () => {
    const limited = { status: 429, body: { error: { message: 'Rate limit reached for requests', type: 'requests', code: 'rate_limit_exceeded' } } };
    fake.queue(limited, limited, limited);
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 1) });
    const batch = await waitForBatch(t, created.id);
    expect(batch.request_counts).toEqual({ total: 1, completed: 0, failed: 1, cancelled: 0 });
    const [item] = await itemsOf(t, batch.id);
    expect(item).toMatchObject({ status: 'failed', response_status_code: 429, error_message: 'Rate limit reached for requests' });
    expect(callsOf(fake, item!.id as string)).toBe(3);
  });

  it("an item refused for the token's budget fails with 429 and never reaches the upstream", async () => {
    const token = await createToken(t, { name: 'tiny-budget', budget: { maxTokens: 1, period: 'total' } });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 3) }, token.value);
    const batch = await waitForBatch(t, created.id, ['completed'], token.value);
    expect(batch.request_counts).toEqual({ total: 3, completed: 0, failed: 3, cancelled: 0 });
    const { lines } = await resultsOf(t, batch.id, '', token.value);
    expect(lines.map((l) => [l.response.status_code, l.error?.code])).toEqual([[429, 'failed'], [429, 'failed'], [429, 'failed']]);
    expect(lines[0]!.error!.message).toMatch(/budget/);
    expect(fake.requests).toHaveLength(0);
  });

  // An item larger than the whole tokens-per-minute limit would wait for a minute that never comes.
  it("an item larger than the token's whole tokens-per-minute limit fails with 429 instead of waiting", async () => {
    const token = await createToken(t, { name: 'tiny-tpm', rateLimit: { tpm: 5 } });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 2) }, token.value);
    const batch = await waitForBatch(t, created.id, ['completed'], token.value);
    expect(batch.request_counts).toEqual({ total: 2, completed: 0, failed: 2, cancelled: 0 });
    const { lines } = await resultsOf(t, batch.id, '', token.value);
    expect(lines[0]!.error!.message).toMatch(/5 tokens per minute is smaller than this call needs/);
    expect(fake.requests).toHaveLength(0);
  });

  it("the token's budget is shared with its direct calls: a batch cannot spend past it", async () => {
    // 15 tokens a call (10 in, 5 out); room for 3 calls counting the reserved output allowance of 5 at most.
    const token = await createToken(t, { name: 'shared-budget', budget: { maxTokens: 45, period: 'total' } });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 6).map((l) => ({ ...l, body: { ...l.body, max_tokens: 5 } })) }, token.value);
    const batch = await waitForBatch(t, created.id, ['completed'], token.value);
    const spent = batch.usage.total_tokens;
    expect(spent).toBeLessThanOrEqual(45);
    expect(batch.request_counts.completed).toBeGreaterThanOrEqual(1);
    expect(batch.request_counts.completed + batch.request_counts.failed).toBe(6);
    expect(fake.requests).toHaveLength(batch.request_counts.completed);
  });

  it("an item over the token's rate limit waits as pending (its attempt not counted) instead of failing", async () => {
    const token = await createToken(t, { name: 'rpm-2', rateLimit: { rpm: 2 } });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 3) }, token.value);
    for (let i = 0; i < 200; i++) {
      const items = await itemsOf(t, created.id, '', token.value);
      if (items.filter((item) => item.status === 'succeeded').length === 2 && items[2]!.status === 'pending') break;
      await new Promise((r) => setTimeout(r, 25));
    }
    const items = await itemsOf(t, created.id, '', token.value);
    expect(items.map((item) => item.status)).toEqual(['succeeded', 'succeeded', 'pending']);
    const row = await t.ctx.database.db.selectFrom('batch_items').select(['attempts', 'run_after']).where('id', '=', items[2]!.id as string).executeTakeFirstOrThrow();
    expect(Number(row.attempts)).toBe(0);
    expect(Number(row.run_after)).toBeGreaterThan(Date.now());
    expect(fake.requests).toHaveLength(2);
    expect((await waitForBatch(t, created.id, ['in_progress'], token.value)).request_counts).toMatchObject({ completed: 2, failed: 0 });
    const cancelled = await call(t.app, token.value, { method: 'POST', url: `/api/client/v1/batches/${created.id}/cancel` });
    expect(cancelled.statusCode).toBe(200);
    expect((await waitForBatch(t, created.id, ['cancelled'], token.value)).request_counts).toEqual({ total: 3, completed: 2, failed: 0, cancelled: 1 });
  });

  it('a model deleted after the batch was accepted fails its items with 404', async () => {
    const doomed = await registerFakeModel(t, fake);
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(doomed, 1) });
    // Stop the race with the worker: the delete lands before or after the item ran, and both ends are valid.
    const deleted = await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/models/${doomed}` });
    expect(deleted.statusCode).toBe(200);
    const batch = await waitForBatch(t, created.id);
    const [item] = await itemsOf(t, batch.id);
    if (item!.status === 'failed') expect(item).toMatchObject({ response_status_code: 404, error_message: `Model "${doomed}" not found` });
    else expect(item!.status).toBe('succeeded');
  });

  it('a huge batch does not starve a small one submitted after it', async () => {
    // Each call of the big batch takes 25 ms: 60 of them, one at a time, take 1.5 s at least.
    fake.queue(...Array.from({ length: 60 }, () => ({ delayMs: 25 })));
    const big = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 60) });
    await waitForStarted(t, big.id);
    const small = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 2) });
    const smallDone = await waitForBatch(t, small.id, ['completed']);
    expect(smallDone.request_counts.completed).toBe(2);
    const bigNow = (await waitForBatch(t, big.id, ['in_progress', 'completed']));
    // Round robin: the small batch's two items ran within the next few of the big one's.
    expect(bigNow.status).toBe('in_progress');
    expect(bigNow.request_counts.completed).toBeLessThan(20);
    await waitForBatch(t, big.id, ['completed']);
  });
});

/** Waits until at least one item of the batch has finished. */
async function waitForStarted(t: TestApp, id: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const batch = (await call(t.app, t.ownerToken, { method: 'GET', url: `/api/client/v1/batches/${id}` })).json();
    if (batch.request_counts.completed + batch.request_counts.failed > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`batch ${id} never started`);
}
