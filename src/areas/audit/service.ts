import type { Logger } from 'pino';
import type { AuditEvent, AuditFilter, AuditStore } from './store.js';

const FLUSH_INTERVAL_MS = 1_000;
const FLUSH_AT = 500;
/** When the database is unreachable the buffer keeps at most this many events, dropping the oldest. */
const MAX_BUFFERED = 100_000;
/** After a failed flush, only the timer retries until this pause has passed. */
const RETRY_PAUSE_MS = 1_000;
const MAX_TEXT = 1_000;

/** Control characters (NUL above all, which PostgreSQL refuses) out, length bounded: an event can always be stored. */
function clean(value: string | null): string | null {
  if (value === null) return null;
  // eslint-disable-next-line no-control-regex
  return value.replace(/[\u0000-\u001f\u007f]/g, '').slice(0, MAX_TEXT);
}

function sanitize(event: AuditEvent): AuditEvent {
  const out = { ...event } as Record<string, unknown>;
  for (const [key, value] of Object.entries(out)) if (typeof value === 'string') out[key] = clean(value);
  return out as unknown as AuditEvent;
}

/**
 * The audit trail. `record` only appends to memory, so requests never wait on an audit write;
 * a timer (and a full buffer) flushes in batches, and `close` flushes what is left on shutdown.
 */
export class AuditService {
  private buffer: AuditEvent[] = [];
  private flushing: Promise<void> | null = null;
  private retryAt = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly store: AuditStore, private readonly log: Logger) {
    this.timer = setInterval(() => void this.flush(), FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  record(event: AuditEvent): void {
    this.buffer.push(sanitize(event));
    if (this.buffer.length > MAX_BUFFERED) this.buffer.splice(0, this.buffer.length - MAX_BUFFERED);
    if (this.buffer.length >= FLUSH_AT && Date.now() >= this.retryAt) void this.flush();
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
    this.flushing = this.write(batch).finally(() => {
      this.flushing = null;
    });
    await this.flushing;
  }

  /**
   * A failed batch is either an unreachable database (keep everything for the next attempt) or a row the
   * database refuses (write the rest one by one, drop and report only the refused ones), so nothing blocks the log.
   */
  private async write(batch: AuditEvent[]): Promise<void> {
    try {
      await this.store.insertMany(batch);
      return;
    } catch (err) {
      if (!(await this.databaseReachable())) {
        this.buffer = batch.concat(this.buffer).slice(-MAX_BUFFERED);
        this.retryAt = Date.now() + RETRY_PAUSE_MS;
        this.log.error({ err, events: batch.length }, 'audit flush failed; database unreachable, will retry');
        return;
      }
    }
    let dropped = 0;
    for (const event of batch) {
      try {
        await this.store.insertMany([event]);
      } catch (err) {
        dropped++;
        this.log.error({ err, auditId: event.id, action: event.action }, 'audit event refused by the database; dropped');
      }
    }
    if (dropped > 0) this.log.error({ dropped, written: batch.length - dropped }, 'audit flush wrote the batch row by row');
  }

  private async databaseReachable(): Promise<boolean> {
    try {
      await this.store.ping();
      return true;
    } catch {
      return false;
    }
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

export interface AuditQuery {
  action?: string;
  actorUserId?: string;
  from?: string;
  to?: string;
  method?: string;
  outcome?: string;
  q?: string;
  service?: string;
  limit?: number;
  skip?: number;
}

const OUTCOMES = new Set(['success', 'failure', 'denied']);
/** ISO 8601 date or date-time; Date.parse alone would also take free text such as "hello 2". */
const ISO_8601 = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i;

const DAY_MS = 86_400_000;

/**
 * Milliseconds for a real calendar moment (no 31 February, which Date.parse would roll over), else undefined.
 * Times without an offset are UTC, never the server's zone. A bare date as the upper bound covers its whole day.
 */
function parseTime(value: string | undefined, bound: 'from' | 'to'): number | undefined {
  const text = value?.trim() ?? '';
  const match = ISO_8601.exec(text);
  if (!match) return undefined;
  const [year, month, day, hour = 0, minute = 0, second = 0] = match.slice(1).map((part) => (part === undefined ? undefined : Number(part))) as number[];
  const daysInMonth = new Date(Date.UTC(year!, month!, 0)).getUTCDate();
  if (month! < 1 || month! > 12 || day! < 1 || day! > daysInMonth || hour > 23 || minute > 59 || second > 59) return undefined;
  const dateOnly = match[4] === undefined;
  const hasOffset = /(?:Z|[+-]\d{2}:?\d{2})$/i.test(text);
  const ms = Date.parse(dateOnly || hasOffset ? text : `${text}Z`);
  if (Number.isNaN(ms)) return undefined;
  return dateOnly && bound === 'to' ? ms + DAY_MS - 1 : ms;
}

/** Interface 4.4: unparseable dates and unknown outcomes are ignored, the method is upper-cased, the page clamped. */
export function auditFilterFrom(query: AuditQuery): AuditFilter {
  return {
    action: query.action,
    actorUserId: query.actorUserId,
    from: parseTime(query.from, 'from'),
    to: parseTime(query.to, 'to'),
    method: query.method?.toUpperCase(),
    outcome: query.outcome !== undefined && OUTCOMES.has(query.outcome) ? (query.outcome as AuditFilter['outcome']) : undefined,
    q: query.q === undefined || query.q.trim() === '' ? undefined : query.q.trim(),
    service: query.service,
    limit: Math.min(1000, Math.max(1, query.limit ?? 100)),
    // Past any real row count the page is simply empty; the bound keeps the offset a valid SQL integer.
    skip: Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, query.skip ?? 0)),
  };
}

export function auditEventView(event: AuditEvent) {
  return { ...event, createdAt: new Date(event.createdAt).toISOString() };
}
