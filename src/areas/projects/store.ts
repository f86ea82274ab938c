import type { Selectable } from 'kysely';
import type { Transactor } from '../../db/index.js';
import { fromJson, toJson } from '../../db/json.js';
import type { Db, Dialect, ProjectsTable } from '../../db/types.js';
import type { Budget, RateLimit } from '../limits/service.js';

export interface ProjectRecord {
  id: string;
  tenantId: string;
  key: string;
  name: string;
  budget: Budget | null;
  rateLimit: RateLimit | null;
  /**
   * When the budget last began counting what it did not count before (set, set again after removal, tokens or cost
   * added, another period): budget counters restart from stored usage then, since nothing kept them meanwhile.
   */
  limitsUpdatedAt: number;
  createdAt: number;
}

/** The fields a project update writes; the others are left as stored. */
type ProjectChange = Partial<Pick<ProjectRecord, 'name' | 'budget' | 'rateLimit' | 'limitsUpdatedAt'>>;

function toRecord(row: Selectable<ProjectsTable>): ProjectRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    key: row.key,
    name: row.name,
    budget: fromJson<Budget>(row.budget),
    rateLimit: fromJson<RateLimit>(row.rate_limit),
    limitsUpdatedAt: row.limits_updated_at,
    createdAt: row.created_at,
  };
}

export class ProjectStore {
  constructor(private readonly db: Db, private readonly dialect: Dialect, private readonly transaction: Transactor) {}

  async insert(project: ProjectRecord): Promise<void> {
    await this.db
      .insertInto('projects')
      .values({
        id: project.id,
        tenant_id: project.tenantId,
        key: project.key,
        name: project.name,
        budget: toJson(this.dialect, project.budget),
        rate_limit: toJson(this.dialect, project.rateLimit),
        limits_updated_at: project.limitsUpdatedAt,
        created_at: project.createdAt,
      })
      .execute();
  }

  /**
   * Writes only the fields given, so that two changes to different fields at once both hold; returns the project as
   * stored, or null when this tenant has no such project (by id or key). `changeOf` gets the project as stored,
   * inside a transaction that holds it (the row locked on PostgreSQL; SQLite's one connection runs one transaction at
   * a time), so a change that depends on the stored state cannot be decided on a state another change has replaced
   * meanwhile.
   */
  async update(tenantId: string, idOrKey: string, changeOf: (current: ProjectRecord) => ProjectChange): Promise<ProjectRecord | null> {
    return this.transaction(async (trx) => {
      const current = await trx
        .selectFrom('projects')
        .selectAll()
        .where('tenant_id', '=', tenantId)
        .where((eb) => eb.or([eb('id', '=', idOrKey), eb('key', '=', idOrKey)]))
        .$if(this.dialect === 'postgres', (q) => q.forUpdate())
        .executeTakeFirst();
      if (!current) return null;
      const change = changeOf(toRecord(current));
      const row = await trx
        .updateTable('projects')
        .set({
          ...(change.name !== undefined ? { name: change.name } : {}),
          ...(change.budget !== undefined ? { budget: toJson(this.dialect, change.budget) } : {}),
          ...(change.rateLimit !== undefined ? { rate_limit: toJson(this.dialect, change.rateLimit) } : {}),
          ...(change.limitsUpdatedAt !== undefined ? { limits_updated_at: change.limitsUpdatedAt } : {}),
        })
        .where('tenant_id', '=', tenantId)
        .where('id', '=', current.id)
        .returningAll()
        .executeTakeFirst();
      return row ? toRecord(row) : null;
    });
  }

  async list(tenantId: string): Promise<ProjectRecord[]> {
    const rows = await this.db.selectFrom('projects').selectAll().where('tenant_id', '=', tenantId).orderBy('created_at').orderBy('id').execute();
    return rows.map(toRecord);
  }

  /** By id or by key, within the tenant. */
  async find(tenantId: string, idOrKey: string): Promise<ProjectRecord | null> {
    const row = await this.db
      .selectFrom('projects')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where((eb) => eb.or([eb('id', '=', idOrKey), eb('key', '=', idOrKey)]))
      .executeTakeFirst();
    return row ? toRecord(row) : null;
  }

  async first(tenantId: string): Promise<ProjectRecord | null> {
    const row = await this.db.selectFrom('projects').selectAll().where('tenant_id', '=', tenantId).orderBy('created_at').orderBy('id').limit(1).executeTakeFirst();
    return row ? toRecord(row) : null;
  }
}
