import { asText } from '../platform/text.js';

/** Error types in OpenAI's vocabulary, which the official SDKs parse. */
export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'conflict_error'
  | 'request_too_large'
  | 'rate_limit_error'
  | 'service_unavailable'
  | 'server_error'
  | 'guardrail_block';

/** An expected failure with the status and body the client gets: `{ error: { message, type, code? } }`. */
export class AppError extends Error {
  constructor(
    readonly statusCode: number,
    readonly type: ErrorType,
    message: string,
    readonly code?: string,
    readonly headers: Record<string, string> = {},
    /** Extra fields of the error object, where the interface names them (a guardrail block's findings). */
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'AppError';
  }

  /** The `{ error }` object clients get, as a response body or a stream's error event. */
  errorBody(): { error: Record<string, unknown> } {
    return { error: { message: this.message, type: this.type, ...(this.code ? { code: this.code } : {}), ...this.details } };
  }

  /** Whether the refusal tells its caller that retrying cannot help (see NO_RETRY). */
  get final(): boolean {
    return this.headers[NO_RETRY_HEADER] === 'false';
  }
}

/**
 * What tells the official OpenAI SDKs not to retry: they otherwise wait out any Retry-After, hours until the next day
 * or month, before answering their caller. Waygate's own batch worker reads it too (`AppError.final`).
 */
const NO_RETRY_HEADER = 'x-should-retry';
const NO_RETRY = { [NO_RETRY_HEADER]: 'false' };

/** An upstream's 4xx answer: the client gets the upstream's own error object. */
export class UpstreamRejection extends AppError {
  constructor(status: number, readonly body: { error: Record<string, unknown> }, headers: Record<string, string>) {
    super(status, 'invalid_request_error', asText(body.error.message, `Upstream answered ${status}`), typeof body.error.code === 'string' ? body.error.code : undefined, headers);
  }
}

/** The one catalogue of errors; handlers and services throw these, the error handler renders them. */
export const ERRORS = {
  validation: (message: string) => new AppError(400, 'invalid_request_error', message, 'invalid_request'),
  malformedJson: (detail: string) => new AppError(400, 'invalid_request_error', `Request body is not valid JSON: ${detail}`, 'invalid_json'),
  nulCharacter: (where: string) =>
    new AppError(400, 'invalid_request_error', `The ${where} contains a NUL character (\\u0000), which is not allowed`, 'nul_character'),
  loneSurrogate: () =>
    new AppError(400, 'invalid_request_error', 'The body contains a lone UTF-16 surrogate (\\ud800-\\udfff without its pair), which is not valid Unicode', 'invalid_unicode'),
  /** Requests Node's HTTP parser refuses, answered on the socket (clientErrorHandler). */
  requestTimeout: () => new AppError(408, 'invalid_request_error', 'The request did not arrive in time', 'request_timeout'),
  headersTooLarge: () => new AppError(431, 'invalid_request_error', 'The request headers are too large', 'headers_too_large'),
  malformedHttp: (reason: string | undefined) => new AppError(400, 'invalid_request_error', `The request is not valid HTTP/1.1${reason ? `: ${reason}` : ''}`, 'malformed_http'),
  unsupportedMediaType: (type: string) =>
    new AppError(415, 'invalid_request_error', `Unsupported Content-Type "${type}"; send application/json`, 'unsupported_media_type'),
  bodyTooLarge: (limit: number) =>
    new AppError(413, 'request_too_large', `Request body is larger than the limit of ${limit} bytes`, 'body_too_large'),
  projectRequired: () =>
    new AppError(400, 'invalid_request_error', 'This endpoint is project-scoped; use an API token that belongs to a project', 'project_required'),
  missingToken: () => new AppError(401, 'authentication_error', 'Missing API token: send Authorization: Bearer <token>', 'missing_token'),
  invalidToken: () => new AppError(401, 'authentication_error', 'Invalid, revoked or expired API token', 'invalid_token'),
  notAuthenticated: () => new AppError(401, 'authentication_error', 'Not authenticated: log in and send the session token', 'not_authenticated'),
  badCredentials: () => new AppError(401, 'authentication_error', 'Invalid email or password', 'invalid_credentials'),
  forbidden: (message: string) => new AppError(403, 'permission_error', message, 'insufficient_permission'),
  notLicensed: (feature: string) =>
    new AppError(403, 'permission_error', `Your licence does not cover the "${feature}" feature`, 'feature_not_licensed'),
  notFound: (what: string, id: string) => new AppError(404, 'not_found_error', `${what} "${id}" not found`, 'not_found'),
  routeNotFound: (method: string, url: string) =>
    new AppError(404, 'not_found_error', `No route for ${method} ${url}`, 'route_not_found'),
  conflict: (message: string) => new AppError(409, 'conflict_error', message, 'conflict'),
  tooManyLogins: (retryAfterSeconds: number) =>
    new AppError(429, 'rate_limit_error', `Too many login attempts; try again in ${retryAfterSeconds} s`, 'login_rate_limited', {
      'retry-after': String(retryAfterSeconds),
    }),
  rateLimited: (message: string, retryAfterSeconds: number) =>
    new AppError(429, 'rate_limit_error', message, 'rate_limit_exceeded', { 'retry-after': String(retryAfterSeconds) }),
  /** A total budget never resets, so it has no Retry-After; a used-up one asks for no retry before it (NO_RETRY). */
  budgetExceeded: (message: string, retryAfterSeconds: number | null) =>
    new AppError(429, 'rate_limit_error', message, 'budget_exceeded', {
      ...NO_RETRY,
      ...(retryAfterSeconds === null ? {} : { 'retry-after': String(retryAfterSeconds) }),
    }),
  /** A call larger than a whole limit (a budget or tokens per minute): waiting never helps, so no retry is asked for. */
  neverAdmitted: (message: string, code: 'budget_exceeded' | 'rate_limit_exceeded') => new AppError(429, 'rate_limit_error', message, code, NO_RETRY),
  /** Running calls reserved what is left of a budget: it frees as they end. */
  budgetInUse: (message: string) => new AppError(429, 'rate_limit_error', message, 'budget_in_use', { 'retry-after': '1' }),
  unavailable: (message: string, retryAfterSeconds?: number) =>
    new AppError(503, 'service_unavailable', message, 'unavailable', retryAfterSeconds ? { 'retry-after': String(retryAfterSeconds) } : {}),
  /** An upstream's own 4xx, passed through with its status and body. */
  upstreamRejected: (status: number, body: { error: Record<string, unknown> }, retryAfterMs?: number) =>
    new UpstreamRejection(status, body, retryAfterMs === undefined ? {} : { 'retry-after': String(Math.ceil(retryAfterMs / 1000)) }),
  upstreamFailed: (message: string) => new AppError(502, 'server_error', message, 'upstream_error'),
  upstreamTimeout: (message: string) => new AppError(504, 'server_error', message, 'upstream_timeout'),
  clientClosed: () => new AppError(499, 'invalid_request_error', 'The client closed the request', 'client_closed'),
  /** Interface 4.9: a guardrail with action block stopped the input or the output of a model call. */
  guardrailBlock: (guardrailKey: string, stage: 'input' | 'output', findings: { category: string; message: string; block: boolean }[]) =>
    new AppError(400, 'guardrail_block', `The ${stage} was blocked by guardrail "${guardrailKey}" (${[...new Set(findings.filter((f) => f.block).map((f) => f.category))].join(', ')})`, 'guardrail_block', {}, {
      guardrail_key: guardrailKey,
      action: 'block',
      findings,
    }),
  /** A model names a guardrail that is gone: the call is refused rather than run unchecked. */
  guardrailMissing: (modelKey: string, guardrailKey: string) =>
    new AppError(400, 'invalid_request_error', `Model "${modelKey}" names guardrail "${guardrailKey}", which does not exist in this project`, 'guardrail_missing'),
  internal: () => new AppError(500, 'server_error', 'Internal server error', 'internal_error'),
};
