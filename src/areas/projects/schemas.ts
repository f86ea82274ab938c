import { Type } from '@sinclair/typebox';
import { IsoDateTime, Name, errorResponses } from '../../http/schemas.js';
import { BudgetSchema, RateLimitSchema } from '../limits/schemas.js';
import { PROJECT_KEY_PATTERN } from './service.js';

export const ProjectView = Type.Object({
  id: Type.String(),
  key: Type.String(),
  name: Type.String(),
  budget: Type.Union([BudgetSchema, Type.Null()]),
  rateLimit: Type.Union([RateLimitSchema, Type.Null()]),
  createdAt: IsoDateTime,
});

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

export const UpdateProjectBody = Type.Object(
  {
    name: Type.Optional(Name),
    budget: Type.Optional(Type.Union([BudgetSchema, Type.Null()], { description: 'Applies to every token of the project; null removes it' })),
    rateLimit: Type.Optional(Type.Union([RateLimitSchema, Type.Null()], { description: 'Shared by every token of the project; null removes it' })),
  },
  { additionalProperties: false },
);

export const updateProjectSchema = {
  operationId: 'projects.update',
  tags: ['dashboard'],
  summary: 'Rename a project or set its budget and rate limit',
  params: Type.Object({ id: Type.String({ maxLength: 100, description: 'Project id or key' }) }),
  body: UpdateProjectBody,
  response: { 200: Type.Object({ project: ProjectView }), ...errorResponses(400, 401, 403, 404) },
};
