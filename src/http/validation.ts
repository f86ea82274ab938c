import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import fastJsonStringify from 'fast-json-stringify';
import type { FastifySerializerCompiler, FastifySchemaCompiler } from 'fastify';
import { lazy } from '../platform/lazy.js';

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

type Validate = ((value: unknown, dataCxt?: Parameters<ValidateFunction>[1]) => boolean) & { errors?: Partial<ErrorObject>[] | null; schemaEnv?: unknown };

/**
 * Compiled on its first use, not at start-up: most routes and guardrail types of a running gateway are never used,
 * and their compiled code would stay in the heap for nothing (about 3 MB of idle memory for all routes).
 */
function lazyValidator(ajv: Ajv, schema: object): Validate {
  const compiled = lazy((): Validate => ajv.compile(schema));
  const validate: Validate = (value, dataCxt) => {
    const check = compiled();
    const valid = check(value, dataCxt);
    validate.errors = check.errors;
    return valid;
  };
  // Fastify hands the request over as the parent (so Ajv may replace a root value) to validators that carry Ajv's
  // schemaEnv, as compiled ones do.
  validate.schemaEnv = true;
  return validate;
}

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) =>
  lazyValidator(httpPart === 'body' ? bodyAjv : textAjv, schema as object) as ReturnType<FastifySchemaCompiler<unknown>>;

/** Response serializers, like validators, are compiled on a route's first answer rather than at start-up. */
export const serializerCompiler: FastifySerializerCompiler<unknown> = ({ schema }) => {
  const compiled = lazy(() => fastJsonStringify(schema as object));
  return (data) => compiled()(data);
};

/** A validator for a JSON value outside a route (batch lines, guardrail configs): the rules a route's body schema applies. */
export function compileBodyValidator(schema: object): Validate {
  return lazyValidator(bodyAjv, schema);
}

type ValidationError = Partial<ErrorObject>;

/**
 * One readable sentence naming the field and the rule, e.g. `body.role must be one of: owner, admin`. A value that no
 * branch of a union accepts is described by the branch it fits best (see `unionMessage`), so the order of a union's
 * branches does not decide what the error says.
 */
export function formatValidationError(errors: readonly ValidationError[], part: string): string {
  const last = errors[errors.length - 1];
  if (last?.keyword === 'anyOf') return unionMessage(errors, last, part);
  return errors[0] ? describe(errors[0], part) : `Invalid ${part}`;
}

/**
 * Ajv lists each branch's first error before the union's own. The branch that got furthest into the value is the one
 * it was meant for: its error lies deepest (`input: [[1, -2]]` is a list of token lists whose item 1 is negative, not a
 * list of strings), or as deep but at a later item, or at the same place on a finer rule than the type (`input: []`
 * is a list that is too short, not a string). Where the value has none of the types a place takes, the answer lists
 * them.
 */
function unionMessage(errors: readonly ValidationError[], union: ValidationError, part: string): string {
  const branches = errors.filter((e) => e.keyword !== 'anyOf' && e.schemaPath?.startsWith(`${union.schemaPath}/`));
  if (branches.length === 0) return describe(union, part);
  const best = branches.reduce((chosen, next) => (furtherThan(next, chosen) ? next : chosen));
  // The best error may sit in a union inside the branch: that union (the outermost such) is described the same way.
  const inner = errors
    .filter((e) => e.keyword === 'anyOf' && e !== union && e.schemaPath?.startsWith(`${union.schemaPath}/`) && best.schemaPath!.startsWith(`${e.schemaPath}/`))
    .sort((a, b) => a.schemaPath!.length - b.schemaPath!.length)[0];
  if (inner) return unionMessage(errors, inner, part);
  if (best.keyword !== 'type') return describe(best, part);
  const types = branches.filter((e) => e.keyword === 'type' && e.instancePath === best.instancePath).map((e) => String((e.params as { type?: unknown }).type));
  return `${fieldOf(best, part)} must be of type ${orList([...new Set(types)])}`;
}

/** Whether error `a` lies further into the value than `b`: deeper, then at a later item, then on a finer rule. */
function furtherThan(a: ValidationError, b: ValidationError): boolean {
  const pathA = (a.instancePath ?? '').split('/');
  const pathB = (b.instancePath ?? '').split('/');
  if (pathA.length !== pathB.length) return pathA.length > pathB.length;
  for (let i = 0; i < pathA.length; i++) {
    if (pathA[i] === pathB[i]) continue;
    const itemA = Number(pathA[i]);
    const itemB = Number(pathB[i]);
    // Different fields of one object: neither is further.
    if (!Number.isInteger(itemA) || !Number.isInteger(itemB)) break;
    return itemA > itemB;
  }
  return a.keyword !== 'type' && b.keyword === 'type';
}

function orList(items: readonly string[]): string {
  return items.length === 1 ? items[0]! : `${items.slice(0, -1).join(', ')} or ${items[items.length - 1]}`;
}

function fieldOf(error: ValidationError, part: string): string {
  return [part, ...(error.instancePath ?? '').split('/').filter(Boolean)].join('.');
}

function describe(error: ValidationError, part: string): string {
  const params = (error.params ?? {}) as Record<string, unknown>;
  const base = fieldOf(error, part);
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
