import { Type } from '@sinclair/typebox';
import { IsoDateTime, Name, errorResponses } from '../../http/schemas.js';
import { PROJECT_KEY_PATTERN } from './service.js';

export const ProjectView = Type.Object({ id: Type.String(), key: Type.String(), name: Type.String(), createdAt: IsoDateTime });

export const CreateProjectBody = Type.Object(
  { name: Name, key: Type.Optional(Type.String({ pattern: PROJECT_KEY_PATTERN, description: '1-48 lower-case letters, digits or dashes' })) },
  { additionalProperties: false },
);

export const listProjectsSchema = {
  operationId: 'projects.list',
  tags: ['dashboard'],
  response: { 200: Type.Object({ projects: Type.Array(ProjectView) }), ...errorResponses(401, 403) },
};

export const createProjectSchema = {
  operationId: 'projects.create',
  tags: ['dashboard'],
  body: CreateProjectBody,
  response: { 201: Type.Object({ project: ProjectView }), ...errorResponses(400, 401, 403, 409) },
};
