import { Type } from '@sinclair/typebox';
import { errorResponses, Name } from '../../http/schemas.js';
import { BUCKET_KEY_PATTERN } from './service.js';

const BucketKey = Type.String({
  pattern: BUCKET_KEY_PATTERN,
  description: '1-63 lower-case letters, digits, ".", "_" or "-", starting with a letter or digit',
});

const BucketView = Type.Object({
  object: Type.Literal('bucket'),
  key: Type.String(),
  name: Type.String(),
  created_at: Type.Integer({ description: 'Unix seconds' }),
});

const ObjectView = Type.Object({
  bucket_key: Type.String(),
  object_key: Type.String(),
  size: Type.Integer({ description: 'Bytes' }),
  content_type: Type.String(),
  sha256: Type.String({ description: 'Hex SHA-256 of the bytes' }),
  created_at: Type.Integer({ description: 'Unix seconds of the last write' }),
});

const BucketParams = Type.Object({ bucketKey: BucketKey });
const ObjectParams = Type.Object({ bucketKey: BucketKey, '*': Type.String({ description: 'The object key: the rest of the path, "/" included' }) });

export const CreateBucketBody = Type.Object({ key: BucketKey, name: Type.Optional(Name) }, { additionalProperties: false });

export const createBucketSchema = {
  operationId: 'files.createBucket',
  tags: ['client'],
  summary: 'Create a bucket in the project',
  body: CreateBucketBody,
  response: { 201: BucketView, ...errorResponses(400, 401, 403, 409) },
};

export const listBucketsSchema = {
  operationId: 'files.listBuckets',
  tags: ['client'],
  summary: "The project's buckets, by key",
  response: { 200: Type.Object({ object: Type.Literal('list'), data: Type.Array(BucketView) }), ...errorResponses(400, 401, 403) },
};

export const ObjectListQuery = Type.Object(
  {
    prefix: Type.Optional(Type.String({ maxLength: 1024, description: 'Only keys that start with this text' })),
    after: Type.Optional(Type.String({ maxLength: 1024, description: 'Only keys after this one: the last key of the previous page' })),
    limit: Type.Optional(Type.Integer({ description: 'Default 100, clamped to 1-1000' })),
  },
  { additionalProperties: false },
);

export const listObjectsSchema = {
  operationId: 'files.listObjects',
  tags: ['client'],
  summary: "A bucket's objects, by key",
  params: BucketParams,
  querystring: ObjectListQuery,
  response: {
    200: Type.Object({ object: Type.Literal('list'), data: Type.Array(ObjectView), has_more: Type.Boolean() }),
    ...errorResponses(400, 401, 403, 404),
  },
};

export const putObjectSchema = {
  operationId: 'files.putObject',
  tags: ['client'],
  summary: 'Store the raw body (any content type) under the key, replacing what was there',
  /** Every media type is taken as is, so this route never answers 415 (see withCommonErrors). */
  consumes: ['*/*'],
  params: ObjectParams,
  response: { 201: ObjectView, ...errorResponses(400, 401, 403, 404, 413) },
};

export const getObjectSchema = {
  operationId: 'files.getObject',
  tags: ['client'],
  summary: "The object's bytes, with its content type",
  params: ObjectParams,
  response: {
    200: {
      description: 'The bytes as stored, with the stored Content-Type (documented here as any bytes)',
      content: { 'application/octet-stream': { schema: Type.String({ format: 'binary' }) } },
    },
    ...errorResponses(400, 401, 403, 404),
  },
};

export const deleteObjectSchema = {
  operationId: 'files.deleteObject',
  tags: ['client'],
  summary: 'Remove the object and its bytes',
  params: ObjectParams,
  response: {
    200: Type.Object({ deleted: Type.Literal(true), bucket_key: Type.String(), object_key: Type.String() }),
    ...errorResponses(400, 401, 403, 404),
  },
};
