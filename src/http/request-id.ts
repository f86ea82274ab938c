import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';

const SAFE_ID = /^[\w.:@/+=-]{1,128}$/;

/** Request ids come from the X-Request-Id header when it is sane, else a fresh UUID. */
export function requestIdFromHeaders(request: { headers: Record<string, string | string[] | undefined> }): string {
  const header = request.headers['x-request-id'];
  return typeof header === 'string' && SAFE_ID.test(header) ? header : randomUUID();
}

/** Takes `request_id` out of a body or query string, and makes it the request id unless the header gave one. */
function adoptRequestId(request: FastifyRequest, holder: unknown): void {
  if (!holder || typeof holder !== 'object' || Array.isArray(holder) || !Object.hasOwn(holder, 'request_id')) return;
  const fields = holder as { request_id?: unknown };
  const value = fields.request_id;
  delete fields.request_id;
  if (typeof request.headers['x-request-id'] === 'string' || request.requestId !== request.id || typeof value !== 'string' || !SAFE_ID.test(value)) return;
  request.requestId = value;
  request.log = request.log.child({ requestId: value });
}

/**
 * A `request_id` (interface 1.4) in the body or the query string is a transport field: it becomes the request id
 * when the header gave none (the body's first), and is taken out so that no route schema has to list it. Every
 * response echoes the id.
 */
export function registerRequestId(app: FastifyInstance): void {
  app.addHook('preValidation', (request, _reply, done) => {
    adoptRequestId(request, request.body);
    adoptRequestId(request, request.query);
    done();
  });
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.requestId);
    done(null, payload);
  });
}
