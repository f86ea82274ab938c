import { ERRORS } from './errors.js';
import type { Principal } from './principal.js';

export const ROLES = ['owner', 'admin', 'member', 'viewer'] as const;
export type Role = (typeof ROLES)[number];
export type AccessLevel = 'none' | 'read' | 'write';

/** RBAC service slugs: the names used in permission maps, the route table and audit events. */
export const SERVICES = [
  'agents', 'batches', 'audio', 'guardrails', 'models', 'audit', 'automations', 'browser', 'aegis', 'files',
  'analysis', 'alerts', 'projects', 'tokens', 'users', 'tenants', 'auth', 'self',
] as const;
export type Service = (typeof SERVICES)[number];
export type PermissionMap = Partial<Record<Service, AccessLevel>>;

/** Grants that open admin services to tokens of any role. */
export const GRANTS = ['audit:read'] as const;

const RANK: Record<AccessLevel, number> = { none: 0, read: 1, write: 2 };
const ROLE_RANK: Record<Role, number> = { viewer: 1, member: 2, admin: 3, owner: 4 };

/** Members and viewers may read these but only owners and admins change them. */
const ADMIN_WRITE_SERVICES: ReadonlySet<Service> = new Set(['projects', 'users', 'tenants']);
/** Owners and admins only (or an explicit grant). */
const ADMIN_ONLY_SERVICES: ReadonlySet<Service> = new Set(['audit']);

export function roleAtLeast(role: Role, minimum: Role): boolean {
  return ROLE_RANK[role] >= ROLE_RANK[minimum];
}

function roleAccess(role: Role, service: Service): AccessLevel {
  if (service === 'self' || service === 'auth') return 'write';
  if (role === 'owner' || role === 'admin') return 'write';
  if (ADMIN_ONLY_SERVICES.has(service)) return 'none';
  if (ADMIN_WRITE_SERVICES.has(service)) return 'read';
  return role === 'member' ? 'write' : 'read';
}

/** What a principal may do on a service: the role's access, narrowed by a token's permission map, widened by grants. */
export function effectiveAccess(principal: Principal, service: Service): AccessLevel {
  let level = roleAccess(principal.role, service);
  if (principal.kind === 'api_token') {
    if (principal.permissions && service !== 'self') {
      const allowed = principal.permissions[service] ?? 'none';
      if (RANK[allowed] < RANK[level]) level = allowed;
    }
    if (principal.grants.includes(`${service}:read`) && RANK[level] < RANK.read) level = 'read';
  }
  return level;
}

export interface RoutePermission {
  service: Service;
  level: 'read' | 'write';
}

/**
 * The one RBAC table: every route's operation id maps to the service and access it needs.
 * A route whose operation id is missing here fails at start-up (see http/guards.ts).
 */
export const ROUTE_PERMISSIONS: Record<string, RoutePermission> = {
  'tokens.self': { service: 'self', level: 'read' },
  'audit.list': { service: 'audit', level: 'read' },
  'auth.me': { service: 'auth', level: 'read' },
  'tenants.create': { service: 'tenants', level: 'write' },
  'projects.list': { service: 'projects', level: 'read' },
  'projects.create': { service: 'projects', level: 'write' },
  'projects.update': { service: 'projects', level: 'write' },
  'models.list': { service: 'models', level: 'read' },
  'models.create': { service: 'models', level: 'write' },
  'models.update': { service: 'models', level: 'write' },
  'models.delete': { service: 'models', level: 'write' },
  'inference.models': { service: 'models', level: 'read' },
  'inference.model': { service: 'models', level: 'read' },
  'inference.chat': { service: 'models', level: 'read' },
  'inference.embeddings': { service: 'models', level: 'read' },
  'inference.moderations': { service: 'models', level: 'read' },
  'analytics.overview': { service: 'models', level: 'read' },
  'analytics.usage': { service: 'models', level: 'read' },
  'files.createBucket': { service: 'files', level: 'write' },
  'files.listBuckets': { service: 'files', level: 'read' },
  'files.listObjects': { service: 'files', level: 'read' },
  'files.putObject': { service: 'files', level: 'write' },
  'files.getObject': { service: 'files', level: 'read' },
  'files.deleteObject': { service: 'files', level: 'write' },
  'batches.create': { service: 'batches', level: 'write' },
  'batches.list': { service: 'batches', level: 'read' },
  'batches.get': { service: 'batches', level: 'read' },
  'batches.cancel': { service: 'batches', level: 'write' },
  'batches.items': { service: 'batches', level: 'read' },
  'batches.results': { service: 'batches', level: 'read' },
  'guardrails.list': { service: 'guardrails', level: 'read' },
  'guardrails.create': { service: 'guardrails', level: 'write' },
  'guardrails.update': { service: 'guardrails', level: 'write' },
  'guardrails.delete': { service: 'guardrails', level: 'write' },
  'guardrails.evaluations': { service: 'guardrails', level: 'read' },
  'guardrails.evaluate': { service: 'guardrails', level: 'read' },
  'agents.list': { service: 'agents', level: 'read' },
  'agents.create': { service: 'agents', level: 'write' },
  'agents.get': { service: 'agents', level: 'read' },
  'agents.update': { service: 'agents', level: 'write' },
  'agents.delete': { service: 'agents', level: 'write' },
  'agents.publish': { service: 'agents', level: 'write' },
  'agents.responses': { service: 'agents', level: 'read' },
  'a2a.card': { service: 'agents', level: 'read' },
  'a2a.rpc': { service: 'agents', level: 'read' },
  'tokens.list': { service: 'tokens', level: 'read' },
  'tokens.create': { service: 'tokens', level: 'write' },
  'tokens.revoke': { service: 'tokens', level: 'write' },
  'users.list': { service: 'users', level: 'read' },
  'users.create': { service: 'users', level: 'write' },
};

/**
 * For work that reaches another service for the caller (a batch calling models and reading or writing files, an
 * agent calling models): a principal that may not reach it directly may not reach it through that work either.
 */
export function requireAccess(principal: Principal, service: Service, level: Exclude<AccessLevel, 'none'>, work: string): void {
  if (RANK[effectiveAccess(principal, service)] < RANK[level]) {
    throw ERRORS.forbidden(`This ${principal.kind === 'api_token' ? 'token' : 'user'} lacks ${level} permission on the ${service} service, which ${work} needs`);
  }
}

export function authorize(principal: Principal, operationId: string): void {
  const needed = ROUTE_PERMISSIONS[operationId];
  if (!needed) throw ERRORS.forbidden(`Operation ${operationId} has no permission rule`);
  if (RANK[effectiveAccess(principal, needed.service)] < RANK[needed.level]) {
    throw ERRORS.forbidden(`This ${principal.kind === 'api_token' ? 'token' : 'user'} lacks ${needed.level} permission on the ${needed.service} service`);
  }
}
