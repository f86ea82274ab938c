import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Context } from '../../context.js';
import { principalOf, requireApiToken } from '../../http/guards.js';
import { auditEventView } from './service.js';
import type { AuditFilter } from './store.js';
import { listAuditSchema, type AuditQuery } from './schemas.js';

const OUTCOMES = new Set(['success', 'failure', 'denied']);

function parseTime(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

/** Interface 4.4: unparseable dates and unknown outcomes are ignored; the page is clamped. */
export function auditFilterFrom(query: Static<typeof AuditQuery>): AuditFilter {
  return {
    action: query.action,
    actorUserId: query.actorUserId,
    from: parseTime(query.from),
    to: parseTime(query.to),
    method: query.method?.toUpperCase(),
    outcome: query.outcome !== undefined && OUTCOMES.has(query.outcome) ? (query.outcome as AuditFilter['outcome']) : undefined,
    q: query.q === undefined || query.q.trim() === '' ? undefined : query.q.trim(),
    service: query.service,
    limit: Math.min(1000, Math.max(1, query.limit ?? 100)),
    // Past any real row count the page is simply empty; the bound keeps the offset a valid SQL integer.
    skip: Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, query.skip ?? 0)),
  };
}

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
