import type { Budget, RateLimit } from '../areas/limits/service.js';
import type { PermissionMap, Role } from './rbac.js';

/** Who is calling: an API token (client API) or a logged-in user (dashboard API). */
export type Principal =
  | {
      kind: 'api_token';
      tenantId: string;
      projectId: string | null;
      tokenId: string;
      role: Role;
      permissions: PermissionMap | null;
      grants: string[];
      userId: string | null;
      budget: Budget | null;
      rateLimit: RateLimit | null;
    }
  | {
      kind: 'user';
      tenantId: string;
      projectId: string | null;
      userId: string;
      email: string;
      role: Role;
      isInstanceAdmin: boolean;
    };

/** The scope every store method takes first. */
export interface ProjectScope {
  tenantId: string;
  projectId: string;
}
