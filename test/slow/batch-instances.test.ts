import { afterEach, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import {
  countersAndStates, createBatch, deployment, itemRows, listItems, registerFakeModel, results, upstreamCalls, waitForBatch, type Deployment,
} from './batch-support.js';

/**
 * Architecture 7: N instances on one database split batch work without duplicates. Two `waygate serve` processes
 * share the database (SQLite: one WAL file in one data directory; PostgreSQL: one database, a data directory each,
 * the same secrets) and run one batch together against a fake upstream with a constant delay.
 */

const SIZE = 400;
/** Per instance; low enough that one instance alone would need seconds, so the other joins in. */
const CONCURRENCY = 8;
const UPSTREAM_DELAY_MS = 60;
const LEASE_SECONDS = 3;
/** The first few calls take longer than a lease: only the heartbeat keeps them from the other instance. */
const SLOW_CALLS = 4;
const SLOW_DELAY_MS = LEASE_SECONDS * 1500;
const ENV = { WAYGATE_BATCH_LEASE_SECONDS: String(LEASE_SECONDS), WAYGATE_BATCH_CONCURRENCY: String(CONCURRENCY) };

let fake: FakeUpstream | null = null;
let d: Deployment | null = null;
afterEach(async () => {
  await d?.remove();
  await fake?.close();
  d = null;
  fake = null;
});

describe.each(BACKENDS)('two instances on one %s database', { timeout: 120_000 }, (backend) => {
  it(`split a batch of ${SIZE} items: each item sent upstream once, each result once, counters match, both worked`, async () => {
    fake = await startFakeOpenAi();
    fake.defaults = { delayMs: UPSTREAM_DELAY_MS };
    fake.queue(...Array.from({ length: SLOW_CALLS }, () => ({ delayMs: SLOW_DELAY_MS })));
    d = await deployment(backend, ENV);
    const a = await d.start(0);
    // Models are cached per instance and announced on an in-process bus without Redis: registered before b starts.
    await registerFakeModel(a, fake);
    const b = await d.start(1);
    const workers = await d.rows<{ id: string; pid: unknown }>('select id, pid from batch_workers');
    const workerOf = new Map(workers.map((w) => [Number(w.pid), w.id]));
    expect([...workerOf.keys()].sort()).toEqual([a.pid, b.pid].sort());

    // Submitted to b, polled on a: either instance serves every batch of the deployment.
    const batch = await createBatch(b, d.token, SIZE);
    const done = await waitForBatch(a, d.token, batch.id, (x) => x.status !== 'in_progress', 'the batch to finish', 90_000);
    expect(done.status, a.output() + b.output()).toBe('completed');
    expect(done.request_counts).toEqual({ total: SIZE, completed: SIZE, failed: 0, cancelled: 0 });
    expect(done.usage).toMatchObject({ input_tokens: SIZE * fake.usage.prompt, output_tokens: SIZE * fake.usage.completion });

    const rows = await itemRows(d, batch.id);
    expect(rows).toHaveLength(SIZE);
    // No item was taken over (not even the slow ones, held past one lease by their worker's heartbeat): each ran on
    // the first attempt, on one worker, and reached the upstream exactly once.
    expect(rows.filter((r) => r.status !== 'succeeded' || r.attempts !== 1)).toEqual([]);
    const calls = upstreamCalls(fake);
    expect([...calls.keys()].sort()).toEqual(rows.map((r) => `batch_req_${r.id}`).sort());
    expect([...calls].filter(([, n]) => n !== 1), 'items sent upstream more than once').toEqual([]);

    // Both instances did work: the items were held by both workers and no one else.
    const byWorker = new Map<string, number>();
    for (const row of rows) byWorker.set(String(row.locked_by), (byWorker.get(String(row.locked_by)) ?? 0) + 1);
    expect([...byWorker.keys()].sort(), JSON.stringify([...byWorker])).toEqual([workerOf.get(a.pid), workerOf.get(b.pid)].sort());

    const items = await listItems(b, d.token, batch.id);
    expect(items).toHaveLength(SIZE);
    expect(items.filter((i) => i.status !== 'succeeded')).toEqual([]);

    const { lines } = await results(a, d.token, batch.id);
    expect(lines).toHaveLength(SIZE);
    expect(new Set(lines.map((l) => l.custom_id)).size).toBe(SIZE);
    expect(lines.map((l) => l.id)).toEqual(items.map((i) => `batch_req_${i.id}`));
    expect(lines.filter((l) => l.response.status_code !== 200 || l.error !== null)).toEqual([]);

    const { counters, states } = await countersAndStates(d, batch.id);
    expect(counters).toEqual(states);
    expect(states).toEqual({ total: SIZE, completed: SIZE, failed: 0, cancelled: 0 });
  });
});
