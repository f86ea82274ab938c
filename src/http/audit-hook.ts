import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AuditService } from '../areas/audit/service.js';
import type { AuditEvent } from '../areas/audit/store.js';
import { newId } from '../platform/ids.js';
import { operationIdOf } from './guards.js';
import { ROUTE_PERMISSIONS } from './rbac.js';
import { withoutTokenValues } from './redact.js';

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

function outcomeOf(statusCode: number): AuditEvent['outcome'] {
  if (statusCode === 403) return 'denied';
  return statusCode < 400 ? 'success' : 'failure';
}

/** Path params that name the touched resource when the handler did not say. */
function resourceFromParams(request: FastifyRequest): string | null {
  const params = request.params as Record<string, string> | undefined;
  if (!params) return null;
  return params.id ?? params.key ?? Object.values(params)[0] ?? null;
}

/**
 * Every state-changing request, auth failure and permission denial on a routed API path becomes one
 * sanitized event: who, what, where and the outcome. Never a header value, a token, a password or a body.
 * Recorded when the response is done or the client has gone, whichever comes first: Fastify's onResponse never runs
 * for a client that left before its answer, and the change it asked for happens all the same.
 */
export function registerAuditHook(app: FastifyInstance, audit: AuditService): void {
  // onSend runs again for the error reply when a later onSend hook fails: one event per request all the same.
  const scheduled = new WeakSet<FastifyRequest>();
  app.addHook('onSend', (request, reply, payload, done) => {
    if (audited(request, reply.statusCode) && !scheduled.has(request)) {
      scheduled.add(request);
      if (reply.raw.destroyed) recordAudit(audit, request, reply);
      else reply.raw.once('close', () => recordAudit(audit, request, reply));
    }
    done(null, payload);
  });
}

function audited(request: FastifyRequest, statusCode: number): boolean {
  if (!operationIdOf(request)) return false; // unrouted (404) and undocumented internal routes
  if (statusCode === 401 || statusCode === 403) return true;
  return STATE_CHANGING.has(request.method) && request.routeOptions.config.audited !== false;
}

function recordAudit(audit: AuditService, request: FastifyRequest, reply: FastifyReply): void {
  const statusCode = reply.statusCode;
  const operationId = operationIdOf(request)!;
  const principal = request.principal;
  const actor = request.auditActor;
  const [area] = operationId.split('.');
  const path = withoutTokenValues(request.url.split('?')[0] ?? request.url);
  const userAgent = request.headers['user-agent'];
  const resourceId = request.auditResource?.id ?? resourceFromParams(request);
  audit.record({
    id: newId('aud'),
    tenantId: principal?.tenantId ?? actor?.tenantId ?? null,
    projectId: principal ? principal.projectId : (actor?.projectId ?? null),
    requestId: request.requestId,
    actorType: principal?.kind ?? (actor?.tokenId ? 'api_token' : actor ? 'user' : 'system'),
    actorUserId: principal?.kind === 'user' ? principal.userId : (principal?.userId ?? actor?.userId ?? null),
    apiTokenId: principal?.kind === 'api_token' ? principal.tokenId : (actor?.tokenId ?? null),
    service: ROUTE_PERMISSIONS[operationId]?.service ?? area ?? 'unknown',
    action: operationId,
    method: request.method,
    path: path.slice(0, 512),
    statusCode,
    outcome: outcomeOf(statusCode),
    ipAddress: request.ip ?? null,
    userAgent: typeof userAgent === 'string' ? userAgent.slice(0, 256) : null,
    resourceType: request.auditResource?.type ?? null,
    resourceId: resourceId === null ? null : withoutTokenValues(resourceId),
    createdAt: Date.now(),
  });
}
