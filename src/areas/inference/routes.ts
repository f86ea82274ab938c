import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Context } from '../../context.js';
import { principalOf, projectScope, requireApiToken } from '../../http/guards.js';
import type { JsonObject } from '../../providers/types.js';
import { chatSchema, embeddingsSchema, listModelsSchema, moderationsSchema } from './schemas.js';
import type { Caller, JsonAnswer } from './service.js';

const SESSION_HEADER = 'x-waygate-session-id';
const MAX_SESSION_ID = 200;

/** The caller of a model call; its signal aborts when the client disconnects before the answer is complete. */
function callerOf(request: FastifyRequest, reply: FastifyReply): Caller {
  const principal = principalOf(request);
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  const session = request.headers[SESSION_HEADER];
  return {
    scope: projectScope(request),
    tokenId: principal.kind === 'api_token' ? principal.tokenId : null,
    userId: principal.userId,
    budget: principal.kind === 'api_token' ? principal.budget : null,
    rateLimit: principal.kind === 'api_token' ? principal.rateLimit : null,
    requestId: request.requestId,
    sessionId: typeof session === 'string' && session !== '' ? session.slice(0, MAX_SESSION_ID) : null,
    signal: controller.signal,
    startedAt: performance.now() - reply.elapsedTime,
  };
}

/** The provider's JSON, byte for byte when it was not changed. */
function sendAnswer(request: FastifyRequest, reply: FastifyReply, answer: JsonAnswer) {
  request.upstreamMs = answer.upstreamMs;
  return reply.header('content-type', 'application/json; charset=utf-8').send(answer.raw ?? JSON.stringify(answer.body));
}

/** The OpenAI-compatible client endpoints (interface section 4: provider-shaped objects, no envelope). */
export async function inferenceRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  const { inference } = ctx.services;
  requireApiToken(app, ctx.services.tokens);
  const config = { audited: false };

  app.get('/api/client/v1/models', { schema: listModelsSchema }, async (request) => inference.listModels(projectScope(request)));

  app.post('/api/client/v1/chat/completions', { schema: chatSchema, config }, async (request, reply) => {
    const body = request.body as JsonObject;
    const caller = callerOf(request, reply);
    if (body.stream !== true) return sendAnswer(request, reply, await inference.chat(caller, body));
    const answer = await inference.chatStream(caller, body);
    request.upstreamMs = answer.upstreamMs;
    reply.header('content-type', 'text/event-stream; charset=utf-8').header('cache-control', 'no-cache').header('x-accel-buffering', 'no');
    return reply.send(Readable.from(answer.frames));
  });

  app.post('/api/client/v1/embeddings', { schema: embeddingsSchema, config }, async (request, reply) =>
    sendAnswer(request, reply, await inference.embeddings(callerOf(request, reply), request.body as JsonObject)),
  );

  app.post('/api/client/v1/moderations', { schema: moderationsSchema, config }, async (request, reply) =>
    sendAnswer(request, reply, await inference.moderations(callerOf(request, reply), request.body as JsonObject)),
  );
}
