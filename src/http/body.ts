import type { FastifyInstance, FastifyRequest } from 'fastify';
import secureJson from 'secure-json-parse';
import { jsonNestsDeeperThan, LONE_SURROGATE } from '../platform/text.js';
import { ERRORS } from './errors.js';

/** What PostgreSQL cannot store: NUL characters and lone UTF-16 surrogates (JSONB refuses both). */
type Unstorable = 'nul' | 'surrogate';

function unstorableIn(text: string): Unstorable | null {
  if (text.includes('\0')) return 'nul';
  return LONE_SURROGATE.test(text) ? 'surrogate' : null;
}

/** The first unstorable string (key or value) in a parsed JSON value. Iterative: nesting depth is the client's. */
function findUnstorable(root: unknown): Unstorable | null {
  const pending: unknown[] = [root];
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value === 'string') {
      const found = unstorableIn(value);
      if (found) return found;
    } else if (Array.isArray(value)) {
      for (const item of value) pending.push(item);
    } else if (value !== null && typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) {
        const found = unstorableIn(key);
        if (found) return found;
        pending.push(item);
      }
    }
  }
  return null;
}

/** Only bodies that spell out a NUL or a surrogate escape can hold one (the wire text is decoded UTF-8). */
const SUSPECT = /\\u0000|\0|\\u[dD][89a-fA-F]/;

/** A raw NUL, or a \u escape that may spell one or a surrogate: the regular expression runs only then. */
function mayBeUnstorable(text: string, hasEscape: boolean): boolean {
  return text.includes('\0') || (hasEscape && SUSPECT.test(text));
}

const BYTE_ORDER_MARK = 0xfeff;

/**
 * Whether the text needs secure-json-parse: it refuses `"__proto__":` and `"constructor":` keys, spelled out or with
 * \u escapes, and skips a leading byte order mark. Other text is read the same by JSON.parse alone; a few substring
 * searches cost far less than its two regular expressions over every body.
 */
function needsSecureParse(text: string, hasEscape: boolean): boolean {
  return hasEscape || text.charCodeAt(0) === BYTE_ORDER_MARK || text.includes('__proto__') || text.includes('constructor');
}

/** Deepest nesting of arrays and objects a client's JSON may have: deeper, writing it out again could overflow the stack. */
export const MAX_JSON_DEPTH = 100;

/**
 * Client JSON as Fastify's own parser reads it (`__proto__` and `constructor.prototype` keys refused, not merged),
 * and only values PostgreSQL can store. Throws the 400 to answer; `where` names the text in the message.
 */
export function parseClientJson(text: string, where = 'body'): unknown {
  let value: unknown;
  const hasEscape = text.includes('\\u');
  try {
    value = needsSecureParse(text, hasEscape) ? secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' }) : JSON.parse(text);
  } catch (err) {
    throw ERRORS.malformedJson(err instanceof Error ? err.message : String(err));
  }
  if (jsonNestsDeeperThan(text, value, MAX_JSON_DEPTH)) throw ERRORS.validation(`JSON of the ${where} nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`);
  const unstorable = mayBeUnstorable(text, hasEscape) ? findUnstorable(value) : null;
  if (unstorable === 'nul') throw ERRORS.nulCharacter(where);
  if (unstorable === 'surrogate') throw ERRORS.loneSurrogate();
  return value;
}

function parseJson(_request: FastifyRequest, body: string | Buffer, done: (err: Error | null, value?: unknown) => void): void {
  const text = body.toString().trim();
  if (text === '') return done(null, undefined);
  try {
    done(null, parseClientJson(text));
  } catch (err) {
    done(err as Error, undefined);
  }
}

/**
 * JSON bodies: an empty body is accepted as "no body" even with Content-Type: application/json
 * (many clients send that header on a bodiless POST), and malformed JSON is a clear 400.
 */
export function registerJsonParser(app: FastifyInstance): void {
  // Only JSON by default (no text/plain), so other media types get a clear 415; areas add their own parsers.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parseJson);
  // Fastify matches a pattern against the whole header, parameters included.
  app.addContentTypeParser(/^application\/[\w.-]+\+json\s*(?:;|$)/i, { parseAs: 'string' }, parseJson);
  // A bodiless request is no body whatever it is labelled (`curl -X POST -d ''` says form-urlencoded); a body of
  // another type is a 415, refused before it is read.
  app.addContentTypeParser('*', (request, _payload, done) => {
    // An unknown route answers 404 whatever its body (Fastify asks no parser then, unless one matches everything).
    if (request.is404) return done(null, undefined);
    const length = request.headers['content-length'];
    if (request.headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) return done(null, undefined);
    done(ERRORS.unsupportedMediaType(mediaTypeOf(request)));
  });
}

/** A request's media type as an error may quote it: without parameters, at most 100 characters. */
export function mediaTypeOf(request: FastifyRequest): string {
  return String(request.headers['content-type'] ?? '').split(';')[0]!.slice(0, 100);
}

/** NUL cannot be stored in PostgreSQL text; %00 is the only way one reaches decoded path parameters and query values. */
export function rejectNulInUrls(app: FastifyInstance): void {
  app.addHook('onRequest', (request, _reply, done) => {
    done(request.url.includes('%00') ? ERRORS.nulCharacter('URL') : undefined);
  });
}
