import { Type } from '@sinclair/typebox';
import { GRANTS, SERVICES } from '../../http/rbac.js';
import { BudgetSchema, RateLimitSchema } from '../limits/schemas.js';
import { IsoDateTime, Name, NullableIsoDateTime, RoleSchema, StringEnum, errorResponses } from '../../http/schemas.js';

const Level = StringEnum(['none', 'read', 'write']);
const GRANTABLE_SERVICES = SERVICES.filter((s) => s !== 'self' && s !== 'auth');

export const PermissionMapSchema = Type.Object(
  Object.fromEntries(GRANTABLE_SERVICES.map((service) => [service, Type.Optional(Level)])),
  { additionalProperties: false, description: 'Narrows the role per service; services not listed get no access' },
);

export const TokenView = Type.Object({
  id: Type.String(),
  name: Type.String(),
  projectId: Type.Union([Type.String(), Type.Null()]),
  role: RoleSchema,
  permissions: Type.Union([PermissionMapSchema, Type.Null()]),
  grants: Type.Array(Type.String()),
  prefix: Type.String({ description: 'First characters of the value, for recognising it; never the value' }),
  expiresAt: NullableIsoDateTime,
  revokedAt: NullableIsoDateTime,
  budget: Type.Union([BudgetSchema, Type.Null()]),
  rateLimit: Type.Union([RateLimitSchema, Type.Null()]),
  createdByUserId: Type.Union([Type.String(), Type.Null()]),
  createdAt: IsoDateTime,
});

export const CreateTokenBody = Type.Object(
  {
    name: Name,
    projectId: Type.Union([Type.String({ minLength: 1, maxLength: 100 }), Type.Null()], {
      description: 'Project id or key; null for a project-less token',
    }),
    role: RoleSchema,
    permissions: Type.Optional(PermissionMapSchema),
    grants: Type.Optional(Type.Array(StringEnum(GRANTS), { maxItems: 10 })),
    expiresAt: Type.Optional(IsoDateTime),
    budget: Type.Optional(BudgetSchema),
    rateLimit: Type.Optional(RateLimitSchema),
  },
  { additionalProperties: false },
);

export const listTokensSchema = {
  operationId: 'tokens.list',
  tags: ['dashboard'],
  response: { 200: Type.Object({ tokens: Type.Array(TokenView) }), ...errorResponses(401, 403) },
};

export const createTokenSchema = {
  operationId: 'tokens.create',
  tags: ['dashboard'],
  summary: 'Create an API token; `value` appears only in this response',
  body: CreateTokenBody,
  response: { 201: Type.Object({ token: TokenView, value: Type.String() }), ...errorResponses(400, 401, 403, 404) },
};

export const revokeTokenSchema = {
  operationId: 'tokens.revoke',
  tags: ['dashboard'],
  params: Type.Object({ id: Type.String({ maxLength: 100 }) }),
  response: { 200: Type.Object({ token: TokenView }), ...errorResponses(401, 403, 404) },
};

export const selfTokenSchema = {
  operationId: 'tokens.self',
  tags: ['client'],
  summary: 'The calling token: its id, project, role and permissions (never its value)',
  response: {
    200: Type.Object({
      data: Type.Object({
        id: Type.String(),
        tenantId: Type.String(),
        projectId: Type.Union([Type.String(), Type.Null()]),
        role: RoleSchema,
        permissions: Type.Union([PermissionMapSchema, Type.Null()]),
        grants: Type.Array(Type.String()),
      }),
    }),
    ...errorResponses(401),
  },
};
