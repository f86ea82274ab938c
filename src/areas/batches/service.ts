import { AppError, ERRORS } from '../../http/errors.js';
import type { ProjectScope } from '../../http/principal.js';
import type { HealthCheck } from '../../platform/health.js';
import { newId, timeOrderedId } from '../../platform/ids.js';
import { pageSize, unixSeconds } from '../../platform/time.js';
import type { Capability } from '../../providers/types.js';
import type { FileService } from '../files/service.js';
import type { ModelService } from '../models/service.js';
import { inlineLine, jsonlLines, lineError, reusedCustomId, tooManyLines, type BatchEndpoint, type BatchLine, type LineProblem } from './input.js';
import type { BatchRecord, BatchStatus, BatchStore, ItemRecord, ItemStatus } from './store.js';
import { resultLine } from './views.js';

/** Who submits a batch: its items run in this project, on this token's budget. */
export interface Submitter {
  scope: ProjectScope;
  tokenId: string | null;
  userId: string | null;
}

export interface CreateBatchInput {
  endpoint: BatchEndpoint;
  requests?: unknown[];
  input_file?: { bucket_key: string; object_key: string };
  output_bucket_key?: string;
  completion_window?: string;
  metadata?: Record<string, unknown> | null;
}

/** What workers are told about (through the bus, so every instance hears it). */
export interface BatchChange {
  kind: 'created' | 'cancelled';
  batchId: string;
}

export interface BatchSettings {
  maxLines: number;
}

const CAPABILITY: Record<BatchEndpoint, Capability> = { '/v1/chat/completions': 'chat', '/v1/embeddings': 'embeddings' };
/** Metadata is echoed on every read of the batch (500 to a list page): kept small. */
const MAX_METADATA_BYTES = 16 * 1024;
/** Result rows read at once: pages grow to the most while they stay light, and shrink when big answers weigh them down. */
const RESULTS_PAGE = { first: 50, most: 500, chars: 8 * 1024 * 1024 };
/** Result text handed on at once. */
const RESULTS_CHUNK_CHARS = 1024 * 1024;

/** A document-store 404 while reading the input: the submission is at fault, so a 400 (interface 7.1). */
function unreadable(err: unknown): never {
  if (err instanceof AppError && err.statusCode === 404) throw ERRORS.validation(`input_file is unreadable: ${err.message}`);
  throw err;
}

/**
 * Batches (interface 4.7): validated and stored in one transaction, run by the batch worker, read back as batch
 * objects, item pages and JSONL results.
 */
export class BatchService {
  private readonly changeListeners: ((change: BatchChange) => void)[] = [];

  constructor(
    private readonly store: BatchStore,
    private readonly files: FileService,
    private readonly models: ModelService,
    private readonly settings: BatchSettings,
  ) {}

  /** Called after every create and cancel: workers act at once rather than at their next poll. */
  onChange(listener: (change: BatchChange) => void): void {
    this.changeListeners.push(listener);
  }

  private announce(change: BatchChange): void {
    for (const listener of this.changeListeners) listener(change);
  }

  async create(submitter: Submitter, input: CreateBatchInput): Promise<BatchRecord> {
    const { scope } = submitter;
    if ((input.requests === undefined) === (input.input_file === undefined)) {
      throw ERRORS.validation('Give exactly one of requests (inline lines) and input_file (a JSONL object in the document store)');
    }
    const metadata = input.metadata ?? {};
    if (Buffer.byteLength(JSON.stringify(metadata)) > MAX_METADATA_BYTES) throw ERRORS.validation(`metadata is larger than ${MAX_METADATA_BYTES} bytes as JSON`);
    if (input.output_bucket_key !== undefined) {
      await this.files.bucket(scope, input.output_bucket_key).catch((err: unknown) => {
        if (err instanceof AppError && err.statusCode === 404) throw ERRORS.validation(`output_bucket_key: bucket "${input.output_bucket_key}" not found in this project`);
        throw err;
      });
    }
    const lines = input.requests ? this.inlineLines(input.endpoint, input.requests) : await this.fileLines(scope, input.endpoint, input.input_file!);
    if (lines.length === 0) throw ERRORS.validation('The batch has no request lines');
    // The first line with a problem is the one named (interface 4.7 rule 5), whichever check finds it.
    const problems = [reusedCustomId(lines), await this.modelProblem(scope, input.endpoint, lines)].filter((found) => found !== null);
    const first = problems.sort((a, b) => a.lineNumber - b.lineNumber)[0];
    if (first) throw lineError(first.lineNumber, first.problem);

    const now = Date.now();
    const batch: BatchRecord = {
      id: newId('batch'),
      ...scope,
      endpoint: input.endpoint,
      status: 'in_progress',
      completionWindow: input.completion_window ?? '24h',
      inputFile: input.input_file ? { bucketKey: input.input_file.bucket_key, objectKey: input.input_file.object_key } : null,
      outputBucketKey: input.output_bucket_key ?? null,
      outputObjectKey: null,
      errorMessage: null,
      metadata,
      tokenId: submitter.tokenId,
      userId: submitter.userId,
      counts: { total: lines.length, completed: 0, failed: 0, cancelled: 0 },
      usage: { inputTokens: 0, outputTokens: 0 },
      createdAt: now,
      startedAt: now,
      completedAt: null,
      cancelledAt: null,
    };
    const items = lines.map((line, index) => ({ id: timeOrderedId('item', now), index, customId: line.customId, requestBody: JSON.stringify(line.body) }));
    await this.store.insert(batch, items);
    this.announce({ kind: 'created', batchId: batch.id });
    return batch;
  }

  private inlineLines(endpoint: BatchEndpoint, requests: unknown[]): BatchLine[] {
    if (requests.length > this.settings.maxLines) throw tooManyLines(this.settings.maxLines);
    return requests.map((request, i) => inlineLine(endpoint, request, i + 1));
  }

  private async fileLines(scope: ProjectScope, endpoint: BatchEndpoint, file: { bucket_key: string; object_key: string }): Promise<BatchLine[]> {
    const { body } = await this.files.open(scope, file.bucket_key, file.object_key).catch(unreadable);
    const lines: BatchLine[] = [];
    for await (const line of jsonlLines(body, endpoint, this.settings.maxLines)) lines.push(line);
    return lines;
  }

  /** The first line (in line order) naming a model the project lacks, or one without the endpoint's capability. */
  private async modelProblem(scope: ProjectScope, endpoint: BatchEndpoint, lines: BatchLine[]): Promise<LineProblem | null> {
    const firstLine = new Map<string, number>();
    for (const line of lines) if (!firstLine.has(line.body.model as string)) firstLine.set(line.body.model as string, line.lineNumber);
    const capability = CAPABILITY[endpoint];
    for (const [key, lineNumber] of firstLine) {
      const model = await this.models.find(scope, key);
      if (!model) return { lineNumber, problem: `model "${key}" is not a model of this project (GET /models lists them)` };
      if (!model.record.capabilities.includes(capability)) {
        return { lineNumber, problem: `model "${key}" does not offer ${capability} (it offers ${model.record.capabilities.join(', ')})` };
      }
    }
    return null;
  }

  /** Another project's batch is a 404 like a missing one. */
  async get(scope: ProjectScope, id: string): Promise<BatchRecord> {
    const batch = await this.store.find(scope, id);
    if (!batch) throw ERRORS.notFound('Batch', id);
    return batch;
  }

  /** Newest first; `limit` defaults to 50 and is clamped to 1-500; `after` is the last id of the previous page. */
  async list(scope: ProjectScope, query: { status?: BatchStatus; limit?: number; after?: string }): Promise<{ batches: BatchRecord[]; hasMore: boolean }> {
    const limit = pageSize(query.limit, 50, 500);
    let before: { createdAt: number; id: string } | undefined;
    if (query.after !== undefined) {
      const last = await this.store.find(scope, query.after);
      if (!last) throw ERRORS.validation(`after: batch "${query.after}" not found in this project`);
      before = { createdAt: last.createdAt, id: last.id };
    }
    const rows = await this.store.list(scope, { status: query.status, before, limit });
    return { batches: rows.slice(0, limit), hasMore: rows.length > limit };
  }

  /** Items by index: `limit` defaults to 100 and is clamped to 1-1000, `skip` is an offset. */
  async items(scope: ProjectScope, id: string, query: { status?: ItemStatus; limit?: number; skip?: number }): Promise<ItemRecord[]> {
    const batch = await this.get(scope, id);
    return this.store.items(scope, batch.id, { status: query.status, limit: pageSize(query.limit, 100, 1000), skip: query.skip ?? 0 });
  }

  /** Interface 3.1: only a batch in progress (or validating) can be cancelled; anything else is a 400. */
  async cancel(scope: ProjectScope, id: string): Promise<BatchRecord> {
    const outcome = await this.store.cancel(scope, id);
    if (!outcome) throw ERRORS.notFound('Batch', id);
    if (!outcome.cancelled) throw ERRORS.validation(`Batch "${id}" is ${outcome.batch.status} and cannot be cancelled (only in_progress or validating batches can)`);
    this.announce({ kind: 'cancelled', batchId: id });
    return outcome.batch;
  }

  /** The batch (404 before anything is streamed) and its result lines. */
  async results(scope: ProjectScope, id: string, status?: 'succeeded' | 'failed'): Promise<AsyncGenerator<string>> {
    const batch = await this.get(scope, id);
    return this.resultLines(scope, batch.id, status ? [status] : ['succeeded', 'failed']);
  }

  /**
   * Result lines in index order, read a page at a time so that memory stays flat however big the batch, and handed
   * on in chunks of about 1 Mi characters however big its answers.
   */
  private async *resultLines(scope: ProjectScope, batchId: string, statuses: ('succeeded' | 'failed')[]): AsyncGenerator<string> {
    let after = -1;
    let limit = RESULTS_PAGE.first;
    for (;;) {
      const rows = await this.store.results(scope, batchId, statuses, after, limit);
      if (rows.length === 0) return;
      let pageChars = 0;
      let chunk = '';
      for (const row of rows) {
        const line = resultLine(row);
        pageChars += line.length;
        chunk += line;
        if (chunk.length >= RESULTS_CHUNK_CHARS) {
          yield chunk;
          chunk = '';
        }
      }
      if (chunk !== '') yield chunk;
      if (rows.length < limit) return;
      after = rows[rows.length - 1]!.index;
      limit = pageChars > RESULTS_PAGE.chars ? Math.max(1, Math.floor(limit / 2)) : Math.min(RESULTS_PAGE.most, limit * 2);
    }
  }

  /**
   * Interface 3.1's automatic finalization of a batch whose items are all finished, by whichever worker claims it (for
   * `leaseMs`; a worker that dies halfway is replaced once that runs out): a cancelling batch becomes cancelled; a batch
   * in progress writes its results to the output bucket, if it names one, and becomes completed, or failed when they
   * cannot be written there (its results stay readable through the API).
   */
  async finalize(batchId: string, workerId: string, leaseMs: number): Promise<void> {
    const now = Date.now();
    const batch = await this.store.claimFinalization(batchId, workerId, now, now + leaseMs);
    if (!batch) return;
    if (batch.status === 'cancelling') {
      await this.store.finish(batchId, workerId, { status: 'cancelled', at: Date.now() });
      return;
    }
    if (!batch.outputBucketKey) return this.endOrCancel(batchId, workerId, { status: 'completed' });
    const objectKey = `${batch.id}_output.jsonl`;
    const scope = { tenantId: batch.tenantId, projectId: batch.projectId };
    const lines = this.resultLines(scope, batch.id, ['succeeded', 'failed']);
    const store = this.store;
    let renewedAt = now;
    try {
      await this.files.putObject(scope, batch.outputBucketKey, objectKey, {
        contentType: 'application/jsonl',
        declaredLength: undefined,
        body: (async function* () {
          for await (const text of lines) {
            yield Buffer.from(text);
            // A long write keeps its finalizer lease, so no other worker starts writing the same object.
            if (Date.now() - renewedAt > leaseMs / 3) {
              renewedAt = Date.now();
              await store.extendFinalization(batchId, workerId, renewedAt + leaseMs);
            }
          }
        })(),
        // Results are as large as the answers: the upload limit is for clients.
        maxBytes: Number.MAX_SAFE_INTEGER,
      });
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      const errorMessage = `The results could not be written to bucket "${batch.outputBucketKey}": ${err.message}`;
      return this.endOrCancel(batchId, workerId, { status: 'failed', errorMessage });
    }
    await this.endOrCancel(batchId, workerId, { status: 'completed', outputObjectKey: objectKey });
  }

  /** Completed or failed, unless a cancel came in while finalizing: then cancelled (an output written stays in its bucket). */
  private async endOrCancel(batchId: string, workerId: string, end: { status: 'completed' | 'failed'; outputObjectKey?: string; errorMessage?: string }): Promise<void> {
    if (await this.store.finish(batchId, workerId, { ...end, at: Date.now() })) return;
    await this.store.finish(batchId, workerId, { status: 'cancelled', at: Date.now() });
  }

  /**
   * The `queue` health check: items waiting and running, how long the oldest has waited, and the workers alive
   * (a heartbeat within one lease). Degraded when items wait and no worker is alive to run them.
   */
  queueCheck(leaseMs: number): HealthCheck {
    return async () => {
      const now = Date.now();
      const stats = await this.store.queueStats(now - leaseMs);
      const details = {
        pending: stats.pending,
        running: stats.running,
        oldestPendingAgeSeconds: stats.oldestPendingSince === null ? 0 : Math.max(0, unixSeconds(now - stats.oldestPendingSince)),
        liveWorkers: stats.liveWorkers,
      };
      if (stats.pending > 0 && stats.liveWorkers === 0) return { status: 'degraded', message: 'batch items are waiting and no batch worker is alive', details };
      return { status: 'ok', details };
    };
  }
}
