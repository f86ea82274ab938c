import type { Selectable } from 'kysely';
import type { Db, ProjectsTable } from '../../db/types.js';

export interface ProjectRecord {
  id: string;
  tenantId: string;
  key: string;
  name: string;
  createdAt: number;
}

function toRecord(row: Selectable<ProjectsTable>): ProjectRecord {
  return { id: row.id, tenantId: row.tenant_id, key: row.key, name: row.name, createdAt: row.created_at };
}

export class ProjectStore {
  constructor(private readonly db: Db) {}

  async insert(project: ProjectRecord): Promise<void> {
    await this.db
      .insertInto('projects')
      .values({ id: project.id, tenant_id: project.tenantId, key: project.key, name: project.name, created_at: project.createdAt })
      .execute();
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
