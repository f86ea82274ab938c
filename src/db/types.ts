import type { Generated, Kysely } from 'kysely';

/** JSON columns: TEXT in SQLite, JSONB in PostgreSQL; always read through `fromJson`. */
export type JsonColumn = unknown;

export interface TenantsTable {
  id: string;
  name: string;
  created_at: number;
}

export interface ProjectsTable {
  id: string;
  tenant_id: string;
  key: string;
  name: string;
  created_at: number;
}

export interface UsersTable {
  id: string;
  tenant_id: string;
  email: string;
  name: string | null;
  password_hash: string;
  role: string;
  is_instance_admin: number;
  session_version: Generated<number>;
  created_at: number;
}

export interface ApiTokensTable {
  id: string;
  tenant_id: string;
  project_id: string | null;
  name: string;
  role: string;
  permissions: JsonColumn | null;
  grants: JsonColumn;
  display_prefix: string;
  token_hash: string;
  expires_at: number | null;
  revoked_at: number | null;
  budget: JsonColumn | null;
  rate_limit: JsonColumn | null;
  created_by_user_id: string | null;
  created_at: number;
}

export interface AuditEventsTable {
  seq: Generated<number>;
  id: string;
  tenant_id: string | null;
  project_id: string | null;
  request_id: string | null;
  actor_type: string;
  actor_user_id: string | null;
  api_token_id: string | null;
  service: string;
  action: string;
  method: string;
  path: string;
  status_code: number;
  outcome: string;
  ip_address: string | null;
  user_agent: string | null;
  resource_type: string | null;
  resource_id: string | null;
  created_at: number;
}

export interface InstanceMetaTable {
  key: string;
  value: string;
}

export interface Database {
  tenants: TenantsTable;
  projects: ProjectsTable;
  users: UsersTable;
  api_tokens: ApiTokensTable;
  audit_events: AuditEventsTable;
  instance_meta: InstanceMetaTable;
}

export type Db = Kysely<Database>;
export type Dialect = 'sqlite' | 'postgres';
