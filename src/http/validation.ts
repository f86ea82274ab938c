import { Ajv, type ErrorObject, type Options } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

// ajv-formats is CommonJS; under ESM interop its function may arrive as `.default`.
type AddFormats = (ajv: Ajv) => Ajv;
const addFormats: AddFormats =
  (addFormatsModule as unknown as { default?: AddFormats }).default ?? (addFormatsModule as unknown as AddFormats);

function makeAjv(options: Options): Ajv {
  // verbose: errors carry their schema, so a pattern failure can quote the field's description.
  const ajv = new Ajv({ allErrors: false, removeAdditional: false, useDefaults: true, strict: false, verbose: true, ...options });
  addFormats(ajv);
  return ajv;
}

// Bodies are JSON and must carry the right types; query strings and path params are text and are coerced.
const bodyAjv = makeAjv({ coerceTypes: false });
const textAjv = makeAjv({ coerceTypes: 'array' });

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) =>
  (httpPart === 'body' ? bodyAjv : textAjv).compile(schema as object) as ReturnType<FastifySchemaCompiler<unknown>>;

/** A validator for a JSON value outside a route (batch lines): the same rules a route's body schema applies. */
export function compileBodyValidator(schema: object): ((value: unknown) => boolean) & { errors?: Partial<ErrorObject>[] | null } {
  return bodyAjv.compile(schema);
}

/** One readable sentence naming the field and the rule, e.g. `body.role must be one of: owner, admin`. */
export function formatValidationError(errors: readonly Partial<ErrorObject>[], part: string): string {
  const error = errors[0];
  if (!error) return `Invalid ${part}`;
  const params = (error.params ?? {}) as Record<string, unknown>;
  const base = [part, ...(error.instancePath ?? '').split('/').filter(Boolean)].join('.');
  switch (error.keyword) {
    case 'required':
      return `${base}.${String(params.missingProperty)} is required`;
    case 'additionalProperties':
      return `${base}.${String(params.additionalProperty)} is not a known field`;
    case 'enum':
      return `${base} must be one of: ${(params.allowedValues as unknown[]).join(', ')}`;
    case 'type':
      return `${base} must be of type ${String(params.type)}`;
    case 'pattern': {
      const description = (error.parentSchema as { description?: string } | undefined)?.description;
      return `${base} is not in the expected format${description ? ` (${description})` : ''}`;
    }
    default:
      return `${base} ${error.message ?? 'is invalid'}`;
  }
}
