import { Type } from '@sinclair/typebox';
import { Email, IsoDateTime, Name, Password, errorResponses } from '../../http/schemas.js';
import { UserView } from '../auth/schemas.js';
import { ProjectView } from '../projects/schemas.js';

export const CreateTenantBody = Type.Object(
  { name: Name, ownerEmail: Email, ownerPassword: Password },
  { additionalProperties: false },
);

export const createTenantSchema = {
  operationId: 'tenants.create',
  tags: ['dashboard'],
  summary: 'Create a tenant with its default project and owner (instance admin only)',
  body: CreateTenantBody,
  response: {
    201: Type.Object({
      tenant: Type.Object({ id: Type.String(), name: Type.String(), createdAt: IsoDateTime }),
      project: ProjectView,
      user: UserView,
    }),
    ...errorResponses(400, 401, 403, 409),
  },
};
