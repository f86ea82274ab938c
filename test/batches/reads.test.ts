import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, call, createTestApp, createToken, type TestApp } from '../helpers/app.js';
import { BATCHES, CHAT, chatLines, createBatch, itemsOf, type BatchObject } from './support.js';

describe.each(BACKENDS)('reading batches on %s', (backend) => {
  let t: TestApp;
  /** Oldest first. */
  const created: BatchObject[] = [];
  const get = (url: string, token = t.ownerToken) => call(t.app, token, { method: 'GET', url });

  beforeAll(async () => {
    // No worker: items stay pending, so statuses are set by the test.
    t = await createTestApp({ backend, noWorkers: true });
    for (let i = 0; i < 4; i++) created.push(await createBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 3) }));
    // Give them distinct creation times and statuses the list can filter on.
    const db = t.ctx.database.db;
    for (const [i, batch] of created.entries()) await db.updateTable('batches').set({ created_at: Date.now() - (10 - i) * 1000 }).where('id', '=', batch.id).execute();
    await db.updateTable('batches').set({ status: 'completed' }).where('id', '=', created[1]!.id).execute();
  });
  afterAll(async () => t?.close());

  describe('GET /batches', () => {
    it('lists the project batches newest first as { object: list, data }', async () => {
      const res = await get(BATCHES);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ object: 'list', has_more: false });
      expect(res.json().data.map((b: BatchObject) => b.id)).toEqual(created.map((b) => b.id).reverse());
      expect(res.json().data[0]).toMatchObject({ object: 'batch', request_counts: { total: 3 } });
    });

    it('filters by status; an unknown status is a 400 naming the allowed ones', async () => {
      expect((await get(`${BATCHES}?status=completed`)).json().data.map((b: BatchObject) => b.id)).toEqual([created[1]!.id]);
      expect((await get(`${BATCHES}?status=in_progress`)).json().data).toHaveLength(3);
      expect((await get(`${BATCHES}?status=failed`)).json().data).toEqual([]);
      const bad = await get(`${BATCHES}?status=done`);
      expect(bad.statusCode).toBe(400);
      expect(bad.json().error.message).toMatch(/status must be one of: validating, in_progress, completed, failed, cancelling, cancelled/);
    });

    it('limit is clamped to 1-500, and after pages on from the last id', async () => {
      const page = async (query: string) => (await get(`${BATCHES}?${query}`)).json();
      expect((await page('limit=2')).data.map((b: BatchObject) => b.id)).toEqual([created[3]!.id, created[2]!.id]);
      expect((await page('limit=2')).has_more).toBe(true);
      expect((await page('limit=0')).data).toHaveLength(1);
      expect((await page('limit=-7')).data).toHaveLength(1);
      expect((await page('limit=100000')).data).toHaveLength(4);
      const next = await page(`limit=2&after=${created[2]!.id}`);
      expect(next.data.map((b: BatchObject) => b.id)).toEqual([created[1]!.id, created[0]!.id]);
      expect(next.has_more).toBe(false);
      expect((await get(`${BATCHES}?limit=ten`)).statusCode).toBe(400);
      const unknownAfter = await get(`${BATCHES}?after=batch_nope`);
      expect(unknownAfter.statusCode).toBe(400);
      expect(unknownAfter.json().error.message).toMatch(/after: batch "batch_nope" not found/);
    });
  });

  describe('GET /batches/{id}/items', () => {
    it('pages items by index with limit (clamped to 1-1000) and skip', async () => {
      const id = created[0]!.id;
      expect((await itemsOf(t, id)).map((i) => i.index)).toEqual([0, 1, 2]);
      expect((await itemsOf(t, id, '?limit=2')).map((i) => i.index)).toEqual([0, 1]);
      expect((await itemsOf(t, id, '?limit=2&skip=2')).map((i) => i.index)).toEqual([2]);
      expect((await itemsOf(t, id, '?skip=5')).map((i) => i.index)).toEqual([]);
      expect((await itemsOf(t, id, '?limit=0')).map((i) => i.index)).toEqual([0]);
      expect((await itemsOf(t, id, '?limit=5000')).map((i) => i.index)).toEqual([0, 1, 2]);
    });

    it('filters by item status; a bad status, a negative skip or a non-number is a 400', async () => {
      const id = created[0]!.id;
      const db = t.ctx.database.db;
      await db.updateTable('batch_items').set({ status: 'running' }).where('batch_id', '=', id).where('idx', '=', 1).execute();
      expect((await itemsOf(t, id, '?status=running')).map((i) => i.index)).toEqual([1]);
      expect((await itemsOf(t, id, '?status=pending')).map((i) => i.index)).toEqual([0, 2]);
      expect(await itemsOf(t, id, '?status=succeeded')).toEqual([]);
      for (const query of ['?status=done', '?skip=-1', '?limit=abc', '?skip=1.5', '?unknown=1', '?skip=99999999999999999999', '?skip=1e30']) {
        const res = await get(`${BATCHES}/${id}/items${query}`);
        expect(res.statusCode, query).toBe(400);
        expect(res.json().error.message).toMatch(/status|skip|limit|unknown/);
      }
    });
  });

  describe('GET /batches/{id}/results', () => {
    it('is empty JSONL while nothing has finished; status must be succeeded or failed', async () => {
      const res = await get(`${BATCHES}/${created[2]!.id}/results`);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('application/jsonl');
      expect(res.body).toBe('');
      for (const status of ['cancelled', 'pending', 'x']) {
        const bad = await get(`${BATCHES}/${created[2]!.id}/results?status=${status}`);
        expect(bad.statusCode).toBe(400);
        expect(bad.json().error.message).toMatch(/status must be one of: succeeded, failed/);
      }
    });
  });

  describe('GET /batches/:id/results, many and big answers', () => {
    it('every line once and in index order, however the pages grow and shrink with the size of the answers', async () => {
      const batch = await createBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 300) });
      const items = await t.ctx.database.db.selectFrom('batch_items').select(['id', 'idx']).where('batch_id', '=', batch.id).execute();
      for (const item of items) {
        // Every seventh answer is 300 Ki characters: 50 of them outweigh a page, so the pages shrink, then grow again.
        const content = Number(item.idx) % 7 === 0 ? 'x'.repeat(300 * 1024) : `answer ${item.idx}`;
        await t.ctx.database.db
          .updateTable('batch_items')
          .set({ status: 'succeeded', response_status_code: 200, response_body: JSON.stringify({ object: 'chat.completion', content }), started_at: 1, ended_at: 2 })
          .where('id', '=', item.id)
          .execute();
      }
      const res = await get(`${BATCHES}/${batch.id}/results`);
      expect(res.statusCode).toBe(200);
      const lines = res.body.trim().split('\n').map((line) => JSON.parse(line) as { custom_id: string; response: { body: { content: string } } });
      expect(lines.map((l) => l.custom_id)).toEqual(Array.from({ length: 300 }, (_, i) => `c${i}`));
      expect(lines[7]!.response.body.content).toHaveLength(300 * 1024);
      expect(lines[8]!.response.body.content).toBe('answer 8');
    });
  });

  describe('isolation', () => {
    it("another project's batch is a 404 like a missing one, on every batch route", async () => {
      const other = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: 'Other project' } });
      expect(other.statusCode).toBe(201);
      const otherToken = await createToken(t, { role: 'owner', projectId: other.json().project.id });
      const id = created[0]!.id;
      for (const target of [id, 'batch_missing']) {
        for (const [method, url] of [
          ['GET', `${BATCHES}/${target}`],
          ['GET', `${BATCHES}/${target}/items`],
          ['GET', `${BATCHES}/${target}/results`],
          ['POST', `${BATCHES}/${target}/cancel`],
        ] as const) {
          const res = await call(t.app, otherToken.value, { method, url });
          expect(res.statusCode, `${method} ${url}`).toBe(404);
          expect(res.json().error).toEqual({ message: `Batch "${target}" not found`, type: 'not_found_error', code: 'not_found' });
        }
      }
      expect((await get(BATCHES, otherToken.value)).json().data).toEqual([]);
      expect((await get(`${BATCHES}?after=${id}`, otherToken.value)).statusCode).toBe(400);
      // The owning project still sees it unchanged.
      expect((await get(`${BATCHES}/${id}`)).json()).toMatchObject({ id, status: 'in_progress' });
    });

    it("another tenant's token cannot see the batch either", async () => {
      const tenant = await call(t.app, t.adminSession, { method: 'POST', url: '/api/tenants', payload: { name: 'Tenant B', ownerEmail: 'b-owner@example.test', ownerPassword: 'tenant-b-password' } });
      expect(tenant.statusCode).toBe(201);
      const login = await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email: 'b-owner@example.test', password: 'tenant-b-password' } });
      const tokenB = await createToken(t, { role: 'owner', projectId: tenant.json().project.id }, login.json().token);
      expect((await get(`${BATCHES}/${created[0]!.id}`, tokenB.value)).statusCode).toBe(404);
      expect((await get(BATCHES, tokenB.value)).json().data).toEqual([]);
    });
  });
});
