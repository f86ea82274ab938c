import { Type, type TSchema, type TUnsafe } from '@sinclair/typebox';
import { EMAIL_PATTERN, MAX_EMAIL_LENGTH, MAX_NAME_LENGTH, PASSWORD_LENGTH } from '../config.js';

export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      message: Type.String(),
      type: Type.String(),
      code: Type.Optional(Type.String()),
    }),
  },
  { description: 'Every failure: OpenAI-style error object' },
);

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request',
  401: 'Missing or invalid credentials',
  403: 'Insufficient permission or licence',
  404: 'Not found',
  409: 'Conflict',
  413: 'Body too large',
  415: 'Unsupported Content-Type',
  429: 'Too many requests',
  500: 'Internal error',
  503: 'Unavailable',
};

/** Error responses for the OpenAPI description of a route. */
export function errorResponses(...codes: number[]): Record<number, TSchema> {
  return Object.fromEntries(codes.map((code) => [code, { ...ErrorBody, description: ERROR_DESCRIPTIONS[code] ?? 'Error' }]));
}

const METHODS_WITH_BODIES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * A route's schema as the OpenAPI description shows it: with the answers every route can give besides its own, 415
 * for a non-empty body that is not JSON on a method that carries one (unless the route `consumes` any media type),
 * and 503 while the database or Redis is unreachable.
 */
export function withCommonErrors<T extends { response?: unknown; consumes?: readonly string[] }>(schema: T, method: string | string[]): T {
  const methods = Array.isArray(method) ? method : [method];
  const takesJson = methods.some((m) => METHODS_WITH_BODIES.has(m)) && !schema.consumes?.includes('*/*');
  const common = takesJson ? errorResponses(415, 503) : errorResponses(503);
  return { ...schema, response: { ...common, ...(schema.response as object | undefined) } };
}

export const IsoDateTime = Type.String({ format: 'date-time' });
export const NullableIsoDateTime = Type.Union([IsoDateTime, Type.Null()]);
export const Name = Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH });
export const Email = Type.String({ pattern: EMAIL_PATTERN, maxLength: MAX_EMAIL_LENGTH, description: 'An email address (local@domain)' });
export const Password = Type.String({ minLength: PASSWORD_LENGTH.min, maxLength: PASSWORD_LENGTH.max });
/** A string enum as plain JSON Schema `enum`, so a bad value's error lists the allowed ones. */
export function StringEnum<const T extends readonly string[]>(values: T, options: { description?: string } = {}): TUnsafe<T[number]> {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

export const RoleSchema = StringEnum(['owner', 'admin', 'member', 'viewer']);
