import type { Selectable } from 'kysely';
import type { Db, UsersTable } from '../../db/types.js';
import type { Role } from '../../http/rbac.js';

export interface UserRecord {
  id: string;
  tenantId: string;
  email: string;
  name: string | null;
  passwordHash: string;
  role: Role;
  isInstanceAdmin: boolean;
  /** Sessions carry this; bumping it ends every session of the user. */
  sessionVersion: number;
  createdAt: number;
}

function toRecord(row: Selectable<UsersTable>): UserRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    email: row.email,
    name: row.name,
    passwordHash: row.password_hash,
    role: row.role as Role,
    isInstanceAdmin: row.is_instance_admin === 1,
    sessionVersion: row.session_version,
    createdAt: row.created_at,
  };
}

export class UserStore {
  constructor(private readonly db: Db) {}

  async insert(user: UserRecord): Promise<void> {
    await this.db
      .insertInto('users')
      .values({
        id: user.id,
        tenant_id: user.tenantId,
        email: user.email,
        name: user.name,
        password_hash: user.passwordHash,
        role: user.role,
        is_instance_admin: user.isInstanceAdmin ? 1 : 0,
        session_version: user.sessionVersion,
        created_at: user.createdAt,
      })
      .execute();
  }

  /** Login lookup: emails are unique across the instance. */
  async findByEmail(email: string): Promise<UserRecord | null> {
    const row = await this.db.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirst();
    return row ? toRecord(row) : null;
  }

  async findById(tenantId: string, id: string): Promise<UserRecord | null> {
    const row = await this.db.selectFrom('users').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
    return row ? toRecord(row) : null;
  }

  async list(tenantId: string): Promise<UserRecord[]> {
    const rows = await this.db.selectFrom('users').selectAll().where('tenant_id', '=', tenantId).orderBy('created_at').orderBy('id').execute();
    return rows.map(toRecord);
  }

  async bumpSessionVersion(tenantId: string, id: string): Promise<void> {
    await this.db
      .updateTable('users')
      .set((eb) => ({ session_version: eb('session_version', '+', 1) }))
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .execute();
  }

  /** A new password ends every session of the user. */
  async setPasswordHash(id: string, passwordHash: string): Promise<void> {
    await this.db
      .updateTable('users')
      .set((eb) => ({ password_hash: passwordHash, session_version: eb('session_version', '+', 1) }))
      .where('id', '=', id)
      .execute();
  }
}
