import { Type } from '@sinclair/typebox';
import { IsoDateTime, StringEnum, errorResponses } from '../../http/schemas.js';

const Nullable = (schema: ReturnType<typeof Type.String>) => Type.Union([schema, Type.Null()]);

export const AuditEventView = Type.Object({
  id: Type.String(),
  tenantId: Nullable(Type.String()),
  projectId: Nullable(Type.String()),
  requestId: Nullable(Type.String()),
  actorType: StringEnum(['user', 'api_token', 'system']),
  actorUserId: Nullable(Type.String()),
  apiTokenId: Nullable(Type.String()),
  service: Type.String(),
  action: Type.String(),
  method: Type.String(),
  path: Type.String(),
  statusCode: Type.Integer(),
  outcome: StringEnum(['success', 'failure', 'denied']),
  ipAddress: Nullable(Type.String()),
  userAgent: Nullable(Type.String()),
  resourceType: Nullable(Type.String()),
  resourceId: Nullable(Type.String()),
  createdAt: IsoDateTime,
});

const Text = Type.String({ maxLength: 500 });

export const AuditQuery = Type.Object({
  action: Type.Optional(Text),
  actorUserId: Type.Optional(Text),
  from: Type.Optional(Type.String({ maxLength: 100, description: 'ISO 8601, inclusive; unparseable values are ignored' })),
  to: Type.Optional(Type.String({ maxLength: 100, description: 'ISO 8601, inclusive; unparseable values are ignored' })),
  method: Type.Optional(Type.String({ maxLength: 20, description: 'HTTP method; upper-cased' })),
  outcome: Type.Optional(Type.String({ maxLength: 50, description: 'success, failure or denied; other values are ignored' })),
  q: Type.Optional(Type.String({ maxLength: 200, description: 'Free text over action, service, path and actor fields' })),
  service: Type.Optional(Text),
  limit: Type.Optional(Type.Integer({ description: 'Default 100, clamped to 1-1000' })),
  skip: Type.Optional(Type.Integer({ description: 'Default 0' })),
});

export const listAuditSchema = {
  operationId: 'audit.list',
  tags: ['client'],
  summary: 'Tenant-wide audit log, newest first (owner/admin tokens or the audit:read grant)',
  querystring: AuditQuery,
  response: {
    200: Type.Object({ object: Type.Literal('list'), data: Type.Array(AuditEventView) }),
    // Interface 4.4 lists 500 among the statuses.
    ...errorResponses(400, 401, 403, 500),
  },
};
