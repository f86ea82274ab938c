import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { UsageService } from '../../src/areas/usage/service.js';
import { UsageStore, type UsageEvent } from '../../src/areas/usage/store.js';
import { WRITE_SLICE } from '../../src/platform/buffered-writer.js';
import { HOUR_MS } from '../../src/platform/time.js';
import { BACKENDS, createTestApp, type TestApp } from '../helpers/app.js';

/**
 * UsageStore.insertMany writes any number of events as statements of a few fixed row counts (10, 4, 1): every
 * event lands once and the hourly and daily rollups add up, whatever the batch size.
 */
describe.each(BACKENDS)('usage store writes on %s', (backend) => {
  let t: TestApp;
  let store: UsageStore;
  const base = Date.UTC(2026, 0, 5, 10, 0, 0);

  beforeAll(async () => {
    t = await createTestApp({ backend, noWorkers: true });
    const { db, dialect, transaction } = t.ctx.database;
    store = new UsageStore(db, dialect, transaction);
  });
  afterAll(async () => t.close());

  function event(project: string, i: number, model: string): UsageEvent {
    return {
      id: `use_${project}_${String(i).padStart(4, '0')}`, tenantId: 'tenant-store', projectId: project, tokenId: i % 3 === 0 ? null : 'tok-1', userId: null,
      model, provider: 'openai-compatible', service: 'chat', endpoint: '/chat/completions', inputTokens: i, outputTokens: 2 * i, cost: i / 1000,
      currency: 'USD', latencyMs: 1.5, upstreamLatencyMs: 1, status: i % 7 === 0 ? 502 : 200, requestId: `req-${i}`, sessionId: null, streamed: i % 2 === 0,
      // Two hours, so the hourly rollup has two periods and the daily one.
      createdAt: base + (i % 2) * HOUR_MS + i,
    };
  }

  it('a write lets other work (requests) run between its statements while it keeps up: on SQLite each one blocks the loop', async () => {
    const usage = new UsageService(store, pino({ level: 'silent' }));
    const order: string[] = [];
    for (let i = 0; i < WRITE_SLICE; i++) usage.record(event('proj-yield', i, 'model-a'));
    // The slice is full: its write has started. Work that arrives now runs before the write ends.
    setImmediate(() => order.push('other work'));
    await usage.flush();
    order.push('written');
    await usage.close();
    expect(order).toEqual(['other work', 'written']);
    const rows = await t.ctx.database.db.selectFrom('usage_events').select('id').where('project_id', '=', 'proj-yield').execute();
    expect(rows).toHaveLength(WRITE_SLICE);
  });

  // SQLite only: its statements run on the event loop, which is what the writer yields; PostgreSQL's go over the network.
  it.runIf(backend === 'sqlite')('under load (10 events every turn of the loop) the writer keeps up instead of yielding on every statement', async () => {
    const usage = new UsageService(store, pino({ level: 'silent' }));
    const turns = 1000;
    const perTurn = 10;
    let most = 0;
    for (let turn = 0; turn < turns; turn++) {
      for (let i = 0; i < perTurn; i++) usage.record(event('proj-load', turn * perTurn + i, 'model-a'));
      most = Math.max(most, usage.pending);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await usage.close();
    // Yielding on every statement wrote one slice of 50 per 7 or 8 turns, and the backlog grew by thousands.
    expect(most).toBeLessThan(10 * WRITE_SLICE);
    const written = await t.ctx.database.db.selectFrom('usage_events').select((eb) => eb.fn.countAll<number>().as('n')).where('project_id', '=', 'proj-load').executeTakeFirstOrThrow();
    expect(Number(written.n)).toBe(turns * perTurn);
  });

  it.each([1, 3, 4, 15, 16, 37, 50, 51, 120])('a batch of %i events: each event once, rollups summing them', async (size) => {
    const project = `proj-${size}`;
    const events = Array.from({ length: size }, (_, i) => event(project, i, i % 4 === 0 ? 'model-b' : 'model-a'));
    await store.insertMany(events.slice(0, Math.ceil(size / 2)));
    await store.insertMany(events.slice(Math.ceil(size / 2)));
    const { db } = t.ctx.database;
    const rows = await db.selectFrom('usage_events').select(['id', 'input_tokens', 'streamed']).where('project_id', '=', project).orderBy('id').execute();
    expect(rows.map((r) => r.id)).toEqual(events.map((e) => e.id));
    expect(rows.map((r) => Number(r.input_tokens))).toEqual(events.map((e) => e.inputTokens));
    for (const table of ['usage_hourly', 'usage_daily'] as const) {
      const sums = await db
        .selectFrom(table)
        .select((eb) => [eb.fn.sum<number>('requests').as('requests'), eb.fn.sum<number>('errors').as('errors'), eb.fn.sum<number>('input_tokens').as('input'), eb.fn.sum<number>('output_tokens').as('output')])
        .where('project_id', '=', project)
        .executeTakeFirstOrThrow();
      expect({ requests: Number(sums.requests), errors: Number(sums.errors), input: Number(sums.input), output: Number(sums.output) }).toEqual({
        requests: size,
        errors: events.filter((e) => e.status >= 400).length,
        input: events.reduce((sum, e) => sum + e.inputTokens, 0),
        output: events.reduce((sum, e) => sum + e.outputTokens, 0),
      });
    }
    const hourly = await db.selectFrom('usage_hourly').select(['hour', 'model', 'token_id', 'requests']).where('project_id', '=', project).execute();
    const expected = new Map<string, number>();
    for (const e of events) {
      const key = `${Math.floor(e.createdAt / HOUR_MS) * HOUR_MS}|${e.model}|${e.tokenId ?? ''}`;
      expected.set(key, (expected.get(key) ?? 0) + 1);
    }
    expect(new Map(hourly.map((r) => [`${Number(r.hour)}|${r.model}|${r.token_id}`, Number(r.requests)]))).toEqual(expected);
  });
});
