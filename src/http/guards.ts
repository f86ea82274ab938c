import type { FastifyInstance, FastifyRequest } from 'fastify';
import { SESSION_COOKIE, type AuthService } from '../areas/auth/service.js';
import type { TokenCheck, TokenService } from '../areas/tokens/service.js';
import { licenceCovers, type Licence } from '../platform/licence.js';
import { ERRORS } from './errors.js';
import type { Principal, ProjectScope } from './principal.js';
import { authorize, ROUTE_PERMISSIONS } from './rbac.js';

export function operationIdOf(request: FastifyRequest): string | undefined {
  return (request.routeOptions.schema as { operationId?: string } | undefined)?.operationId;
}

function bearer(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/**
 * Every route of a guarded scope must be in the RBAC table, or start-up fails; its OpenAPI description gets the
 * scope's security scheme from the guard itself, so the document cannot claim less than the code enforces.
 */
function guardRoutes(scope: FastifyInstance, scheme: 'bearer' | 'session'): void {
  scope.addHook('onRoute', (route) => {
    const operationId = (route.schema as { operationId?: string } | undefined)?.operationId;
    if (!operationId || !ROUTE_PERMISSIONS[operationId]) {
      throw new Error(`Route ${route.method} ${route.url} needs an operationId listed in ROUTE_PERMISSIONS`);
    }
    route.schema = { ...route.schema, security: [{ [scheme]: [] }] } as typeof route.schema;
  });
}

function admit(request: FastifyRequest, principal: Principal): void {
  request.principal = principal;
  authorize(principal, operationIdOf(request)!);
  if (request.routeOptions.config.projectScoped !== false && principal.projectId === null) throw ERRORS.projectRequired();
}

/** Admits a request with its checked token: the error to answer with, or undefined. */
function admitChecked(request: FastifyRequest, { principal, refused }: TokenCheck): Error | undefined {
  if (!principal) {
    if (refused) request.auditActor = refused;
    return ERRORS.invalidToken();
  }
  try {
    admit(request, principal);
    return undefined;
  } catch (err) {
    return err as Error;
  }
}

/** Client API: `Authorization: Bearer wgt_...`; 401, then 403 (RBAC), then 400 for a project-less token. */
export function requireApiToken(scope: FastifyInstance, tokens: TokenService): void {
  guardRoutes(scope, 'bearer');
  // A callback rather than a promise: a token held in memory (nearly every call) is admitted without an await.
  scope.addHook('onRequest', (request, _reply, done) => {
    const value = bearer(request);
    if (value === undefined) return done(ERRORS.missingToken());
    const held = tokens.checkHeld(value);
    if (held) return done(admitChecked(request, held));
    // A rejection is always answered as an error, whatever it was rejected with: done() without one lets the request in.
    tokens.check(value).then(
      (checked) => done(admitChecked(request, checked)),
      (err: unknown) => done(err instanceof Error ? err : new Error(`token check failed: ${String(err)}`)),
    );
  });
}

/** The session JWT a request presents: `Authorization: Bearer` or the HttpOnly cookie. */
export function sessionCredential(request: FastifyRequest): string | undefined {
  return bearer(request) ?? request.cookies[SESSION_COOKIE];
}

/** Dashboard API: a session JWT as `Authorization: Bearer` or the HttpOnly cookie; 401 without. */
export function requireSession(scope: FastifyInstance, auth: AuthService): void {
  guardRoutes(scope, 'session');
  scope.addHook('onRequest', async (request) => {
    const jwt = sessionCredential(request);
    if (!jwt) throw ERRORS.notAuthenticated();
    const projectHeader = request.headers['x-waygate-project'];
    const principal = await auth.authenticate(jwt, typeof projectHeader === 'string' ? projectHeader : undefined);
    if (!principal) throw ERRORS.notAuthenticated();
    request.principal = principal;
    authorize(principal, operationIdOf(request)!);
  });
}

/** Licence gate for a scope: 403 when the licence does not cover the feature (checked per request, so expiry bites). */
export function requireFeature(scope: FastifyInstance, licence: Licence, feature: string): void {
  scope.addHook('onRequest', async () => {
    if (!licenceCovers(licence, feature)) throw ERRORS.notLicensed(feature);
  });
}

/** The caller's project scope; handlers of project-scoped routes call this. */
export function projectScope(request: FastifyRequest): ProjectScope {
  const principal = request.principal;
  if (!principal) throw ERRORS.notAuthenticated();
  if (principal.projectId === null) throw ERRORS.projectRequired();
  return { tenantId: principal.tenantId, projectId: principal.projectId };
}

export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw ERRORS.notAuthenticated();
  return request.principal;
}

export function userOf(request: FastifyRequest): Extract<Principal, { kind: 'user' }> {
  const principal = principalOf(request);
  if (principal.kind !== 'user') throw ERRORS.notAuthenticated();
  return principal;
}
