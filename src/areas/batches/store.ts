import { sql, type Selectable } from 'kysely';
import type { Transactor } from '../../db/index.js';
import { fromJson, toJson } from '../../db/json.js';
import type { BatchesTable, BatchItemsTable, Db, Dialect } from '../../db/types.js';
import type { ProjectScope } from '../../http/principal.js';
import { storableText } from '../../platform/text.js';

export const BATCH_STATUSES = ['validating', 'in_progress', 'completed', 'failed', 'cancelling', 'cancelled'] as const;
export type BatchStatus = (typeof BATCH_STATUSES)[number];
export const ITEM_STATUSES = ['pending', 'running', 'succeeded', 'failed', 'cancelled'] as const;
export type ItemStatus = (typeof ITEM_STATUSES)[number];

export interface BatchRecord {
  id: string;
  tenantId: string;
  projectId: string;
  endpoint: string;
  status: BatchStatus;
  completionWindow: string;
  inputFile: { bucketKey: string; objectKey: string } | null;
  outputBucketKey: string | null;
  outputObjectKey: string | null;
  errorMessage: string | null;
  metadata: Record<string, unknown>;
  tokenId: string | null;
  userId: string | null;
  counts: { total: number; completed: number; failed: number; cancelled: number };
  usage: { inputTokens: number; outputTokens: number };
  createdAt: number;
  startedAt: number | null;
  completedAt: number | null;
  cancelledAt: number | null;
}

export interface ItemRecord {
  id: string;
  batchId: string;
  index: number;
  customId: string | null;
  status: ItemStatus;
  responseStatusCode: number | null;
  /** JSON text on one line. */
  responseBody: string | null;
  errorMessage: string | null;
  usage: { inputTokens: number; outputTokens: number } | null;
  startedAt: number | null;
  endedAt: number | null;
}

export interface NewItem {
  id: string;
  index: number;
  customId: string | null;
  /** JSON text. */
  requestBody: string;
}

/** An item a worker holds: what it needs to run it. */
export interface ClaimedItem {
  id: string;
  batchId: string;
  tenantId: string;
  projectId: string;
  index: number;
  requestBody: string;
  /** Attempts so far, this one included. */
  attempts: number;
}

/** How a held item ended. */
export interface ItemOutcome {
  id: string;
  batchId: string;
  status: 'succeeded' | 'failed';
  statusCode: number;
  responseBody: string | null;
  errorMessage: string | null;
  usage: { inputTokens: number; outputTokens: number } | null;
  /** When the worker started it (a claimed item may wait in the worker's queue for a slot first). */
  startedAt: number;
  endedAt: number;
}

/** A result line's columns, read in index order. */
export interface ResultRow {
  id: string;
  index: number;
  customId: string | null;
  status: 'succeeded' | 'failed';
  responseStatusCode: number;
  responseBody: string | null;
  errorMessage: string | null;
}

export interface QueueStats {
  pending: number;
  running: number;
  oldestPendingSince: number | null;
  liveWorkers: number;
}

function toBatch(row: Selectable<BatchesTable>): BatchRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    endpoint: row.endpoint,
    status: row.status as BatchStatus,
    completionWindow: row.completion_window,
    inputFile: row.input_bucket_key !== null && row.input_object_key !== null ? { bucketKey: row.input_bucket_key, objectKey: row.input_object_key } : null,
    outputBucketKey: row.output_bucket_key,
    outputObjectKey: row.output_object_key,
    errorMessage: row.error_message,
    metadata: fromJson<Record<string, unknown>>(row.metadata) ?? {},
    tokenId: row.token_id,
    userId: row.user_id,
    counts: { total: Number(row.total), completed: Number(row.completed), failed: Number(row.failed), cancelled: Number(row.cancelled) },
    usage: { inputTokens: Number(row.input_tokens), outputTokens: Number(row.output_tokens) },
    createdAt: Number(row.created_at),
    startedAt: row.started_at === null ? null : Number(row.started_at),
    completedAt: row.completed_at === null ? null : Number(row.completed_at),
    cancelledAt: row.cancelled_at === null ? null : Number(row.cancelled_at),
  };
}

const ITEM_VIEW_COLUMNS = [
  'id', 'batch_id', 'idx', 'custom_id', 'status', 'response_status_code', 'response_body', 'error_message', 'input_tokens', 'output_tokens', 'started_at', 'ended_at',
] as const;

function toItem(row: Pick<Selectable<BatchItemsTable>, (typeof ITEM_VIEW_COLUMNS)[number]>): ItemRecord {
  return {
    id: row.id,
    batchId: row.batch_id,
    index: Number(row.idx),
    customId: row.custom_id,
    status: row.status as ItemStatus,
    responseStatusCode: row.response_status_code === null ? null : Number(row.response_status_code),
    responseBody: row.response_body,
    errorMessage: row.error_message,
    usage: row.input_tokens === null ? null : { inputTokens: Number(row.input_tokens), outputTokens: Number(row.output_tokens ?? 0) },
    startedAt: row.started_at === null ? null : Number(row.started_at),
    endedAt: row.ended_at === null ? null : Number(row.ended_at),
  };
}

const CLAIM_COLUMNS = ['id', 'batch_id', 'tenant_id', 'project_id', 'idx', 'request_body', 'attempts'] as const;

function toClaimed(row: Pick<Selectable<BatchItemsTable>, (typeof CLAIM_COLUMNS)[number]>): ClaimedItem {
  return {
    id: row.id,
    batchId: row.batch_id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    index: Number(row.idx),
    requestBody: row.request_body,
    attempts: Number(row.attempts),
  };
}

/** SQLite allows 32,766 bound values per statement; 9 columns x 1,000 rows stays well below. */
const INSERT_CHUNK = 1000;
/** A literal, not a bound parameter: the partial index of running items (migration 0009) is used only then (SQLite). */
const RUNNING = sql<boolean>`status = 'running'`;
/** Batches whose work is not finished: workers look only at these. */
const OPEN_STATUSES: BatchStatus[] = ['in_progress', 'cancelling'];

/** Batches and their items: creation, reads, and the worker's claims, leases and completions. */
export class BatchStore {
  constructor(private readonly db: Db, private readonly dialect: Dialect, private readonly transaction: Transactor) {}

  /** The batch and all its items, in one transaction: nothing is stored unless everything is. */
  async insert(batch: BatchRecord, items: NewItem[]): Promise<void> {
    await this.transaction(async (trx) => {
      await trx
        .insertInto('batches')
        .values({
          id: batch.id,
          tenant_id: batch.tenantId,
          project_id: batch.projectId,
          endpoint: batch.endpoint,
          status: batch.status,
          completion_window: batch.completionWindow,
          input_bucket_key: batch.inputFile?.bucketKey ?? null,
          input_object_key: batch.inputFile?.objectKey ?? null,
          output_bucket_key: batch.outputBucketKey,
          output_object_key: null,
          error_message: null,
          metadata: toJson(this.dialect, batch.metadata),
          token_id: batch.tokenId,
          user_id: batch.userId,
          total: batch.counts.total,
          completed: 0,
          failed: 0,
          cancelled: 0,
          input_tokens: 0,
          output_tokens: 0,
          finalizer: null,
          finalizer_until: null,
          created_at: batch.createdAt,
          started_at: batch.startedAt,
          completed_at: null,
          cancelled_at: null,
        })
        .execute();
      for (let start = 0; start < items.length; start += INSERT_CHUNK) {
        const rows = items.slice(start, start + INSERT_CHUNK).map((item) => ({
          id: item.id,
          batch_id: batch.id,
          tenant_id: batch.tenantId,
          project_id: batch.projectId,
          idx: item.index,
          custom_id: item.customId,
          request_body: item.requestBody,
          status: 'pending',
          attempts: 0,
          run_after: 0,
        }));
        await trx.insertInto('batch_items').values(rows).execute();
      }
    });
  }

  async find(scope: ProjectScope, id: string): Promise<BatchRecord | null> {
    const row = await this.db
      .selectFrom('batches')
      .selectAll()
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('id', '=', id)
      .executeTakeFirst();
    return row ? toBatch(row) : null;
  }

  /** Newest first; `before` is the creation time and id of the last batch of the previous page. */
  async list(scope: ProjectScope, query: { status?: BatchStatus; before?: { createdAt: number; id: string }; limit: number }): Promise<BatchRecord[]> {
    let q = this.db.selectFrom('batches').selectAll().where('tenant_id', '=', scope.tenantId).where('project_id', '=', scope.projectId);
    if (query.status) q = q.where('status', '=', query.status);
    const before = query.before;
    if (before) {
      q = q.where((eb) => eb.or([eb('created_at', '<', before.createdAt), eb.and([eb('created_at', '=', before.createdAt), eb('id', '<', before.id)])]));
    }
    const rows = await q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(query.limit + 1).execute();
    return rows.map(toBatch);
  }

  async items(scope: ProjectScope, batchId: string, query: { status?: ItemStatus; limit: number; skip: number }): Promise<ItemRecord[]> {
    let q = this.db
      .selectFrom('batch_items')
      .select(ITEM_VIEW_COLUMNS)
      .where('batch_id', '=', batchId)
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId);
    if (query.status) q = q.where('status', '=', query.status);
    const rows = await q.orderBy('idx').limit(query.limit).offset(query.skip).execute();
    return rows.map(toItem);
  }

  /** A page of finished items (succeeded and/or failed) after an index, in index order. */
  async results(scope: ProjectScope, batchId: string, statuses: ('succeeded' | 'failed')[], afterIndex: number, limit: number): Promise<ResultRow[]> {
    const rows = await this.db
      .selectFrom('batch_items')
      .select(['id', 'idx', 'custom_id', 'status', 'response_status_code', 'response_body', 'error_message'])
      .where('batch_id', '=', batchId)
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('status', 'in', statuses)
      .where('idx', '>', afterIndex)
      .orderBy('idx')
      .limit(limit)
      .execute();
    return rows.map((row) => ({
      id: row.id,
      index: Number(row.idx),
      customId: row.custom_id,
      status: row.status as ResultRow['status'],
      responseStatusCode: Number(row.response_status_code ?? 0),
      responseBody: row.response_body,
      errorMessage: row.error_message,
    }));
  }

  /**
   * Cancels a batch that is in progress (or validating): pending items drain as cancelled, running ones are left to
   * finish. Returns the batch after the change, and whether it could be cancelled at all.
   */
  async cancel(scope: ProjectScope, id: string): Promise<{ batch: BatchRecord; cancelled: boolean } | null> {
    return this.transaction(async (trx) => {
      // The write comes first: it takes SQLite's write lock (or PostgreSQL's row lock) before anything is read, so a
      // writer in another process cannot slip in between a read and the upgrade to writing.
      const changed = await trx
        .updateTable('batches')
        .set({ status: 'cancelling' })
        .where('tenant_id', '=', scope.tenantId)
        .where('project_id', '=', scope.projectId)
        .where('id', '=', id)
        .where('status', 'in', ['in_progress', 'validating'])
        .executeTakeFirst();
      const cancelled = Number(changed.numUpdatedRows) > 0;
      if (cancelled) await this.drainIn(trx, id, Date.now());
      const row = await trx
        .selectFrom('batches')
        .selectAll()
        .where('tenant_id', '=', scope.tenantId)
        .where('project_id', '=', scope.projectId)
        .where('id', '=', id)
        .executeTakeFirst();
      return row ? { batch: toBatch(row), cancelled } : null;
    });
  }

  /**
   * Pending items of a cancelling batch become cancelled, counted in the same transaction; so do running items whose
   * worker's lease ran out (it died): nobody will finish them, and a cancelled batch's items are never run again.
   */
  private async drainIn(trx: Db, batchId: string, now: number): Promise<number> {
    const drained = await trx
      .updateTable('batch_items')
      .set({ status: 'cancelled', ended_at: now, locked_by: null, locked_until: null })
      .where('batch_id', '=', batchId)
      .where((eb) => eb.or([eb('status', '=', 'pending'), eb.and([eb('status', '=', 'running'), eb('locked_until', '<', now)])]))
      .where((eb) => eb.exists(eb.selectFrom('batches').select('id').where('id', '=', batchId).where('status', '=', 'cancelling')))
      .executeTakeFirst();
    const count = Number(drained.numUpdatedRows);
    if (count > 0) await trx.updateTable('batches').set((eb) => ({ cancelled: eb('cancelled', '+', count) })).where('id', '=', batchId).execute();
    return count;
  }

  async cancellingIds(): Promise<string[]> {
    const rows = await this.db.selectFrom('batches').select('id').where('status', '=', 'cancelling').execute();
    return rows.map((r) => r.id);
  }

  /** Drains what a cancel could not: items handed back to pending while or after it ran. */
  async drain(batchId: string): Promise<number> {
    return this.transaction((trx) => this.drainIn(trx, batchId, Date.now()));
  }

  /** Batches in progress, oldest first: where a worker looks for pending items. */
  async inProgressIds(): Promise<string[]> {
    const rows = await this.db.selectFrom('batches').select('id').where('status', '=', 'in_progress').orderBy('created_at').execute();
    return rows.map((r) => r.id);
  }

  /**
   * Takes up to `limit` pending items of one batch, lowest index first, for `workerId` until `lockedUntil`. One
   * atomic statement: SQLite runs it under its single writer lock, PostgreSQL skips rows another worker is taking.
   */
  async claimPending(batchId: string, workerId: string, limit: number, now: number, lockedUntil: number): Promise<ClaimedItem[]> {
    const rows = await this.db
      .updateTable('batch_items')
      .set((eb) => ({ status: 'running', locked_by: workerId, locked_until: lockedUntil, started_at: now, attempts: eb('attempts', '+', 1) }))
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('batch_items')
          .select('id')
          .where('batch_id', '=', batchId)
          .where('status', '=', 'pending')
          .where('run_after', '<=', now)
          // A cancelled batch's items handed back to pending are drained, never claimed again.
          .where((eb) => eb.exists(eb.selectFrom('batches').select('id').where('id', '=', batchId).where('status', '=', 'in_progress')))
          .orderBy('idx')
          .limit(limit)
          .$if(this.dialect === 'postgres', (q) => q.forUpdate().skipLocked()),
      )
      .returning(CLAIM_COLUMNS)
      .execute();
    return rows.map(toClaimed).sort((a, b) => a.index - b.index);
  }

  /**
   * Takes running items whose worker's lease ran out (it crashed or lost the database): they run again here. Items
   * this worker still runs itself (`inHand`, late only because its heartbeat was) are not taken twice.
   */
  async claimExpired(workerId: string, limit: number, now: number, lockedUntil: number, inHand: string[] = []): Promise<ClaimedItem[]> {
    const rows = await this.db
      .updateTable('batch_items')
      .set((eb) => ({ locked_by: workerId, locked_until: lockedUntil, started_at: now, attempts: eb('attempts', '+', 1) }))
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('batch_items')
          .select('id')
          .where(RUNNING)
          .where('locked_until', '<', now)
          // Those of a cancelled batch are drained instead.
          .where((eb) => eb.exists(eb.selectFrom('batches').select('id').whereRef('batches.id', '=', 'batch_items.batch_id').where('batches.status', '=', 'in_progress')))
          .$if(inHand.length > 0, (q) => q.where('id', 'not in', inHand))
          .orderBy('locked_until')
          .limit(limit)
          .$if(this.dialect === 'postgres', (q) => q.forUpdate().skipLocked()),
      )
      .returning(CLAIM_COLUMNS)
      .execute();
    return rows.map(toClaimed);
  }

  /** Keeps the worker's items its own while it runs them, whatever the upstream's latency. */
  async extendLeases(workerId: string, ids: string[], lockedUntil: number): Promise<void> {
    if (ids.length === 0) return;
    await this.db
      .updateTable('batch_items')
      .set({ locked_until: lockedUntil })
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('batch_items')
          .select('id')
          .where('id', 'in', ids)
          .where('status', '=', 'running')
          .where('locked_by', '=', workerId)
          // Rows locked in id order, as complete() locks them: a heartbeat and a group commit cannot deadlock.
          .$if(this.dialect === 'postgres', (q) => q.orderBy('id').forUpdate()),
      )
      .execute();
  }

  /** Keeps a long output write this finalizer's. */
  async extendFinalization(batchId: string, workerId: string, until: number): Promise<void> {
    await this.db.updateTable('batches').set({ finalizer_until: until }).where('id', '=', batchId).where('finalizer', '=', workerId).where('status', 'in', OPEN_STATUSES).execute();
  }

  /** Gives held items back as pending (a retry after `runAfter`, or a worker stopping); `refund` undoes the attempt. */
  async release(workerId: string, ids: string[], runAfter: number, refund: boolean): Promise<void> {
    if (ids.length === 0) return;
    await this.db
      .updateTable('batch_items')
      .set({ status: 'pending', locked_by: null, locked_until: null, started_at: null, run_after: runAfter })
      .$if(refund, (q) => q.set((eb) => ({ attempts: eb('attempts', '-', 1) })))
      .where('id', 'in', ids)
      .where('status', '=', 'running')
      .where('locked_by', '=', workerId)
      .execute();
  }

  /**
   * Records how held items ended and adds them to their batches' counts and usage, in one transaction; an item no
   * longer held by this worker (its lease expired and another took it) is left alone, so nothing counts twice.
   * Returns the batches whose every item is now finished.
   */
  async complete(workerId: string, outcomes: ItemOutcome[]): Promise<string[]> {
    return this.transaction(async (trx) => {
      const deltas = new Map<string, { completed: number; failed: number; input: number; output: number }>();
      for (const outcome of [...outcomes].sort((a, b) => (a.id < b.id ? -1 : 1))) {
        const updated = await trx
          .updateTable('batch_items')
          .set({
            status: outcome.status,
            response_status_code: outcome.statusCode,
            response_body: outcome.responseBody,
            // The upstream's own message: it may hold a NUL, which would fail the whole group on PostgreSQL.
            error_message: outcome.errorMessage === null ? null : storableText(outcome.errorMessage),
            input_tokens: outcome.usage?.inputTokens ?? null,
            output_tokens: outcome.usage?.outputTokens ?? null,
            started_at: outcome.startedAt,
            ended_at: outcome.endedAt,
            locked_until: null,
          })
          .where('id', '=', outcome.id)
          .where('status', '=', 'running')
          .where('locked_by', '=', workerId)
          .executeTakeFirst();
        if (Number(updated.numUpdatedRows) === 0) continue;
        const delta = deltas.get(outcome.batchId) ?? { completed: 0, failed: 0, input: 0, output: 0 };
        delta[outcome.status === 'succeeded' ? 'completed' : 'failed']++;
        delta.input += outcome.usage?.inputTokens ?? 0;
        delta.output += outcome.usage?.outputTokens ?? 0;
        deltas.set(outcome.batchId, delta);
      }
      const finished: string[] = [];
      for (const [batchId, delta] of [...deltas].sort(([a], [b]) => (a < b ? -1 : 1))) {
        const row = await trx
          .updateTable('batches')
          .set((eb) => ({
            completed: eb('completed', '+', delta.completed),
            failed: eb('failed', '+', delta.failed),
            input_tokens: eb('input_tokens', '+', delta.input),
            output_tokens: eb('output_tokens', '+', delta.output),
          }))
          .where('id', '=', batchId)
          .returning(['total', 'completed', 'failed', 'cancelled'])
          .executeTakeFirst();
        if (row && Number(row.completed) + Number(row.failed) + Number(row.cancelled) >= Number(row.total)) finished.push(batchId);
      }
      return finished;
    });
  }

  /** Open batches whose items are all finished and that no live finalizer holds. */
  async finalizable(now: number): Promise<string[]> {
    const rows = await this.db
      .selectFrom('batches')
      .select('id')
      .where('status', 'in', OPEN_STATUSES)
      .where(sql<boolean>`completed + failed + cancelled >= total`)
      .where((eb) => eb.or([eb('finalizer_until', 'is', null), eb('finalizer_until', '<', now)]))
      .execute();
    return rows.map((r) => r.id);
  }

  /** Makes this worker the batch's finalizer until `until`, if the batch is finished and nobody else holds it. */
  async claimFinalization(batchId: string, workerId: string, now: number, until: number): Promise<BatchRecord | null> {
    const row = await this.db
      .updateTable('batches')
      .set({ finalizer: workerId, finalizer_until: until })
      .where('id', '=', batchId)
      .where('status', 'in', OPEN_STATUSES)
      .where(sql<boolean>`completed + failed + cancelled >= total`)
      .where((eb) => eb.or([eb('finalizer_until', 'is', null), eb('finalizer_until', '<', now)]))
      .returningAll()
      .executeTakeFirst();
    return row ? toBatch(row) : null;
  }

  /** The finalizer's last step: in_progress -> completed (or failed), cancelling -> cancelled. */
  async finish(batchId: string, workerId: string, change: { status: 'completed' | 'failed' | 'cancelled'; outputObjectKey?: string; errorMessage?: string; at: number }): Promise<boolean> {
    const from = change.status === 'cancelled' ? 'cancelling' : 'in_progress';
    const result = await this.db
      .updateTable('batches')
      .set({
        status: change.status,
        output_object_key: change.outputObjectKey ?? null,
        error_message: change.errorMessage ?? null,
        completed_at: change.status === 'completed' ? change.at : null,
        cancelled_at: change.status === 'cancelled' ? change.at : null,
        finalizer_until: null,
      })
      .where('id', '=', batchId)
      .where('status', '=', from)
      .where('finalizer', '=', workerId)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async registerWorker(worker: { id: string; hostname: string; pid: number; concurrency: number; now: number; staleBefore: number }): Promise<void> {
    await this.db.deleteFrom('batch_workers').where('heartbeat_at', '<', worker.staleBefore).execute();
    await this.db
      .insertInto('batch_workers')
      .values({ id: worker.id, hostname: worker.hostname, pid: worker.pid, concurrency: worker.concurrency, started_at: worker.now, heartbeat_at: worker.now })
      .execute();
  }

  async heartbeatWorker(workerId: string, now: number): Promise<void> {
    await this.db.updateTable('batch_workers').set({ heartbeat_at: now }).where('id', '=', workerId).execute();
  }

  async removeWorker(workerId: string): Promise<void> {
    await this.db.deleteFrom('batch_workers').where('id', '=', workerId).execute();
  }

  /** Items waiting and running across every batch, the oldest wait, and workers that beat since `liveSince`. */
  async queueStats(liveSince: number): Promise<QueueStats> {
    // Both counts read only index entries: pending ones per open batch, running ones from the partial index.
    const pending = await this.db
      .selectFrom('batch_items')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('batch_id', 'in', (eb) => eb.selectFrom('batches').select('id').where('status', 'in', OPEN_STATUSES))
      .where('status', '=', 'pending')
      .executeTakeFirstOrThrow();
    const running = await this.db.selectFrom('batch_items').select((eb) => eb.fn.countAll<number>().as('n')).where(RUNNING).executeTakeFirstOrThrow();
    const oldest = await this.db
      .selectFrom('batches')
      .select('created_at')
      .where('status', '=', 'in_progress')
      .where((eb) => eb.exists(eb.selectFrom('batch_items').select('id').whereRef('batch_items.batch_id', '=', 'batches.id').where('batch_items.status', '=', 'pending')))
      .orderBy('created_at')
      .limit(1)
      .executeTakeFirst();
    const workers = await this.db
      .selectFrom('batch_workers')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('heartbeat_at', '>=', liveSince)
      .executeTakeFirstOrThrow();
    return {
      pending: Number(pending.n),
      running: Number(running.n),
      oldestPendingSince: oldest ? Number(oldest.created_at) : null,
      liveWorkers: Number(workers.n),
    };
  }
}
