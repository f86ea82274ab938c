import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';

const SAFE_ID = /^[\w.:@/+=-]{1,128}$/;

/** Request ids come from the X-Request-Id header when it is sane, else a fresh UUID. */
export function requestIdFromHeaders(request: { headers: Record<string, string | string[] | undefined> }): string {
  const header = request.headers['x-request-id'];
  return typeof header === 'string' && SAFE_ID.test(header) ? header : randomUUID();
}

/** A body's `request_id` (interface 1.4) takes over when the header gave none; every response echoes the id. */
export function registerRequestId(app: FastifyInstance): void {
  app.addHook('preValidation', async (request: FastifyRequest) => {
    if (typeof request.headers['x-request-id'] === 'string') return;
    const body = request.body as { request_id?: unknown } | undefined;
    if (body && typeof body === 'object' && typeof body.request_id === 'string' && SAFE_ID.test(body.request_id)) {
      request.requestId = body.request_id;
      request.log = request.log.child({ requestId: body.request_id });
    }
  });
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.requestId);
  });
}
