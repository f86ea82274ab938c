import type { Logger } from 'pino';
import { BufferedWriter } from '../../platform/buffered-writer.js';
import { pageSize, parseTime } from '../../platform/time.js';
import type { AuditEvent, AuditFilter, AuditStore } from './store.js';

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

/** The audit trail. `record` only appends to a buffer, so requests never wait on an audit write. */
export class AuditService {
  private readonly writer: BufferedWriter<AuditEvent>;

  constructor(private readonly store: AuditStore, log: Logger) {
    this.writer = new BufferedWriter({
      name: 'audit',
      write: (batch) => store.insertMany(batch),
      describe: (event) => ({ auditId: event.id, action: event.action }),
      log,
    });
  }

  record(event: AuditEvent): void {
    this.writer.push(sanitize(event));
  }

  get pending(): number {
    return this.writer.pending;
  }

  flush(): Promise<void> {
    return this.writer.flush();
  }

  async list(tenantId: string, filter: AuditFilter): Promise<AuditEvent[]> {
    await this.flush();
    return this.store.list(tenantId, filter);
  }

  close(): Promise<void> {
    return this.writer.close();
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
    limit: pageSize(query.limit, 100, 1000),
    // Past any real row count the page is simply empty; the bound keeps the offset a valid SQL integer.
    skip: Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, query.skip ?? 0)),
  };
}

export function auditEventView(event: AuditEvent) {
  return { ...event, createdAt: new Date(event.createdAt).toISOString() };
}
