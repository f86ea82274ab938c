import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ERRORS } from './errors.js';

function parseJson(_request: FastifyRequest, body: string | Buffer, done: (err: Error | null, value?: unknown) => void): void {
  const text = body.toString().trim();
  if (text === '') return done(null, undefined);
  try {
    done(null, JSON.parse(text));
  } catch (err) {
    done(ERRORS.malformedJson(err instanceof Error ? err.message : String(err)), undefined);
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
  app.addContentTypeParser(/^application\/[\w.-]+\+json$/, { parseAs: 'string' }, parseJson);
}
