import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BatchStore } from '../../src/areas/batches/store.js';
import { MAX_ATTEMPTS } from '../../src/areas/batches/worker.js';
import { BACKENDS, call, createTestApp, type TestApp } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { registerFakeModel } from '../helpers/inference.js';
import { CHAT, chatLines, countsAgree, createBatch, getBatch, itemsOf, resultsOf, waitForBatch } from './support.js';

const storeOf = (t: TestApp) => new BatchStore(t.ctx.database.db, t.ctx.database.dialect, t.ctx.database.transaction);
const readiness = async (t: TestApp) => (await t.app.inject({ method: 'GET', url: '/api/health/ready' })).json().checks.queue;

describe.each(BACKENDS)('leases, take-over and shutdown on %s', (backend) => {
  let fake: FakeUpstream;
  let t: TestApp | undefined;

  beforeAll(async () => {
    fake = await startFakeOpenAi();
  });
  afterAll(async () => fake?.close());
  afterEach(async () => {
    await t?.close();
    t = undefined;
    fake.requests.length = 0;
  });

  /** An app whose worker is not started yet, with a model on the fake upstream. */
  async function appWithoutWorker(env: Record<string, string> = {}): Promise<{ t: TestApp; model: string }> {
    t = await createTestApp({ backend, noWorkers: true, env: { WAYGATE_UPSTREAM_RETRIES: '0', ...env } });
    return { t, model: await registerFakeModel(t, fake) };
  }

  it('items held by a worker that died are taken over once its lease has run out, and each runs to one result', async () => {
    const { t, model } = await appWithoutWorker();
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 5) });
    const store = storeOf(t);
    const now = Date.now();
    // A worker that crashed: it took three items, its lease ran out a moment ago, it never reported back.
    const held = await store.claimPending(created.id, 'wrk_dead', 3, now, now - 1);
    expect(held.map((item) => item.index)).toEqual([0, 1, 2]);
    expect((await itemsOf(t, created.id, '?status=running')).length).toBe(3);

    await t.ctx.startWorkers();
    const batch = await waitForBatch(t, created.id, ['completed']);
    expect(batch.request_counts).toEqual({ total: 5, completed: 5, failed: 0, cancelled: 0 });
    await countsAgree(t, batch.id);
    const { lines } = await resultsOf(t, batch.id);
    expect(lines.map((line) => line.custom_id)).toEqual(['c0', 'c1', 'c2', 'c3', 'c4']);
    const rows = await t.ctx.database.db.selectFrom('batch_items').select(['idx', 'attempts', 'locked_by']).where('batch_id', '=', batch.id).orderBy('idx').execute();
    // The taken-over items counted their second attempt; all were finished by the live worker.
    expect(rows.map((r) => Number(r.attempts))).toEqual([2, 2, 2, 1, 1]);
    expect(new Set(rows.map((r) => r.locked_by))).toEqual(new Set([t.ctx.batchWorker!.id]));
    expect(fake.requests).toHaveLength(5);
  });

  it(`an item interrupted ${MAX_ATTEMPTS} times fails instead of running again`, async () => {
    const { t, model } = await appWithoutWorker();
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 1) });
    const [item] = await storeOf(t).claimPending(created.id, 'wrk_dead', 1, Date.now(), Date.now() - 1);
    await t.ctx.database.db.updateTable('batch_items').set({ attempts: MAX_ATTEMPTS }).where('id', '=', item!.id).execute();
    await t.ctx.startWorkers();
    const batch = await waitForBatch(t, created.id, ['completed']);
    expect(batch.request_counts).toEqual({ total: 1, completed: 0, failed: 1, cancelled: 0 });
    const [failed] = await itemsOf(t, batch.id);
    expect(failed).toMatchObject({ status: 'failed', response_status_code: 500, error_message: `The item was attempted ${MAX_ATTEMPTS} times, and its worker stopped during the last attempt` });
    expect(fake.requests).toHaveLength(0);
  });

  it('an outcome from a worker that lost its lease is ignored: nothing is recorded or counted twice', async () => {
    const { t, model } = await appWithoutWorker();
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 1) });
    const store = storeOf(t);
    const now = Date.now();
    const [first] = await store.claimPending(created.id, 'wrk_slow', 1, now, now - 1);
    const [second] = await store.claimExpired('wrk_fast', 10, now, now + 60_000);
    expect(second!.id).toBe(first!.id);
    const outcome = (statusCode: number) => ({
      id: first!.id, batchId: created.id, status: 'succeeded' as const, statusCode, responseBody: '{"answer":1}', errorMessage: null, usage: { inputTokens: 3, outputTokens: 4 }, startedAt: Date.now(), endedAt: Date.now(),
    });
    expect(await store.complete('wrk_fast', [outcome(200)])).toEqual([created.id]);
    // The slow worker reports late: its outcome does not count, and the item keeps the first result.
    expect(await store.complete('wrk_slow', [outcome(201)])).toEqual([]);
    expect(await store.complete('wrk_fast', [outcome(202)])).toEqual([]);
    const batch = (await getBatch(t, created.id)).json();
    expect(batch.request_counts).toEqual({ total: 1, completed: 1, failed: 0, cancelled: 0 });
    expect(batch.usage).toEqual({ input_tokens: 3, output_tokens: 4, total_tokens: 7 });
    const [item] = await itemsOf(t, created.id);
    expect(item).toMatchObject({ status: 'succeeded', response_status_code: 200, response_body: { answer: 1 } });
  });

  it('a worker never takes back an expired item it still runs itself (its heartbeat was only late)', async () => {
    const { t, model } = await appWithoutWorker();
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 2) });
    const store = storeOf(t);
    const now = Date.now();
    const held = await store.claimPending(created.id, 'wrk_late', 2, now, now - 1);
    const [inHand, lost] = held.map((item) => item.id);
    const retaken = await store.claimExpired('wrk_late', 10, now, now + 60_000, [inHand!]);
    expect(retaken.map((item) => item.id)).toEqual([lost]);
  });

  it("a cancelled batch's items handed back to pending are never claimed again, only drained", async () => {
    const { t, model } = await appWithoutWorker();
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 4) });
    const store = storeOf(t);
    const held = await store.claimPending(created.id, 'wrk_ahead', 2, Date.now(), Date.now() + 60_000);
    const res = await call(t.app, t.ownerToken, { method: 'POST', url: `/api/client/v1/batches/${created.id}/cancel` });
    expect(res.json()).toMatchObject({ status: 'cancelling', request_counts: { cancelled: 2 } });
    await store.release('wrk_ahead', held.map((item) => item.id), 0, true);
    expect(await store.claimPending(created.id, 'wrk_other', 10, Date.now(), Date.now() + 60_000)).toEqual([]);
    expect(await store.drain(created.id)).toBe(2);
    await countsAgree(t, created.id);
    await t.ctx.startWorkers();
    expect((await waitForBatch(t, created.id, ['cancelled'])).request_counts).toEqual({ total: 4, completed: 0, failed: 0, cancelled: 4 });
    expect(fake.requests).toHaveLength(0);
  });

  it('items a dead worker held when its batch was cancelled are cancelled once its lease runs out, never run again', async () => {
    const { t, model } = await appWithoutWorker();
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 4) });
    const store = storeOf(t);
    // Long enough for the claim and the cancel on a loaded machine: the cancel must come while the lease lasts.
    const leaseEnd = Date.now() + 2_000;
    // A worker took two items and crashed. The cancel leaves its running items to finish while its lease lasts.
    await store.claimPending(created.id, 'wrk_dead', 2, Date.now(), leaseEnd);
    const res = await call(t.app, t.ownerToken, { method: 'POST', url: `/api/client/v1/batches/${created.id}/cancel` });
    expect(res.json()).toMatchObject({ status: 'cancelling', request_counts: { cancelled: 2 } });
    await new Promise((resolve) => setTimeout(resolve, leaseEnd + 10 - Date.now()));
    expect(await store.claimExpired('wrk_other', 10, Date.now(), Date.now() + 60_000)).toEqual([]);
    await t.ctx.startWorkers();
    expect((await waitForBatch(t, created.id, ['cancelled'])).request_counts).toEqual({ total: 4, completed: 0, failed: 0, cancelled: 4 });
    await countsAgree(t, created.id);
    expect(fake.requests).toHaveLength(0);
  });

  it('items whose hand-back failed are let go: their lease runs out and the batch still ends', async () => {
    const { t, model } = await appWithoutWorker({ WAYGATE_BATCH_LEASE_SECONDS: '1', WAYGATE_BATCH_CONCURRENCY: '1' });
    fake.queue({ delayMs: 400 });
    await t.ctx.startWorkers();
    const store = (t.ctx.batchWorker as unknown as { store: BatchStore }).store;
    const release = store.release.bind(store);
    let failures = 0;
    store.release = async (...args) => {
      if (failures++ === 0) throw new Error('the database went away for a moment');
      return release(...args);
    };
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 4) });
    for (let i = 0; i < 200 && (await itemsOf(t, created.id, '?status=running')).length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    // The item claimed ahead of the busy slot is handed back on cancel: that release fails.
    expect((await call(t.app, t.ownerToken, { method: 'POST', url: `/api/client/v1/batches/${created.id}/cancel` })).statusCode).toBe(200);
    const batch = await waitForBatch(t, created.id, ['cancelled']);
    expect(failures).toBeGreaterThanOrEqual(1);
    expect(batch.request_counts.completed + batch.request_counts.cancelled).toBe(4);
    await countsAgree(t, created.id);
  });

  it('a worker stopping does not start finalizations: a batch that finished meanwhile is finalized later', async () => {
    const { t, model } = await appWithoutWorker();
    expect((await call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/files/buckets', payload: { key: 'out' } })).statusCode).toBe(201);
    fake.queue({ delayMs: 300 });
    await t.ctx.startWorkers();
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 1), output_bucket_key: 'out' });
    for (let i = 0; i < 200 && (await itemsOf(t, created.id, '?status=running')).length < 1; i++) await new Promise((r) => setTimeout(r, 10));
    await t.ctx.batchWorker!.stop();
    // The item finished within the grace period and was recorded; the batch waits for a finalizer.
    expect((await itemsOf(t, created.id))[0]).toMatchObject({ status: 'succeeded' });
    expect((await getBatch(t, created.id)).json()).toMatchObject({ status: 'in_progress', request_counts: { completed: 1 } });
    expect(t.logs.filter((line) => JSON.parse(line).level >= 50)).toEqual([]);
    await t.ctx.services.batches.finalize(created.id, 'wrk_next', 30_000);
    expect((await getBatch(t, created.id)).json()).toMatchObject({ status: 'completed', output_file: { bucket_key: 'out', object_key: `${created.id}_output.jsonl` } });
  });

  it('two workers claiming one batch at once never take the same item', async () => {
    const { t, model } = await appWithoutWorker();
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 200) });
    const store = storeOf(t);
    const claims = await Promise.all(
      Array.from({ length: 8 }, (_, worker) => store.claimPending(created.id, `wrk_${worker}`, 30, Date.now(), Date.now() + 60_000)),
    );
    const ids = claims.flat().map((item) => item.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(200);
  });

  it('stopping hands running items back as pending, their attempt not counted, and deregisters the worker', async () => {
    const { t, model } = await appWithoutWorker();
    fake.queue({ hang: true }, { hang: true });
    await t.ctx.startWorkers();
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 2) });
    for (let i = 0; i < 200 && (await itemsOf(t, created.id, '?status=running')).length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect((await itemsOf(t, created.id, '?status=running')).length).toBe(2);
    await t.ctx.batchWorker!.stop(50);
    const rows = await t.ctx.database.db.selectFrom('batch_items').select(['status', 'attempts', 'locked_by']).where('batch_id', '=', created.id).execute();
    expect(rows.map((r) => [r.status, Number(r.attempts), r.locked_by])).toEqual([['pending', 0, null], ['pending', 0, null]]);
    expect(await t.ctx.database.db.selectFrom('batch_workers').select('id').where('id', '=', t.ctx.batchWorker!.id).execute()).toEqual([]);
  });

  it('the queue check reports pending items, the oldest wait and live workers; degraded while nobody works', async () => {
    const { t, model } = await appWithoutWorker();
    expect(await readiness(t)).toMatchObject({ status: 'ok', details: { pending: 0, running: 0, oldestPendingAgeSeconds: 0, liveWorkers: 0 } });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 3) });
    await t.ctx.database.db.updateTable('batches').set({ created_at: Date.now() - 120_000 }).where('id', '=', created.id).execute();
    const waiting = await readiness(t);
    expect(waiting).toMatchObject({ status: 'degraded', message: 'batch items are waiting and no batch worker is alive', details: { pending: 3, running: 0, liveWorkers: 0 } });
    expect(waiting.details.oldestPendingAgeSeconds).toBeGreaterThanOrEqual(119);
    const report = await t.app.inject({ method: 'GET', url: '/api/health/ready' });
    expect(report.statusCode).toBe(200);
    await t.ctx.startWorkers();
    await waitForBatch(t, created.id, ['completed']);
    expect(await readiness(t)).toMatchObject({ status: 'ok', details: { pending: 0, running: 0, oldestPendingAgeSeconds: 0, liveWorkers: 1 } });
  });

  it('items of a batch whose token was revoked fail with 401 instead of running on its budget', async () => {
    const { t, model } = await appWithoutWorker();
    const token = await call(t.app, t.adminSession, { method: 'POST', url: '/api/tokens', payload: { name: 'soon-revoked', projectId: 'default', role: 'member' } });
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 2) }, token.json().value);
    expect((await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/tokens/${token.json().token.id}` })).statusCode).toBe(200);
    await t.ctx.startWorkers();
    const batch = await waitForBatch(t, created.id, ['completed']);
    expect(batch.request_counts).toEqual({ total: 2, completed: 0, failed: 2, cancelled: 0 });
    const { lines } = await resultsOf(t, created.id);
    expect(lines.map((l) => [l.response.status_code, l.error?.message])).toEqual([
      [401, 'The API token that submitted this batch has been revoked'],
      [401, 'The API token that submitted this batch has been revoked'],
    ]);
    expect(fake.requests).toHaveLength(0);
  });

  it('WAYGATE_BATCH_WORKER=false: the instance serves the API but runs nothing', async () => {
    t = await createTestApp({ backend, env: { WAYGATE_BATCH_WORKER: 'false' } });
    expect(t.ctx.batchWorker).toBeNull();
    const created = await createBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 1) });
    await new Promise((r) => setTimeout(r, 300));
    expect((await getBatch(t, created.id)).json().status).toBe('in_progress');
    expect((await readiness(t)).details).toMatchObject({ pending: 1, liveWorkers: 0 });
  });
});
