import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Context } from '../../context.js';
import { projectScope, requireApiToken } from '../../http/guards.js';
import { overviewSchema, usageSchema, type OverviewQuery, type UsageQuery } from './schemas.js';
import { rangeFrom } from './service.js';

export async function analyticsRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  const { analytics } = ctx.services;
  requireApiToken(app, ctx.services.tokens);

  app.get<{ Querystring: Static<typeof OverviewQuery> }>('/api/client/v1/analytics/overview', { schema: overviewSchema }, async (request) =>
    analytics.overview(projectScope(request), rangeFrom(request.query)),
  );

  app.get<{ Querystring: Static<typeof UsageQuery> }>('/api/client/v1/analytics/usage', { schema: usageSchema }, async (request) => {
    const { group_by: groupBy = 'model', interval, model } = request.query;
    return analytics.usageReport(projectScope(request), rangeFrom(request.query), { groupBy, interval, model });
  });
}
