import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Context } from '../../context.js';
import { projectScope, requireApiToken } from '../../http/guards.js';
import { framesPerTick } from '../../http/sse.js';
import type { JsonObject } from '../../providers/types.js';
import { chatSchema, embeddingsSchema, getModelSchema, listModelsSchema, moderationsSchema } from './schemas.js';
import { callerOf } from './caller.js';
import type { JsonAnswer } from './service.js';

/** The provider's JSON, byte for byte when it was not changed. */
function sendAnswer(reply: FastifyReply, answer: JsonAnswer) {
  return reply.header('content-type', 'application/json; charset=utf-8').send(answer.raw ?? JSON.stringify(answer.body));
}

/** The OpenAI-compatible client endpoints (interface section 4: provider-shaped objects, no envelope). */
export async function inferenceRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  const { inference } = ctx.services;
  requireApiToken(app, ctx.services.tokens);
  const config = { audited: false };

  app.get('/api/client/v1/models', { schema: listModelsSchema }, async (request) => inference.listModels(projectScope(request)));

  app.get<{ Params: { model: string } }>('/api/client/v1/models/:model', { schema: getModelSchema }, async (request) =>
    inference.getModel(projectScope(request), request.params.model),
  );

  app.post('/api/client/v1/chat/completions', { schema: chatSchema, config }, async (request, reply) => {
    const body = request.body as JsonObject;
    const caller = callerOf(request, reply);
    if (body.stream !== true) return sendAnswer(reply, await inference.chat(caller, body));
    const frames = await inference.chatStream(caller, body);
    reply.header('content-type', 'text/event-stream; charset=utf-8').header('cache-control', 'no-cache').header('x-accel-buffering', 'no');
    return reply.send(Readable.from(framesPerTick(frames)));
  });

  app.post('/api/client/v1/embeddings', { schema: embeddingsSchema, config }, async (request, reply) =>
    sendAnswer(reply, await inference.embeddings(callerOf(request, reply), request.body as JsonObject)),
  );

  app.post('/api/client/v1/moderations', { schema: moderationsSchema, config }, async (request, reply) =>
    sendAnswer(reply, await inference.moderations(callerOf(request, reply), request.body as JsonObject)),
  );
}
