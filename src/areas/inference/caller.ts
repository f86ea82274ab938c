import type { FastifyReply, FastifyRequest } from 'fastify';
import { connectionSignal } from '../../http/connection-signal.js';
import { principalOf, projectScope } from '../../http/guards.js';
import type { Caller } from './service.js';

const SESSION_HEADER = 'x-waygate-session-id';
const MAX_SESSION_ID = 200;

/** The caller of a model call; its signal aborts when the client disconnects. */
export function callerOf(request: FastifyRequest, reply: FastifyReply): Caller {
  const principal = principalOf(request);
  const session = request.headers[SESSION_HEADER];
  return {
    scope: projectScope(request),
    tokenId: principal.kind === 'api_token' ? principal.tokenId : null,
    userId: principal.userId,
    budget: principal.kind === 'api_token' ? principal.budget : null,
    rateLimit: principal.kind === 'api_token' ? principal.rateLimit : null,
    requestId: request.requestId,
    sessionId: typeof session === 'string' && session !== '' ? session.slice(0, MAX_SESSION_ID) : null,
    signal: connectionSignal(request),
    startedAt: performance.now() - reply.elapsedTime,
    // The request itself: its upstream time is what the x-waygate-overhead-ms header leaves out.
    timing: request,
  };
}

