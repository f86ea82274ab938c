import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { call, type TestApp } from '../helpers/app.js';

export const BATCHES = '/api/client/v1/batches';
export const CHAT = '/v1/chat/completions';
export const EMBEDDINGS = '/v1/embeddings';

/** A chat line body for a model. */
export function chatRequest(model: string, content = 'Say hello', extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model, messages: [{ role: 'user', content }], ...extra };
}

/** `count` inline chat lines with custom ids `c0`, `c1`, ... */
export function chatLines(model: string, count: number): { custom_id: string; body: Record<string, unknown> }[] {
  return Array.from({ length: count }, (_, i) => ({ custom_id: `c${i}`, body: chatRequest(model, `line ${i}`) }));
}

export function postBatch(t: TestApp, payload: unknown, token = t.ownerToken): Promise<LightMyRequestResponse> {
  return call(t.app, token, { method: 'POST', url: BATCHES, payload: payload as InjectOptions['payload'] });
}

/** Creates a batch and returns its object (fails the test unless 201). */
export async function createBatch(t: TestApp, payload: Record<string, unknown>, token = t.ownerToken): Promise<BatchObject> {
  const res = await postBatch(t, payload, token);
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as BatchObject;
}

export function getBatch(t: TestApp, id: string, token = t.ownerToken): Promise<LightMyRequestResponse> {
  return call(t.app, token, { method: 'GET', url: `${BATCHES}/${id}` });
}

export interface BatchObject {
  id: string;
  object: 'batch';
  endpoint: string;
  status: string;
  completion_window: string;
  input_file: { bucket_key: string; object_key: string } | null;
  output_file: { bucket_key: string; object_key: string | null } | null;
  error_message: string | null;
  request_counts: { total: number; completed: number; failed: number; cancelled: number };
  usage: { input_tokens: number; output_tokens: number; total_tokens: number };
  metadata: Record<string, unknown>;
  created_at: number;
  started_at: number | null;
  completed_at: number | null;
  cancelled_at: number | null;
}

export interface ResultLine {
  id: string;
  custom_id: string | null;
  response: { status_code: number; body: Record<string, unknown> | null };
  error: { code: string; message: string } | null;
}

/** Polls the batch until its status is one of `statuses` (bounded: about 20 s). */
export async function waitForBatch(t: TestApp, id: string, statuses: string[] = ['completed', 'failed', 'cancelled'], token = t.ownerToken): Promise<BatchObject> {
  for (let i = 0; i < 400; i++) {
    const batch = (await getBatch(t, id, token)).json() as BatchObject;
    if (statuses.includes(batch.status)) return batch;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`batch ${id} never reached ${statuses.join('/')}`);
}

/** The JSONL results of a batch, parsed (and the raw response, for its headers). */
export async function resultsOf(t: TestApp, id: string, query = '', token = t.ownerToken): Promise<{ res: LightMyRequestResponse; lines: ResultLine[] }> {
  const res = await call(t.app, token, { method: 'GET', url: `${BATCHES}/${id}/results${query}` });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.body === '' || res.body.endsWith('\n')).toBe(true);
  const lines = res.body.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as ResultLine);
  return { res, lines };
}

export async function itemsOf(t: TestApp, id: string, query = '', token = t.ownerToken): Promise<Record<string, unknown>[]> {
  const res = await call(t.app, token, { method: 'GET', url: `${BATCHES}/${id}/items${query}` });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data as Record<string, unknown>[];
}

/** Rows in the batch tables, to prove a refused create stored nothing. */
export async function storedCounts(t: TestApp): Promise<{ batches: number; items: number }> {
  const db = t.ctx.database.db;
  const batches = await db.selectFrom('batches').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  const items = await db.selectFrom('batch_items').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return { batches: Number(batches.n), items: Number(items.n) };
}

/**
 * Item states counted in the database next to the batch's own counters, read from one snapshot (the worker may change
 * both in between two separate reads): they must always agree.
 */
export async function countsAgree(t: TestApp, id: string): Promise<void> {
  const snapshot = t.ctx.database.dialect === 'postgres' ? t.ctx.database.db.transaction().setIsolationLevel('repeatable read') : t.ctx.database.db.transaction();
  const { rows, batch } = await snapshot.execute(async (trx) => ({
    rows: await trx.selectFrom('batch_items').select(['status', (eb) => eb.fn.countAll<number>().as('n')]).where('batch_id', '=', id).groupBy('status').execute(),
    batch: await trx.selectFrom('batches').select(['total', 'completed', 'failed', 'cancelled']).where('id', '=', id).executeTakeFirstOrThrow(),
  }));
  const byStatus = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  expect({ total: Number(batch.total), completed: Number(batch.completed), failed: Number(batch.failed), cancelled: Number(batch.cancelled) }).toEqual({
    total: Object.values(byStatus).reduce((a, b) => a + b, 0),
    completed: byStatus.succeeded ?? 0,
    failed: byStatus.failed ?? 0,
    cancelled: byStatus.cancelled ?? 0,
  });
}
