import type { Db } from '../../db/types.js';

export interface TenantRecord {
  id: string;
  name: string;
  createdAt: number;
}

export class TenantStore {
  constructor(private readonly db: Db) {}

  async insert(tenant: TenantRecord): Promise<void> {
    await this.db.insertInto('tenants').values({ id: tenant.id, name: tenant.name, created_at: tenant.createdAt }).execute();
  }

  async getMeta(key: string): Promise<string | null> {
    const row = await this.db.selectFrom('instance_meta').select('value').where('key', '=', key).executeTakeFirst();
    return row?.value ?? null;
  }

  /** Inserts a metadata row; a concurrent insert of the same key fails, which is how one bootstrap wins. */
  async insertMeta(key: string, value: string): Promise<void> {
    await this.db.insertInto('instance_meta').values({ key, value }).execute();
  }

  async updateMeta(key: string, value: string): Promise<void> {
    await this.db.updateTable('instance_meta').set({ value }).where('key', '=', key).execute();
  }

  async upsertMeta(key: string, value: string): Promise<void> {
    await this.db
      .insertInto('instance_meta')
      .values({ key, value })
      .onConflict((oc) => oc.column('key').doUpdateSet({ value }))
      .execute();
  }
}
