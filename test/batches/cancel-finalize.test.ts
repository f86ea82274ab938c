import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BACKENDS, call, createTestApp, type TestApp } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { registerFakeModel } from '../helpers/inference.js';
import { BATCHES, CHAT, chatLines, countsAgree, createBatch, itemsOf, resultsOf, waitForBatch } from './support.js';

const FILES = '/api/client/v1/files/buckets';
const cancel = (t: TestApp, id: string) => call(t.app, t.ownerToken, { method: 'POST', url: `${BATCHES}/${id}/cancel` });

/** Polls until the batch has an item running (bounded). */
async function waitForRunning(t: TestApp, id: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if ((await itemsOf(t, id, '?status=running')).length > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no item of ${id} started running`);
}

describe.each(BACKENDS)('cancelling and finalizing batches on %s', (backend) => {
  let t: TestApp;
  let fake: FakeUpstream;
  let model: string;

  beforeAll(async () => {
    t = await createTestApp({ backend, env: { WAYGATE_BATCH_CONCURRENCY: '1', WAYGATE_UPSTREAM_RETRIES: '0' } });
    fake = await startFakeOpenAi();
    model = await registerFakeModel(t, fake);
    expect((await call(t.app, t.ownerToken, { method: 'POST', url: FILES, payload: { key: 'results' } })).statusCode).toBe(201);
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });
  beforeEach(() => {
    fake.requests.length = 0;
  });

  it('cancel drains pending items as cancelled without running them; the running one finishes; then cancelled', async () => {
    fake.queue({ delayMs: 400 });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 10) });
    await waitForRunning(t, created.id);
    const res = await cancel(t, created.id);
    expect(res.statusCode, res.body).toBe(200);
    // Interface 3.1: in_progress -> cancelling; the pending items are already drained, the running one is not. (The
    // worker had also claimed the next item ahead of its slot; that one goes back and is drained right after.)
    expect(res.json()).toMatchObject({ id: created.id, object: 'batch', status: 'cancelling', cancelled_at: null, completed_at: null, request_counts: { total: 10, completed: 0, failed: 0 } });
    expect(res.json().request_counts.cancelled).toBeGreaterThanOrEqual(8);
    await countsAgree(t, created.id);

    const done = await waitForBatch(t, created.id, ['cancelled']);
    expect(done).toMatchObject({ status: 'cancelled', completed_at: null, request_counts: { total: 10, completed: 1, failed: 0, cancelled: 9 }, usage: { total_tokens: 15 } });
    expect(done.cancelled_at).toBeGreaterThanOrEqual(done.created_at);
    await countsAgree(t, created.id);
    expect(fake.requests).toHaveLength(1);

    const items = await itemsOf(t, created.id);
    expect(items.map((i) => i.status)).toEqual(['succeeded', ...Array(9).fill('cancelled')]);
    expect(items[5]).toMatchObject({ response_status_code: 0, response_body: null, usage: null, started_at: null, ended_at: expect.any(Number) });
    expect((await itemsOf(t, created.id, '?status=cancelled')).length).toBe(9);
    // Results carry succeeded and failed items only.
    expect((await resultsOf(t, created.id)).lines.map((l) => l.custom_id)).toEqual(['c0']);

    // A terminal batch cannot be cancelled: 400, and nothing changes.
    const again = await cancel(t, created.id);
    expect(again.statusCode).toBe(400);
    expect(again.json().error.message).toMatch(/is cancelled and cannot be cancelled/);
  });

  it('cancelling a batch whose items are all pending goes straight through cancelling to cancelled', async () => {
    fake.queue({ delayMs: 300 });
    const blocker = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 1) });
    await waitForRunning(t, blocker.id);
    // The only slot is taken, so this batch's items all wait.
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 3) });
    const res = await cancel(t, created.id);
    expect(res.json()).toMatchObject({ status: 'cancelling', request_counts: { total: 3, completed: 0 } });
    expect(res.json().request_counts.cancelled).toBeGreaterThanOrEqual(2);
    expect(await waitForBatch(t, created.id, ['cancelled'])).toMatchObject({ request_counts: { total: 3, completed: 0, failed: 0, cancelled: 3 } });
    await waitForBatch(t, blocker.id, ['completed']);
    expect(fake.requests).toHaveLength(1);
  });

  it('a completed batch cannot be cancelled (400); an unknown batch is a 404', async () => {
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 1) });
    await waitForBatch(t, created.id, ['completed']);
    const res = await cancel(t, created.id);
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toBe(`Batch "${created.id}" is completed and cannot be cancelled (only in_progress or validating batches can)`);
    expect((await waitForBatch(t, created.id)).status).toBe('completed');
    const missing = await cancel(t, 'batch_nothere');
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error.type).toBe('not_found_error');
  });

  it('on completion the results are written to the output bucket and output_file names them', async () => {
    fake.queue({}, { status: 400, body: { error: { message: 'bad request', type: 'invalid_request_error' } } });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 3), output_bucket_key: 'results' });
    const batch = await waitForBatch(t, created.id, ['completed']);
    expect(batch.output_file).toEqual({ bucket_key: 'results', object_key: `${created.id}_output.jsonl` });
    const object = await call(t.app, t.ownerToken, { method: 'GET', url: `${FILES}/results/objects/${created.id}_output.jsonl` });
    expect(object.statusCode).toBe(200);
    expect(object.headers['content-type']).toBe('application/jsonl');
    const { res } = await resultsOf(t, created.id);
    expect(object.body).toBe(res.body);
    expect(object.body.trim().split('\n')).toHaveLength(3);
  });

  it('a batch whose output cannot be written is failed, with the reason, and its results stay readable', async () => {
    const doomed = await call(t.app, t.ownerToken, { method: 'POST', url: FILES, payload: { key: 'doomed' } });
    expect(doomed.statusCode).toBe(201);
    fake.queue({ delayMs: 300 });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 1), output_bucket_key: 'doomed' });
    // Buckets cannot be deleted through the API yet; an operator removing it under the running batch can.
    await t.ctx.database.db.deleteFrom('file_buckets').where('key', '=', 'doomed').execute();
    const batch = await waitForBatch(t, created.id);
    expect(batch).toMatchObject({ status: 'failed', completed_at: null, output_file: { bucket_key: 'doomed', object_key: null }, request_counts: { total: 1, completed: 1 } });
    expect(batch.error_message).toMatch(/The results could not be written to bucket "doomed": Bucket "doomed" not found/);
    expect((await resultsOf(t, created.id)).lines).toHaveLength(1);
    const res = await cancel(t, created.id);
    expect(res.statusCode).toBe(400);
  });
});
