import type { FastifyInstance, FastifyRequest } from 'fastify';
import secureJson from 'secure-json-parse';
import { ERRORS } from './errors.js';

/** True when any string (key or value) in a parsed JSON value holds a NUL character. Iterative: nesting depth is the client's. */
function containsNul(root: unknown): boolean {
  const pending: unknown[] = [root];
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value === 'string') {
      if (value.includes('\0')) return true;
    } else if (Array.isArray(value)) {
      for (const item of value) pending.push(item);
    } else if (value !== null && typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) {
        if (key.includes('\0')) return true;
        pending.push(item);
      }
    }
  }
  return false;
}

function parseJson(_request: FastifyRequest, body: string | Buffer, done: (err: Error | null, value?: unknown) => void): void {
  const text = body.toString().trim();
  if (text === '') return done(null, undefined);
  let value: unknown;
  try {
    // As Fastify's own parser does: __proto__ and constructor.prototype keys are refused, not merged.
    value = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (err) {
    return done(ERRORS.malformedJson(err instanceof Error ? err.message : String(err)), undefined);
  }
  // NUL cannot be stored in PostgreSQL text or JSONB; only bodies that spell one out are walked.
  if ((text.includes('\\u0000') || text.includes('\0')) && containsNul(value)) return done(ERRORS.nulCharacter('body'), undefined);
  done(null, value);
}

/**
 * JSON bodies: an empty body is accepted as "no body" even with Content-Type: application/json
 * (many clients send that header on a bodiless POST), and malformed JSON is a clear 400.
 */
export function registerJsonParser(app: FastifyInstance): void {
  // Only JSON by default (no text/plain), so other media types get a clear 415; areas add their own parsers.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parseJson);
  app.addContentTypeParser(/^application\/[\w.-]+\+json$/, { parseAs: 'string' }, parseJson);
}

/** NUL cannot be stored in PostgreSQL text; %00 is the only way one reaches decoded path parameters and query values. */
export function rejectNulInUrls(app: FastifyInstance): void {
  app.addHook('onRequest', async (request) => {
    if (request.url.includes('%00')) throw ERRORS.nulCharacter('URL');
  });
}
