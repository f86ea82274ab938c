import cookie from '@fastify/cookie';
import swagger from '@fastify/swagger';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { a2aRoutes } from './areas/a2a/routes.js';
import { agentRoutes } from './areas/agents/routes.js';
import { analyticsRoutes } from './areas/analytics/routes.js';
import { auditRoutes } from './areas/audit/routes.js';
import { authRoutes } from './areas/auth/routes.js';
import { batchRoutes } from './areas/batches/routes.js';
import { fileRoutes } from './areas/files/routes.js';
import { guardrailEvaluateRoutes, guardrailRoutes } from './areas/guardrails/routes.js';
import { healthRoutes } from './areas/health/routes.js';
import { inferenceRoutes } from './areas/inference/routes.js';
import { modelRoutes } from './areas/models/routes.js';
import { openapiRoutes } from './areas/openapi/routes.js';
import { projectRoutes } from './areas/projects/routes.js';
import { tenantRoutes } from './areas/tenants/routes.js';
import { tokenRoutes } from './areas/tokens/routes.js';
import { userRoutes } from './areas/users/routes.js';
import type { Context } from './context.js';
import { registerAuditHook } from './http/audit-hook.js';
import { registerJsonParser, rejectNulInUrls } from './http/body.js';
import { clientErrorHandler, frameworkErrorHandler, overheadMs, registerErrorHandling } from './http/error-handler.js';
import { withoutTokenValues } from './http/redact.js';
import { registerRequestId, requestIdFromHeaders } from './http/request-id.js';
import { requestLineWriter } from './http/request-line.js';
import { RequestLogger } from './http/request-logger.js';
import { withCommonErrors } from './http/schemas.js';
import { serializerCompiler, validatorCompiler } from './http/validation.js';

/** Trust the nearest `hops` proxies (each hop is an X-Forwarded-For entry). */
function trustHops(hops: number): (address: string, hop: number) => boolean {
  return (_address, hop) => hop < hops;
}

/** The one app factory, used by main.ts and by every test through app.inject. Closing the app closes the context. */
export async function buildApp(ctx: Context): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: ctx.log as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'requestId' }),
    childLoggerFactory: (logger, bindings, options) => new RequestLogger(logger, bindings, options),
    genReqId: requestIdFromHeaders,
    bodyLimit: ctx.config.bodyLimitBytes,
    trustProxy: typeof ctx.config.trustProxy === 'number' ? trustHops(ctx.config.trustProxy) : ctx.config.trustProxy,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: true },
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
  }) as unknown as FastifyInstance;
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.decorateRequest('requestId', '');
  app.decorateRequest('principal', null);
  app.decorateRequest('auditResource', null);
  app.decorateRequest('auditActor', null);
  app.decorateRequest('upstreamMs', 0);
  // Hooks on every request take a callback rather than returning a promise: one promise and microtask less each.
  app.addHook('onRequest', (request, _reply, done) => {
    request.requestId = request.id;
    done();
  });
  const writeRequestLine = requestLineWriter(ctx.log);
  app.addHook('onResponse', (request, reply, done) => {
    // With the id as a field, not through request.log: the same line, without making the request's pino child.
    writeRequestLine({ requestId: request.requestId, method: request.method, url: withoutTokenValues(request.url), statusCode: reply.statusCode, ms: Math.round(reply.elapsedTime * 100) / 100, msg: 'request' });
    // A response that began before shutdown (a stream) went out without `connection: close`: its keep-alive socket
    // would hold close() until the grace period ends.
    if (ctx.health.stopping) request.raw.socket?.end();
    done();
  });
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-waygate-overhead-ms', overheadMs(reply, request.upstreamMs));
    // While shutting down, tell keep-alive clients to go, so close() is not left waiting on their idle sockets.
    if (ctx.health.stopping) reply.header('connection', 'close');
    done(null, payload);
  });
  app.addHook('onClose', async () => ctx.close());

  registerJsonParser(app);
  rejectNulInUrls(app);
  registerRequestId(app);
  registerErrorHandling(app, ctx.config.bodyLimitBytes);
  registerAuditHook(app, ctx.services.audit);

  await app.register(cookie);
  await app.register(swagger, {
    transform: ({ schema, url, route }) => ({ schema: schema && withCommonErrors(schema, route.method), url }),
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Waygate',
        version: '1.0.0',
        description: 'Client API (/api/client/v1, API token), dashboard API (/api, session) and health probes.',
      },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'API token (wgt_...)' },
          session: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'Session JWT from POST /api/auth/login, or the waygate_session cookie' },
        },
      },
    },
  });

  const options = { ctx };
  await app.register(healthRoutes, options);
  await app.register(openapiRoutes);
  await app.register(authRoutes, options);
  await app.register(tenantRoutes, options);
  await app.register(projectRoutes, options);
  await app.register(userRoutes, options);
  await app.register(tokenRoutes, options);
  await app.register(auditRoutes, options);
  await app.register(modelRoutes, options);
  await app.register(inferenceRoutes, options);
  await app.register(analyticsRoutes, options);
  await app.register(fileRoutes, options);
  await app.register(batchRoutes, options);
  await app.register(guardrailRoutes, options);
  await app.register(guardrailEvaluateRoutes, options);
  await app.register(agentRoutes, options);
  await app.register(a2aRoutes, options);
  await app.ready();
  return app;
}
