import { Readable } from 'node:stream';
import type { Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Context } from '../../context.js';
import { AppError, ERRORS } from '../../http/errors.js';
import { projectScope, requireApiToken } from '../../http/guards.js';
import { unixSeconds } from '../../platform/time.js';
import type { BucketRecord, ObjectRecord } from './store.js';
import {
  createBucketSchema,
  deleteObjectSchema,
  getObjectSchema,
  listBucketsSchema,
  listObjectsSchema,
  putObjectSchema,
  type CreateBucketBody,
  type ObjectListQuery,
} from './schemas.js';

function bucketView(bucket: BucketRecord) {
  return { object: 'bucket' as const, key: bucket.key, name: bucket.name, created_at: unixSeconds(bucket.createdAt) };
}

function objectView(bucket: BucketRecord, object: ObjectRecord) {
  return {
    bucket_key: bucket.key,
    object_key: object.key,
    size: object.size,
    content_type: object.contentType,
    sha256: object.sha256,
    created_at: unixSeconds(object.createdAt),
  };
}

type ObjectRequest = FastifyRequest<{ Params: { bucketKey: string; '*': string } }>;

function objectHeaders(object: ObjectRecord) {
  return { 'content-type': object.contentType, 'content-length': object.size, etag: `"${object.sha256}"` };
}

/** The object key is the rest of the path: it may contain "/". The router drops a trailing "/", so look at the URL. */
function objectKeyOf(request: ObjectRequest): string {
  const path = request.url.split('?')[0] ?? '';
  return path.endsWith('/') ? `${request.params['*']}/` : request.params['*'];
}

/** The document store (client API): project-scoped buckets of objects, streamed in and out. */
export async function fileRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  const { files } = ctx.services;
  requireApiToken(app, ctx.services.tokens);

  app.post<{ Body: Static<typeof CreateBucketBody> }>('/api/client/v1/files/buckets', { schema: createBucketSchema }, async (request, reply) => {
    const bucket = await files.createBucket(projectScope(request), request.body);
    request.auditResource = { type: 'bucket', id: bucket.key };
    return reply.status(201).send(bucketView(bucket));
  });

  app.get('/api/client/v1/files/buckets', { schema: listBucketsSchema }, async (request) => ({
    object: 'list' as const,
    data: (await files.listBuckets(projectScope(request))).map(bucketView),
  }));

  app.get<{ Params: { bucketKey: string }; Querystring: Static<typeof ObjectListQuery> }>(
    '/api/client/v1/files/buckets/:bucketKey/objects',
    { schema: listObjectsSchema },
    async (request) => {
      const { prefix, after, limit } = request.query;
      const page = await files.listObjects(projectScope(request), request.params.bucketKey, { prefix, after, limit });
      return { object: 'list' as const, data: page.objects.map((object) => objectView(page.bucket, object)), has_more: page.hasMore };
    },
  );

  app.get('/api/client/v1/files/buckets/:bucketKey/objects/*', { schema: getObjectSchema }, async (request: ObjectRequest, reply) => {
    const scope = projectScope(request);
    if (request.method === 'HEAD') {
      // Fastify answers HEAD with this handler: the headers alone, without reading the bytes.
      const { object } = await files.object(scope, request.params.bucketKey, objectKeyOf(request));
      // An empty stream, because an empty payload would make Fastify send Content-Length: 0.
      return reply.headers(objectHeaders(object)).send(Readable.from([]));
    }
    // Headers only once the bytes are open: a failure before then still gets a JSON error.
    const { object, body } = await files.open(scope, request.params.bucketKey, objectKeyOf(request));
    return reply.headers(objectHeaders(object)).send(body);
  });

  app.delete('/api/client/v1/files/buckets/:bucketKey/objects/*', { schema: deleteObjectSchema }, async (request: ObjectRequest) => {
    request.auditResource = { type: 'object', id: `${request.params.bucketKey}/${objectKeyOf(request)}`.slice(0, 512) };
    const { bucket, object } = await files.deleteObject(projectScope(request), request.params.bucketKey, objectKeyOf(request));
    return { deleted: true as const, bucket_key: bucket.key, object_key: object.key };
  });

  await app.register(objectUploadRoute, { ctx });
}

/** The type/subtype Fastify's own Content-Type check asks for (RFC 9110 tokens); parameters are not checked. */
const MEDIA_TYPE = /^\s*[\w!#$%&'*+.^`|~-]+\/[\w!#$%&'*+.^`|~-]+\s*(?:;|$)/;

/**
 * PUT takes any body as a stream, so it lives in its own scope without the JSON parser: every content type (none
 * included) reaches the handler unread, and the size limit is the document store's, not the JSON body limit.
 */
async function objectUploadRoute(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  const { files } = ctx.services;
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
  // Fastify answers 415 to a Content-Type that is no type/subtype ("", "text", ";charset=utf-8") before any parser
  // runs; an upload takes any bytes, so such a body is stored as application/octet-stream instead.
  app.addHook('onRequest', async (request) => {
    const type = request.headers['content-type'];
    if (type !== undefined && !MEDIA_TYPE.test(type)) request.raw.headers['content-type'] = 'application/octet-stream';
  });

  app.put('/api/client/v1/files/buckets/:bucketKey/objects/*', { schema: putObjectSchema }, async (request: ObjectRequest, reply) => {
    request.auditResource = { type: 'object', id: `${request.params.bucketKey}/${objectKeyOf(request)}`.slice(0, 512) };
    const length = request.headers['content-length'];
    try {
      const { bucket, object } = await files.putObject(projectScope(request), request.params.bucketKey, objectKeyOf(request), {
        contentType: request.headers['content-type'],
        declaredLength: length === undefined ? undefined : Number(length),
        body: (request.body as AsyncIterable<Buffer> | undefined) ?? emptyBody(),
      });
      return reply.status(201).send(objectView(bucket, object));
    } catch (err) {
      // A client that went away mid-upload is not a server failure (and nothing was kept).
      if (request.raw.destroyed && !(err instanceof AppError)) throw ERRORS.clientClosed();
      // Refused for size: close the connection rather than read the rest of a large body only to discard it.
      if (err instanceof AppError && err.statusCode === 413) reply.header('connection', 'close');
      throw err;
    }
  });
}

async function* emptyBody(): AsyncGenerator<Buffer> {}
