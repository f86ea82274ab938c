import { Type } from '@sinclair/typebox';
import { IsoDateTime, Name, errorResponses } from '../../http/schemas.js';

export const ProjectView = Type.Object({ id: Type.String(), key: Type.String(), name: Type.String(), createdAt: IsoDateTime });

export const CreateProjectBody = Type.Object(
  { name: Name, key: Type.Optional(Type.String({ pattern: '^[a-z0-9][a-z0-9-]{0,47}$' })) },
  { additionalProperties: false },
);

export const listProjectsSchema = {
  operationId: 'projects.list',
  tags: ['dashboard'],
  security: [{ session: [] }],
  response: { 200: Type.Object({ projects: Type.Array(ProjectView) }), ...errorResponses(401, 403) },
};

export const createProjectSchema = {
  operationId: 'projects.create',
  tags: ['dashboard'],
  security: [{ session: [] }],
  body: CreateProjectBody,
  response: { 201: Type.Object({ project: ProjectView }), ...errorResponses(400, 401, 403, 409) },
};
