import type { Selectable } from 'kysely';
import { fromJson, toJson } from '../../db/json.js';
import type { ApiTokensTable, Db, Dialect } from '../../db/types.js';
import type { AccessLevel, PermissionMap, Role } from '../../http/rbac.js';
import type { Budget, RateLimit } from '../limits/service.js';

export interface TokenRecord {
  id: string;
  tenantId: string;
  projectId: string | null;
  name: string;
  role: Role;
  permissions: PermissionMap | null;
  grants: string[];
  displayPrefix: string;
  expiresAt: number | null;
  revokedAt: number | null;
  budget: Budget | null;
  rateLimit: RateLimit | null;
  createdByUserId: string | null;
  createdAt: number;
}


export type NewToken = Omit<TokenRecord, 'revokedAt'> & { tokenHash: string };

function toRecord(row: Selectable<ApiTokensTable>): TokenRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    name: row.name,
    role: row.role as Role,
    permissions: fromJson<Record<string, AccessLevel>>(row.permissions),
    grants: fromJson<string[]>(row.grants) ?? [],
    displayPrefix: row.display_prefix,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
    budget: fromJson<Budget>(row.budget),
    rateLimit: fromJson<RateLimit>(row.rate_limit),
    createdByUserId: row.created_by_user_id,
    createdAt: row.created_at,
  };
}

export class TokenStore {
  constructor(private readonly db: Db, private readonly dialect: Dialect) {}

  async insert(token: NewToken): Promise<void> {
    await this.db
      .insertInto('api_tokens')
      .values({
        id: token.id,
        tenant_id: token.tenantId,
        project_id: token.projectId,
        name: token.name,
        role: token.role,
        permissions: toJson(this.dialect, token.permissions),
        grants: toJson(this.dialect, token.grants) as string,
        display_prefix: token.displayPrefix,
        token_hash: token.tokenHash,
        expires_at: token.expiresAt,
        revoked_at: null,
        budget: toJson(this.dialect, token.budget),
        rate_limit: toJson(this.dialect, token.rateLimit),
        created_by_user_id: token.createdByUserId,
        created_at: token.createdAt,
      })
      .execute();
  }

  /** Authentication lookup: by hash, across tenants (the hash is unique). */
  async findByHash(tokenHash: string): Promise<TokenRecord | null> {
    const row = await this.db.selectFrom('api_tokens').selectAll().where('token_hash', '=', tokenHash).executeTakeFirst();
    return row ? toRecord(row) : null;
  }

  /** The token and its hash (for dropping it from caches), within the tenant. */
  async findById(tenantId: string, id: string): Promise<{ token: TokenRecord; tokenHash: string } | null> {
    const row = await this.db
      .selectFrom('api_tokens')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    return row ? { token: toRecord(row), tokenHash: row.token_hash } : null;
  }

  async list(tenantId: string, createdByUserId?: string): Promise<TokenRecord[]> {
    let query = this.db.selectFrom('api_tokens').selectAll().where('tenant_id', '=', tenantId);
    if (createdByUserId !== undefined) query = query.where('created_by_user_id', '=', createdByUserId);
    const rows = await query.orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
    return rows.map(toRecord);
  }

  /** Revokes at `at` unless already revoked; returns when it was revoked, as stored (the first revoke's time). */
  async revoke(tenantId: string, id: string, at: number): Promise<number | null> {
    const result = await this.db
      .updateTable('api_tokens')
      .set({ revoked_at: at })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) > 0) return at;
    // Another revoke came first: its time is the one stored.
    const row = await this.db.selectFrom('api_tokens').select('revoked_at').where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
    return row?.revoked_at ?? null;
  }
}
