import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Context } from '../../context.js';
import { requireSession, userOf } from '../../http/guards.js';
import { projectView } from '../projects/service.js';
import { userView } from '../users/service.js';
import { createTenantSchema, type CreateTenantBody } from './schemas.js';

export async function tenantRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  requireSession(app, ctx.services.auth);

  app.post<{ Body: Static<typeof CreateTenantBody> }>('/api/tenants', { schema: createTenantSchema }, async (request, reply) => {
    const { tenant, project, user } = await ctx.services.tenants.create(userOf(request), request.body);
    request.auditResource = { type: 'tenant', id: tenant.id };
    return reply.status(201).send({
      tenant: { id: tenant.id, name: tenant.name, createdAt: new Date(tenant.createdAt).toISOString() },
      project: projectView(project),
      user: userView(user),
    });
  });
}
