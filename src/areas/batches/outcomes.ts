import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { BatchStore, ItemOutcome } from './store.js';

const GROUP_LIMIT = 500;
const RETRY_MS = 1_000;

export interface OutcomeWriterEvents {
  /** The items whose outcomes are stored (or dropped on stop): the worker no longer holds them. */
  recorded(ids: string[]): void;
  /** Batches whose every item is finished after a commit. */
  finished(batchIds: string[]): void;
}

/**
 * Group commits of item outcomes. Outcomes queue up and are written from the next macrotask, so all the answers that
 * arrived in one turn of the event loop share one transaction (a synchronous driver would otherwise commit each on its
 * own). A failed commit is retried: the items stay the worker's while its heartbeat renews their leases.
 */
export class OutcomeWriter {
  private queue: ItemOutcome[] = [];
  private scheduled = false;
  private writing: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly store: BatchStore,
    private readonly workerId: string,
    private readonly events: OutcomeWriterEvents,
    private readonly log: Logger,
  ) {}

  /** Outcomes waiting to be written. */
  get pending(): number {
    return this.queue.length;
  }

  push(outcome: ItemOutcome): void {
    this.queue.push(outcome);
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled || this.writing || this.queue.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.writing = this.writeQueued().finally(() => {
        this.writing = null;
        // Outcomes pushed while the last group's promise settled.
        this.schedule();
      });
    });
  }

  private async writeQueued(): Promise<void> {
    while (this.queue.length > 0) {
      const group = this.queue.slice(0, GROUP_LIMIT);
      try {
        const finished = await this.store.complete(this.workerId, group);
        this.queue.splice(0, group.length);
        this.events.recorded(group.map((o) => o.id));
        if (finished.length > 0) this.events.finished(finished);
      } catch (err) {
        if (this.stopped) {
          // Given up on: the leases run out and the items run again elsewhere or after a restart.
          this.events.recorded(this.queue.splice(0).map((o) => o.id));
          return;
        }
        this.log.error({ err, items: group.length }, 'batch worker: recording item outcomes failed; retrying');
        await sleep(RETRY_MS);
      }
    }
  }

  /** Waits for what is queued to be written; after this, a failing write gives up instead of retrying. */
  async stop(): Promise<void> {
    this.stopped = true;
    while (this.scheduled || this.writing) await (this.writing ?? new Promise((resolve) => setImmediate(resolve)));
  }
}
