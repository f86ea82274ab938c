import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Context } from '../../context.js';
import { requireSession, userOf } from '../../http/guards.js';
import { userView } from './service.js';
import { createUserSchema, listUsersSchema, type CreateUserBody } from './schemas.js';

export async function userRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  const { users } = ctx.services;
  requireSession(app, ctx.services.auth);

  app.get('/api/users', { schema: listUsersSchema }, async (request) => ({
    users: (await users.list(userOf(request).tenantId)).map(userView),
  }));

  app.post<{ Body: Static<typeof CreateUserBody> }>('/api/users', { schema: createUserSchema }, async (request, reply) => {
    const user = await users.addToTenant(userOf(request), request.body);
    request.auditResource = { type: 'user', id: user.id };
    return reply.status(201).send({ user: userView(user) });
  });
}
