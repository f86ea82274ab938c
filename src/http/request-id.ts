import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';

const SAFE_ID = /^[\w.:@/+=-]{1,128}$/;

/** Request ids come from the X-Request-Id header when it is sane, else a fresh UUID. */
export function requestIdFromHeaders(request: { headers: Record<string, string | string[] | undefined> }): string {
  const header = request.headers['x-request-id'];
  return typeof header === 'string' && SAFE_ID.test(header) ? header : randomUUID();
}

function adoptBodyRequestId(request: FastifyRequest): void {
  const body = request.body as { request_id?: unknown } | undefined;
  if (!body || typeof body !== 'object' || Array.isArray(body) || !('request_id' in body)) return;
  const value = body.request_id;
  delete body.request_id;
  if (typeof request.headers['x-request-id'] === 'string' || typeof value !== 'string' || !SAFE_ID.test(value)) return;
  request.requestId = value;
  request.log = request.log.child({ requestId: value });
}

/**
 * A body's `request_id` (interface 1.4) is a transport field: it becomes the request id when the header gave none,
 * and is taken out of the body so that no route schema has to list it. Every response echoes the id.
 */
export function registerRequestId(app: FastifyInstance): void {
  app.addHook('preValidation', (request, _reply, done) => {
    adoptBodyRequestId(request);
    done();
  });
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.requestId);
    done(null, payload);
  });
}
