import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Context } from '../../context.js';
import { principalOf, requireApiToken } from '../../http/guards.js';
import { auditEventView, auditFilterFrom } from './service.js';
import { listAuditSchema, type AuditQuery } from './schemas.js';

export async function auditRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  requireApiToken(app, ctx.services.tokens);

  app.get<{ Querystring: Static<typeof AuditQuery> }>(
    '/api/client/v1/audit/logs',
    { schema: listAuditSchema, config: { projectScoped: false } },
    async (request) => {
      const events = await ctx.services.audit.list(principalOf(request).tenantId, auditFilterFrom(request.query));
      return { object: 'list' as const, data: events.map(auditEventView) };
    },
  );
}
