import { Type } from '@sinclair/typebox';
import { Email, IsoDateTime, RoleSchema, errorResponses } from '../../http/schemas.js';

export const UserView = Type.Object({
  id: Type.String(),
  email: Type.String(),
  name: Type.Union([Type.String(), Type.Null()]),
  role: RoleSchema,
  isInstanceAdmin: Type.Boolean(),
  createdAt: IsoDateTime,
});

export const LoginBody = Type.Object(
  { email: Email, password: Type.String({ minLength: 1, maxLength: 256 }) },
  { additionalProperties: false },
);

export const loginSchema = {
  operationId: 'auth.login',
  tags: ['dashboard'],
  summary: 'Log in; returns a session JWT (also set as an HttpOnly cookie)',
  body: LoginBody,
  response: {
    200: Type.Object({ token: Type.String(), expiresAt: IsoDateTime, user: UserView }),
    ...errorResponses(400, 401, 429),
  },
};

export const logoutSchema = {
  operationId: 'auth.logout',
  tags: ['dashboard'],
  summary: 'End every session of the user and clear the session cookie',
  response: { 200: Type.Object({ success: Type.Boolean() }) },
};

export const meSchema = {
  operationId: 'auth.me',
  tags: ['dashboard'],
  summary: 'The logged-in user and the current project',
  response: {
    200: Type.Object({ user: UserView, tenantId: Type.String(), projectId: Type.Union([Type.String(), Type.Null()]) }),
    ...errorResponses(401, 404),
  },
};
