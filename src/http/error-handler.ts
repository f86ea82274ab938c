import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DependencyUnavailableError, isConnectionFailure } from '../platform/errors.js';
import { AppError, ERRORS, UpstreamRejection } from './errors.js';
import { mediaTypeOf } from './body.js';
import { formatValidationError } from './validation.js';

/** Maps what Fastify itself throws (parsing, limits, validation) onto the catalogue. */
function toAppError(error: FastifyError, bodyLimit: number, contentType: string): AppError {
  if (error instanceof AppError) return error;
  if (error instanceof DependencyUnavailableError) return ERRORS.unavailable(`${error.dependency} is unreachable; try again shortly`);
  if (isConnectionFailure(error)) return ERRORS.unavailable('A backing service is unreachable or saturated; try again shortly', 5);
  if (error.validation) return ERRORS.validation(formatValidationError(error.validation, error.validationContext ?? 'body'));
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return ERRORS.bodyTooLarge(bodyLimit);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return ERRORS.unsupportedMediaType(contentType);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return ERRORS.malformedJson(error.message);
  }
  const status = clientStatus(error);
  return status === undefined ? ERRORS.internal() : new AppError(status, 'invalid_request_error', error.message, error.code);
}

/** The 4xx status Fastify gave an error, if it gave one. */
function clientStatus(error: FastifyError): number | undefined {
  return typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : undefined;
}

function send(reply: FastifyReply, appError: AppError): void {
  void reply.status(appError.statusCode).headers(appError.headers);
  if (appError instanceof UpstreamRejection) {
    // The upstream's own error object, every field kept: serialised here, not through the route's error schema.
    void reply.header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(appError.body));
    return;
  }
  if (Object.keys(appError.details).length === 0) {
    void reply.send(appError.errorBody());
    return;
  }
  // Extra fields (a guardrail block's findings) would be dropped by the route's error schema: serialised here.
  void reply.header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(appError.errorBody()));
}

/** x-waygate-overhead-ms: the time the request spent in Waygate so far, its upstream waits left out. */
export function overheadMs(reply: FastifyReply, upstreamMs: number): string {
  return Math.max(0, reply.elapsedTime - upstreamMs).toFixed(3);
}

/**
 * Errors Fastify raises before routing (a badly encoded URL, an over-long path parameter): hooks do not run
 * for these, so the headers every answer carries are set here (no upstream was asked).
 */
export function frameworkErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const status = clientStatus(error) ?? 400;
  const message = error.code === 'FST_ERR_BAD_URL' ? `Malformed URL: ${request.url.slice(0, 200)}` : error.message;
  // request.id is what genReqId gave this request (and its log lines): the client's, or a new one.
  void reply.header('x-request-id', request.id).header('x-waygate-overhead-ms', overheadMs(reply, 0));
  send(reply, new AppError(status, 'invalid_request_error', message, error.code === 'FST_ERR_BAD_URL' ? 'bad_url' : 'invalid_request'));
}

/**
 * Requests Node's HTTP parser refuses (a header line without a colon, a control character in a header, both
 * Content-Length and Transfer-Encoding, headers too large, a request too slow to arrive) never reach Fastify: they
 * get the same `{ error }` shape and an x-request-id, written on the socket, which is then closed.
 */
export function clientErrorHandler(error: Error & { code?: string; reason?: string }, socket: Socket): void {
  // A reset connection is already gone; nothing can be written to it.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // A response already under way on this socket cannot be followed by another: the connection is only closed.
  if ((socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent) {
    socket.destroy(error);
    return;
  }
  const appError =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? ERRORS.requestTimeout() : error.code === 'HPE_HEADER_OVERFLOW' ? ERRORS.headersTooLarge() : ERRORS.malformedHttp(error.reason);
  const body = JSON.stringify(appError.errorBody());
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${appError.statusCode} ${STATUS_CODES[appError.statusCode]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${randomUUID()}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}

export function registerErrorHandling(app: FastifyInstance, bodyLimit: number): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const appError = toAppError(error, bodyLimit, mediaTypeOf(request));
    // 502 and 504 are an upstream model's failure, not Waygate's: worth a warning, not an error.
    if (appError.statusCode === 502 || appError.statusCode === 504) request.log.warn({ err: error }, 'upstream model failed');
    else if (appError.statusCode >= 500) request.log.error({ err: error }, appError.statusCode === 503 ? 'backing service unavailable' : 'request failed');
    send(reply, appError);
  });
  app.setNotFoundHandler((request, reply) => send(reply, ERRORS.routeNotFound(request.method, request.url.split('?')[0] ?? request.url)));
}
