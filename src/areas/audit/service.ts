import type { Logger } from 'pino';
import type { AuditEvent, AuditFilter, AuditStore } from './store.js';

const FLUSH_INTERVAL_MS = 1_000;
const FLUSH_AT = 500;
/** When the database is unreachable the buffer keeps at most this many events, dropping the oldest. */
const MAX_BUFFERED = 100_000;

/**
 * The audit trail. `record` only appends to memory, so requests never wait on an audit write;
 * a timer (and a full buffer) flushes in batches, and `close` flushes what is left on shutdown.
 */
export class AuditService {
  private buffer: AuditEvent[] = [];
  private flushing: Promise<void> | null = null;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly store: AuditStore, private readonly log: Logger) {
    this.timer = setInterval(() => void this.flush(), FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  record(event: AuditEvent): void {
    this.buffer.push(event);
    if (this.buffer.length > MAX_BUFFERED) this.buffer.splice(0, this.buffer.length - MAX_BUFFERED);
    if (this.buffer.length >= FLUSH_AT) void this.flush();
  }

  get pending(): number {
    return this.buffer.length;
  }

  /** Writes everything buffered so far; concurrent callers share one write. */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.buffer.length === 0) return;
    const batch = this.buffer;
    this.buffer = [];
    this.flushing = this.store
      .insertMany(batch)
      .catch((err: unknown) => {
        // Keep the events for the next attempt rather than lose them.
        this.buffer = batch.concat(this.buffer).slice(-MAX_BUFFERED);
        this.log.error({ err, events: batch.length }, 'audit flush failed; will retry');
      })
      .finally(() => {
        this.flushing = null;
      });
    await this.flushing;
  }

  async list(tenantId: string, filter: AuditFilter): Promise<AuditEvent[]> {
    await this.flush();
    return this.store.list(tenantId, filter);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}

export function auditEventView(event: AuditEvent) {
  return { ...event, createdAt: new Date(event.createdAt).toISOString() };
}
