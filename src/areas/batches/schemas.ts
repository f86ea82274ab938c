import { Type } from '@sinclair/typebox';
import { errorResponses, StringEnum } from '../../http/schemas.js';
import { BUCKET_KEY_PATTERN } from '../files/service.js';
import { BATCH_ENDPOINTS, MAX_CUSTOM_ID_LENGTH } from './input.js';
import { BATCH_STATUSES, ITEM_STATUSES } from './store.js';

const Seconds = Type.Integer({ description: 'Unix seconds' });
const NullableSeconds = Type.Union([Seconds, Type.Null()]);
const Usage = Type.Object({ input_tokens: Type.Integer(), output_tokens: Type.Integer(), total_tokens: Type.Integer() });
const FileRef = Type.Object({ bucket_key: Type.String(), object_key: Type.String() });
const BatchId = Type.String({ minLength: 1, maxLength: 100 });

const BatchView = Type.Object({
  id: Type.String(),
  object: Type.Literal('batch'),
  endpoint: Type.String(),
  status: StringEnum(BATCH_STATUSES),
  completion_window: Type.String(),
  input_file: Type.Union([FileRef, Type.Null()]),
  output_file: Type.Union([
    Type.Object({ bucket_key: Type.String(), object_key: Type.Union([Type.String(), Type.Null()], { description: 'Filled in once the results are written' }) }),
    Type.Null(),
  ]),
  error_message: Type.Union([Type.String(), Type.Null()]),
  request_counts: Type.Object({ total: Type.Integer(), completed: Type.Integer(), failed: Type.Integer(), cancelled: Type.Integer() }),
  usage: Usage,
  metadata: Type.Record(Type.String(), Type.Unknown()),
  created_at: Seconds,
  started_at: NullableSeconds,
  completed_at: NullableSeconds,
  cancelled_at: NullableSeconds,
});

const ItemView = Type.Object({
  id: Type.String(),
  object: Type.Literal('batch.item'),
  index: Type.Integer({ description: 'Zero-based position among the request lines' }),
  custom_id: Type.Union([Type.String(), Type.Null()]),
  status: StringEnum(ITEM_STATUSES),
  response_status_code: Type.Integer({ description: 'HTTP-like status of the item run; 0 until it has run' }),
  response_body: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()], { description: 'The model output' }),
  error_message: Type.Union([Type.String(), Type.Null()]),
  usage: Type.Union([Usage, Type.Null()]),
  started_at: NullableSeconds,
  ended_at: NullableSeconds,
});

export const CreateBatchBody = Type.Object(
  {
    endpoint: StringEnum(BATCH_ENDPOINTS),
    requests: Type.Optional(
      Type.Array(Type.Unknown(), {
        description: `Inline lines { custom_id?, body }; an object without a body key is the body itself. custom_id: up to ${MAX_CUSTOM_ID_LENGTH} characters, unique in the batch`,
      }),
    ),
    input_file: Type.Optional(
      Type.Object(
        { bucket_key: Type.String({ pattern: BUCKET_KEY_PATTERN, description: 'A bucket of the project' }), object_key: Type.String({ minLength: 1, maxLength: 1024 }) },
        { additionalProperties: false, description: 'A UTF-8 JSONL object of lines { custom_id?, method?, url?, body }; blank lines are skipped' },
      ),
    ),
    output_bucket_key: Type.Optional(Type.String({ pattern: BUCKET_KEY_PATTERN, description: 'Results are written to <batch id>_output.jsonl in this bucket on completion' })),
    completion_window: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Informational; default 24h' })),
    metadata: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()], { description: 'Echoed on the batch; at most 16 KiB as JSON' })),
    request_id: Type.Optional(Type.String({ maxLength: 200, description: 'Correlation id (also X-Request-Id)' })),
  },
  { additionalProperties: false },
);

export const createBatchSchema = {
  operationId: 'batches.create',
  tags: ['client'],
  summary: 'Create a batch: every line is validated and stored in one transaction, then run in the background',
  body: CreateBatchBody,
  response: { 201: BatchView, ...errorResponses(400, 401, 403, 413) },
};

export const BatchListQuery = Type.Object(
  {
    status: Type.Optional(StringEnum(BATCH_STATUSES)),
    limit: Type.Optional(Type.Integer({ description: 'Default 50, clamped to 1-500' })),
    after: Type.Optional(Type.String({ maxLength: 100, description: 'The last batch id of the previous page' })),
  },
  { additionalProperties: false },
);

export const listBatchesSchema = {
  operationId: 'batches.list',
  tags: ['client'],
  summary: "The project's batches, newest first",
  querystring: BatchListQuery,
  response: { 200: Type.Object({ object: Type.Literal('list'), data: Type.Array(BatchView), has_more: Type.Boolean() }), ...errorResponses(400, 401, 403) },
};

const BatchParams = Type.Object({ batchId: BatchId });

export const getBatchSchema = {
  operationId: 'batches.get',
  tags: ['client'],
  summary: 'A batch',
  params: BatchParams,
  response: { 200: BatchView, ...errorResponses(400, 401, 403, 404) },
};

export const cancelBatchSchema = {
  operationId: 'batches.cancel',
  tags: ['client'],
  summary: 'Cancel a batch: pending items drain as cancelled, running items finish, then the batch is cancelled',
  params: BatchParams,
  response: { 200: BatchView, ...errorResponses(400, 401, 403, 404) },
};

export const ItemListQuery = Type.Object(
  {
    status: Type.Optional(StringEnum(ITEM_STATUSES)),
    limit: Type.Optional(Type.Integer({ description: 'Default 100, clamped to 1-1000' })),
    skip: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Items to skip (offset), at least 0' })),
  },
  { additionalProperties: false },
);

export const listItemsSchema = {
  operationId: 'batches.items',
  tags: ['client'],
  summary: "A batch's items by index",
  params: BatchParams,
  querystring: ItemListQuery,
  response: { 200: Type.Object({ object: Type.Literal('list'), data: Type.Array(ItemView) }), ...errorResponses(400, 401, 403, 404) },
};

export const ResultsQuery = Type.Object({ status: Type.Optional(StringEnum(['succeeded', 'failed'])) }, { additionalProperties: false });

export const resultsSchema = {
  operationId: 'batches.results',
  tags: ['client'],
  summary: 'Results as JSONL (application/jsonl): one line { id, custom_id, response, error } per succeeded or failed item, by index',
  params: BatchParams,
  querystring: ResultsQuery,
  response: {
    200: {
      description: 'One JSON object per line, in item index order',
      content: { 'application/jsonl': { schema: Type.String({ description: 'JSONL: lines { id: "batch_req_<item id>", custom_id, response: { status_code, body }, error: { code, message } | null }' }) } },
    },
    ...errorResponses(400, 401, 403, 404),
  },
};
