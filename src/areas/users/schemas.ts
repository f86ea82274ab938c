import { Type } from '@sinclair/typebox';
import { Email, Name, Password, RoleSchema, errorResponses } from '../../http/schemas.js';
import { UserView } from '../auth/schemas.js';

export const CreateUserBody = Type.Object(
  { email: Email, password: Password, role: RoleSchema, name: Type.Optional(Name) },
  { additionalProperties: false },
);

export const listUsersSchema = {
  operationId: 'users.list',
  tags: ['dashboard'],
  response: { 200: Type.Object({ users: Type.Array(UserView) }), ...errorResponses(401, 403) },
};

export const createUserSchema = {
  operationId: 'users.create',
  tags: ['dashboard'],
  body: CreateUserBody,
  response: { 201: Type.Object({ user: UserView }), ...errorResponses(400, 401, 403, 409) },
};
