import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Context } from '../../context.js';
import { requireSession, userOf } from '../../http/guards.js';
import { projectView } from './service.js';
import { createProjectSchema, listProjectsSchema, updateProjectSchema, type CreateProjectBody, type UpdateProjectBody } from './schemas.js';

export async function projectRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  const { projects } = ctx.services;
  requireSession(app, ctx.services.auth);

  app.get('/api/projects', { schema: listProjectsSchema }, async (request) => ({
    projects: (await projects.list(userOf(request).tenantId)).map(projectView),
  }));

  app.post<{ Body: Static<typeof CreateProjectBody> }>('/api/projects', { schema: createProjectSchema }, async (request, reply) => {
    const project = await projects.create(userOf(request).tenantId, request.body);
    request.auditResource = { type: 'project', id: project.id };
    return reply.status(201).send({ project: projectView(project) });
  });

  app.patch<{ Params: { id: string }; Body: Static<typeof UpdateProjectBody> }>('/api/projects/:id', { schema: updateProjectSchema }, async (request) => {
    request.auditResource = { type: 'project', id: request.params.id };
    return { project: projectView(await projects.update(userOf(request).tenantId, request.params.id, request.body)) };
  });
}
