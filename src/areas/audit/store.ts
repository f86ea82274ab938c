import { sql, type Selectable } from 'kysely';
import type { AuditEventsTable, Db, Dialect } from '../../db/types.js';

export interface AuditEvent {
  id: string;
  tenantId: string | null;
  projectId: string | null;
  requestId: string | null;
  actorType: 'user' | 'api_token' | 'system';
  actorUserId: string | null;
  apiTokenId: string | null;
  service: string;
  action: string;
  method: string;
  path: string;
  statusCode: number;
  outcome: 'success' | 'failure' | 'denied';
  ipAddress: string | null;
  userAgent: string | null;
  resourceType: string | null;
  resourceId: string | null;
  createdAt: number;
}

export interface AuditFilter {
  action?: string;
  actorUserId?: string;
  from?: number;
  to?: number;
  method?: string;
  outcome?: AuditEvent['outcome'];
  q?: string;
  service?: string;
  limit: number;
  skip: number;
}

function toEvent(row: Selectable<AuditEventsTable>): AuditEvent {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    requestId: row.request_id,
    actorType: row.actor_type as AuditEvent['actorType'],
    actorUserId: row.actor_user_id,
    apiTokenId: row.api_token_id,
    service: row.service,
    action: row.action,
    method: row.method,
    path: row.path,
    statusCode: row.status_code,
    outcome: row.outcome as AuditEvent['outcome'],
    ipAddress: row.ip_address,
    userAgent: row.user_agent,
    resourceType: row.resource_type,
    resourceId: row.resource_id,
    createdAt: row.created_at,
  };
}

/** LIKE pattern for a literal substring: the wildcards in user text are escaped. */
function containsPattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** 18 parameters a row: 500 rows stay under SQLite's 32,766 and PostgreSQL's 65,535 bound parameters. */
const INSERT_CHUNK = 500;

const SEARCHED_COLUMNS = ['action', 'service', 'path', 'actor_type', 'actor_user_id', 'api_token_id', 'resource_id', 'request_id'] as const;

export class AuditStore {
  /** The case folding of `q`: Unicode on both databases (SQLite's own lower() folds ASCII letters only). */
  private readonly lower: ReturnType<typeof sql.raw>;

  constructor(private readonly db: Db, dialect: Dialect) {
    this.lower = sql.raw(dialect === 'sqlite' ? 'unicode_lower' : 'lower');
  }

  /** Inserts in chunks: one statement per chunk stays far below SQLite's and PostgreSQL's parameter limits. */
  async insertMany(events: AuditEvent[]): Promise<void> {
    for (let start = 0; start < events.length; start += INSERT_CHUNK) await this.insertChunk(events.slice(start, start + INSERT_CHUNK));
  }

  private async insertChunk(events: AuditEvent[]): Promise<void> {
    if (events.length === 0) return;
    await this.db
      .insertInto('audit_events')
      .values(
        events.map((e) => ({
          id: e.id,
          tenant_id: e.tenantId,
          project_id: e.projectId,
          request_id: e.requestId,
          actor_type: e.actorType,
          actor_user_id: e.actorUserId,
          api_token_id: e.apiTokenId,
          service: e.service,
          action: e.action,
          method: e.method,
          path: e.path,
          status_code: e.statusCode,
          outcome: e.outcome,
          ip_address: e.ipAddress,
          user_agent: e.userAgent,
          resource_type: e.resourceType,
          resource_id: e.resourceId,
          created_at: e.createdAt,
        })),
      )
      .execute();
  }

  /** Tenant-wide, newest first. */
  async list(tenantId: string, filter: AuditFilter): Promise<AuditEvent[]> {
    let query = this.db.selectFrom('audit_events').selectAll().where('tenant_id', '=', tenantId);
    if (filter.action !== undefined) query = query.where('action', '=', filter.action);
    if (filter.actorUserId !== undefined) query = query.where('actor_user_id', '=', filter.actorUserId);
    if (filter.from !== undefined) query = query.where('created_at', '>=', filter.from);
    if (filter.to !== undefined) query = query.where('created_at', '<=', filter.to);
    if (filter.method !== undefined) query = query.where('method', '=', filter.method);
    if (filter.outcome !== undefined) query = query.where('outcome', '=', filter.outcome);
    if (filter.service !== undefined) query = query.where('service', '=', filter.service);
    if (filter.q !== undefined) {
      const pattern = containsPattern(filter.q);
      query = query.where((eb) =>
        // ESCAPE is explicit: SQLite has no default LIKE escape character, PostgreSQL's is the backslash. Column and
        // pattern are folded by the same function.
        eb.or(SEARCHED_COLUMNS.map((column) => sql<boolean>`${this.lower}(coalesce(${sql.ref(column)}, '')) like ${this.lower}(${pattern}) escape '\\'`)),
      );
    }
    const rows = await query.orderBy('created_at', 'desc').orderBy('seq', 'desc').limit(filter.limit).offset(filter.skip).execute();
    return rows.map(toEvent);
  }
}
