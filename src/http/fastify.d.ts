import type { Principal } from './principal.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** From X-Request-Id, the body's request_id, or generated; echoed on every response. */
    requestId: string;
    /** Set by the token or session guard of the route's scope. */
    principal: Principal | null;
    /** The resource a state-changing request touched, for its audit event. */
    auditResource: { type: string; id: string } | null;
    /** Who a request acted as when it was not authenticated: a login's account, a revoked or expired token. */
    auditActor: { tenantId: string; userId?: string | null; tokenId?: string; projectId?: string | null } | null;
    /** Milliseconds spent waiting on an upstream model; x-waygate-overhead-ms is the rest. */
    upstreamMs: number;
  }
  interface FastifyContextConfig {
    /** Client-API routes are project-scoped unless they say otherwise (audit is tenant-wide). */
    projectScoped?: boolean;
    /** Model calls are recorded as usage events, not audit events (their denials are still audited). */
    audited?: boolean;
  }
}
