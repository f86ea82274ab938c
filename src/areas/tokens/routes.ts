import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Context } from '../../context.js';
import { principalOf, requireApiToken, requireSession, userOf } from '../../http/guards.js';
import { tokenView } from './service.js';
import { createTokenSchema, listTokensSchema, revokeTokenSchema, selfTokenSchema, type CreateTokenBody } from './schemas.js';

export async function tokenRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  const { tokens, auth } = ctx.services;

  await app.register(async (dashboard) => {
    requireSession(dashboard, auth);

    dashboard.get('/api/tokens', { schema: listTokensSchema }, async (request) => ({
      tokens: (await tokens.list(userOf(request))).map(tokenView),
    }));

    dashboard.post<{ Body: Static<typeof CreateTokenBody> }>('/api/tokens', { schema: createTokenSchema }, async (request, reply) => {
      const { token, value } = await tokens.create(userOf(request), request.body);
      request.auditResource = { type: 'api_token', id: token.id };
      return reply.status(201).send({ token: tokenView(token), value });
    });

    dashboard.delete<{ Params: { id: string } }>('/api/tokens/:id', { schema: revokeTokenSchema }, async (request) => {
      const token = await tokens.revoke(userOf(request), request.params.id);
      request.auditResource = { type: 'api_token', id: token.id };
      return { token: tokenView(token) };
    });
  });

  await app.register(async (client) => {
    requireApiToken(client, tokens);
    client.get('/api/client/v1/token', { schema: selfTokenSchema, config: { projectScoped: false } }, async (request) => {
      const principal = principalOf(request);
      if (principal.kind !== 'api_token') throw new Error('token guard let a non-token principal through');
      const { tokenId: id, tenantId, projectId, role, permissions, grants } = principal;
      return { data: { id, tenantId, projectId, role, permissions, grants } };
    });
  });
}
