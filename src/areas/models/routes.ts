import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Context } from '../../context.js';
import { projectScope, requireSession } from '../../http/guards.js';
import { createModelSchema, deleteModelSchema, listModelsSchema, updateModelSchema, type CreateModelBody, type UpdateModelBody } from './schemas.js';
import { modelView } from './service.js';

export async function modelRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  const { models } = ctx.services;
  requireSession(app, ctx.services.auth);

  app.get('/api/models', { schema: listModelsSchema }, async (request) => ({
    models: (await models.list(projectScope(request))).map(modelView),
  }));

  app.post<{ Body: Static<typeof CreateModelBody> }>('/api/models', { schema: createModelSchema }, async (request, reply) => {
    const model = await models.create(projectScope(request), request.body);
    request.auditResource = { type: 'model', id: model.key };
    return reply.status(201).send({ model: modelView(model) });
  });

  app.patch<{ Params: { key: string }; Body: Static<typeof UpdateModelBody> }>('/api/models/:key', { schema: updateModelSchema }, async (request) => {
    request.auditResource = { type: 'model', id: request.params.key };
    return { model: modelView(await models.update(projectScope(request), request.params.key, request.body)) };
  });

  app.delete<{ Params: { key: string } }>('/api/models/:key', { schema: deleteModelSchema }, async (request) => {
    request.auditResource = { type: 'model', id: request.params.key };
    await models.delete(projectScope(request), request.params.key);
    return { success: true as const };
  });
}
