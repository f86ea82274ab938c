import { Readable } from 'node:stream';
import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Context } from '../../context.js';
import { principalOf, projectScope, requireApiToken } from '../../http/guards.js';
import { requireAccess } from '../../http/rbac.js';
import {
  cancelBatchSchema,
  createBatchSchema,
  getBatchSchema,
  listBatchesSchema,
  listItemsSchema,
  resultsSchema,
  type BatchListQuery,
  type CreateBatchBody,
  type ItemListQuery,
  type ResultsQuery,
} from './schemas.js';
import { batchView, itemView } from './views.js';

type BatchParams = { batchId: string };

/** Batches (client API, interface 4.7). */
export async function batchRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  const { batches } = ctx.services;
  requireApiToken(app, ctx.services.tokens);

  app.post<{ Body: Static<typeof CreateBatchBody> }>('/api/client/v1/batches', { schema: createBatchSchema }, async (request, reply) => {
    const principal = principalOf(request);
    requireAccess(principal, 'models', 'read', 'running a batch');
    if (request.body.input_file) requireAccess(principal, 'files', 'read', 'input_file');
    if (request.body.output_bucket_key !== undefined) requireAccess(principal, 'files', 'write', 'output_bucket_key');
    const { request_id: _requestId, ...input } = request.body;
    const batch = await batches.create(
      { scope: projectScope(request), tokenId: principal.kind === 'api_token' ? principal.tokenId : null, userId: principal.userId },
      input,
    );
    request.auditResource = { type: 'batch', id: batch.id };
    return reply.status(201).send(batchView(batch));
  });

  app.get<{ Querystring: Static<typeof BatchListQuery> }>('/api/client/v1/batches', { schema: listBatchesSchema }, async (request) => {
    const page = await batches.list(projectScope(request), request.query);
    return { object: 'list' as const, data: page.batches.map(batchView), has_more: page.hasMore };
  });

  app.get<{ Params: BatchParams }>('/api/client/v1/batches/:batchId', { schema: getBatchSchema }, async (request) =>
    batchView(await batches.get(projectScope(request), request.params.batchId)),
  );

  app.post<{ Params: BatchParams }>('/api/client/v1/batches/:batchId/cancel', { schema: cancelBatchSchema }, async (request) => {
    request.auditResource = { type: 'batch', id: request.params.batchId };
    return batchView(await batches.cancel(projectScope(request), request.params.batchId));
  });

  app.get<{ Params: BatchParams; Querystring: Static<typeof ItemListQuery> }>('/api/client/v1/batches/:batchId/items', { schema: listItemsSchema }, async (request) => {
    const items = await batches.items(projectScope(request), request.params.batchId, request.query);
    return { object: 'list' as const, data: items.map(itemView) };
  });

  app.get<{ Params: BatchParams; Querystring: Static<typeof ResultsQuery> }>('/api/client/v1/batches/:batchId/results', { schema: resultsSchema }, async (request, reply) => {
    const lines = await batches.results(projectScope(request), request.params.batchId, request.query.status);
    return reply.header('content-type', 'application/jsonl').send(Readable.from(lines));
  });
}
