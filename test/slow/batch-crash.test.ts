import { afterEach, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import {
  countersAndStates, createBatch, deployment, itemRows, kill, listItems, registerFakeModel, results, upstreamCalls, waitForBatch, type Deployment, type ItemRow,
} from './batch-support.js';

/**
 * Interface 3.1/3.2 and architecture 6: a `waygate serve` process killed with SIGKILL in the middle of a batch loses
 * nothing and records nothing twice. A batch runs against a fake upstream that answers every call after a constant
 * delay; the process is killed twice (early, then past half-way), each time while items are in flight, and a new
 * process on the same database finishes the batch after the dead worker's leases run out.
 */

const SIZE = 300;
const CONCURRENCY = 12;
const UPSTREAM_DELAY_MS = 150;
/** Completed items at which the 1st and 2nd process are killed. */
const KILL_AT = [30, 150];
const ENV = { WAYGATE_BATCH_LEASE_SECONDS: '3', WAYGATE_BATCH_CONCURRENCY: String(CONCURRENCY) };

let fake: FakeUpstream | null = null;
let d: Deployment | null = null;
afterEach(async () => {
  await d?.remove();
  await fake?.close();
  d = null;
  fake = null;
});

/** The database as the killed process left it. */
interface Snapshot {
  workerId: string;
  /** Items the killed worker held as running: interrupted, to be run again by another. */
  interrupted: Set<string>;
  /** Items recorded as succeeded before the kill, as stored then. */
  succeeded: Map<string, ItemRow>;
}

describe.each(BACKENDS)('a batch on %s survives SIGKILL of its process', { timeout: 150_000 }, (backend) => {
  it(`${SIZE} items, two kills mid-run: every item succeeds once, counters match, only interrupted items are re-sent`, async () => {
    fake = await startFakeOpenAi();
    fake.defaults = { delayMs: UPSTREAM_DELAY_MS };
    d = await deployment(backend, ENV);
    let server = await d.start();
    await registerFakeModel(server, fake);
    const batch = await createBatch(server, d.token, SIZE);
    expect(batch).toMatchObject({ status: 'in_progress', request_counts: { total: SIZE, completed: 0, failed: 0, cancelled: 0 } });

    const snapshots: Snapshot[] = [];
    for (const threshold of KILL_AT) {
      await waitForBatch(server, d.token, batch.id, (b) => b.request_counts.completed >= threshold, `${threshold} completed items`);
      const [worker] = await d.rows<{ id: string }>('select id from batch_workers where pid = ?', [server.pid]);
      expect(worker, `batch_workers row of pid ${server.pid}`).toBeDefined();
      await kill(server);

      const rows = await itemRows(d, batch.id);
      const interrupted = rows.filter((r) => r.status === 'running' && r.locked_by === worker!.id);
      const succeeded = rows.filter((r) => r.status === 'succeeded');
      // The kill landed mid-run: items were in flight, some done, not all.
      expect(interrupted.length, `items running at kill ${snapshots.length + 1}`).toBeGreaterThan(0);
      // Held: up to CONCURRENCY in flight plus as many claimed ahead of the slots.
      expect(interrupted.length).toBeLessThanOrEqual(2 * CONCURRENCY);
      expect(succeeded.length).toBeGreaterThanOrEqual(threshold);
      expect(succeeded.length).toBeLessThan(SIZE);
      expect(rows.filter((r) => r.status === 'failed' || r.status === 'cancelled')).toEqual([]);
      // Counters are written in the transactions that change item states: consistent even after a crash.
      const { counters, states } = await countersAndStates(d, batch.id);
      expect(counters).toEqual(states);
      snapshots.push({ workerId: worker!.id, interrupted: new Set(interrupted.map((r) => r.id)), succeeded: new Map(succeeded.map((r) => [r.id, r])) });

      server = await d.start();
    }

    const done = await waitForBatch(server, d.token, batch.id, (b) => b.status !== 'in_progress', 'the batch to finish', 90_000);
    expect(done.status, server.output()).toBe('completed');
    expect(done.request_counts).toEqual({ total: SIZE, completed: SIZE, failed: 0, cancelled: 0 });
    // Usage is added with each item's outcome: counted once per item, however often it was sent.
    expect(done.usage).toEqual({ input_tokens: SIZE * fake.usage.prompt, output_tokens: SIZE * fake.usage.completion, total_tokens: SIZE * (fake.usage.prompt + fake.usage.completion) });

    const items = await listItems(server, d.token, batch.id);
    expect(items.map((i) => i.index)).toEqual(Array.from({ length: SIZE }, (_, i) => i));
    expect(items.filter((i) => i.status !== 'succeeded')).toEqual([]);

    const { text, lines } = await results(server, d.token, batch.id);
    expect(text.endsWith('\n')).toBe(true);
    expect(lines).toHaveLength(SIZE);
    expect(lines.map((l) => l.custom_id).sort()).toEqual(Array.from({ length: SIZE }, (_, i) => `c${i}`).sort());
    expect(lines.map((l) => l.id)).toEqual(items.map((i) => `batch_req_${i.id}`));
    for (const line of lines) {
      expect(line.error, line.custom_id!).toBeNull();
      expect(line.response.status_code, line.custom_id!).toBe(200);
      expect(line.response.body).toMatchObject({ object: 'chat.completion', choices: [{ message: { content: 'Hello from the fake upstream' } }] });
    }

    const { counters, states } = await countersAndStates(d, batch.id);
    expect(counters).toEqual(states);
    expect(states).toEqual({ total: SIZE, completed: SIZE, failed: 0, cancelled: 0 });

    // Upstream calls: every item at least once; more only for items a killed worker held as running, once more
    // per kill that interrupted it. Attempts count the same: a claim, plus a take-over per interruption.
    const calls = upstreamCalls(fake);
    const rows = await itemRows(d, batch.id);
    const ids = new Set(rows.map((r) => `batch_req_${r.id}`));
    expect([...calls.keys()].filter((id) => !ids.has(id)), 'calls for unknown items').toEqual([]);
    let resent = 0;
    for (const row of rows) {
      const interruptions = snapshots.filter((s) => s.interrupted.has(row.id)).length;
      const sent = calls.get(`batch_req_${row.id}`) ?? 0;
      expect(sent, `upstream calls of ${row.id}`).toBeGreaterThanOrEqual(1);
      expect(sent, `upstream calls of ${row.id}, interrupted ${interruptions} times`).toBeLessThanOrEqual(1 + interruptions);
      expect(row.attempts, `attempts of ${row.id}`).toBe(1 + interruptions);
      if (sent > 1) resent++;
    }
    expect(resent).toBeLessThanOrEqual(snapshots.reduce((sum, s) => sum + s.interrupted.size, 0));
    // Per kill: the calls in flight, plus answers that had freed their slot but waited for their group commit (a
    // slot starts its next item when the answer arrives), which a kill loses too; all of them held as running.
    expect(resent).toBeLessThanOrEqual(KILL_AT.length * 2 * CONCURRENCY);

    // An item recorded before a kill was never run again: same worker, same end, same attempts.
    const final = new Map(rows.map((r) => [r.id, r]));
    for (const snapshot of snapshots) {
      for (const [id, before] of snapshot.succeeded) expect(final.get(id), id).toEqual(before);
    }
    // No interrupted item was finished by the worker that was killed holding it.
    for (const snapshot of snapshots) {
      for (const id of snapshot.interrupted) expect(final.get(id)!.locked_by, id).not.toBe(snapshot.workerId);
    }
  });
});
