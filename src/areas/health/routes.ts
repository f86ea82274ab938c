import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Context } from '../../context.js';
import { StringEnum } from '../../http/schemas.js';

const Status = StringEnum(['ok', 'degraded', 'down']);
const Report = Type.Object({
  status: Status,
  uptime: Type.Number(),
  timestamp: Type.String({ format: 'date-time' }),
  checks: Type.Record(
    Type.String(),
    Type.Object({
      status: Status,
      latencyMs: Type.Optional(Type.Number()),
      message: Type.Optional(Type.String()),
      details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    }),
  ),
});

/** Public probes (interface 4.12); not registered at all when HEALTH_ENDPOINT_ENABLED=false, so they 404. */
export async function healthRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  if (!ctx.config.healthEndpointEnabled) return;

  app.get(
    '/api/health/live',
    {
      schema: {
        operationId: 'health.live',
        tags: ['health'],
        response: { 200: Type.Object({ status: Type.Literal('ok'), uptime: Type.Number() }) },
      },
    },
    async () => ({ status: 'ok' as const, uptime: process.uptime() }),
  );

  app.get(
    '/api/health/ready',
    { schema: { operationId: 'health.ready', tags: ['health'], response: { 200: Report, 503: Report } } },
    async (_request, reply) => {
      const report = await ctx.health.report();
      return reply.status(report.status === 'down' ? 503 : 200).send(report);
    },
  );
}
