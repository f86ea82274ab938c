import { ERRORS } from '../../http/errors.js';

/** One policy for every header sent to a connected agent: the owner's stored ones and a caller's runtime ones. */
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/;
const HEADER_VALUE = /^[\t\x20-\x7e]{0,4096}$/;
/**
 * Headers Waygate sets itself (the key, the body, the request id, the A2A version), and connection-control and
 * proxy headers an HTTP client must not be handed.
 */
const FORBIDDEN = new Set([
  'authorization', 'content-type', 'content-length', 'host', 'a2a-version', 'x-request-id', 'cookie',
  'connection', 'keep-alive', 'upgrade', 'expect', 'te', 'trailer', 'transfer-encoding', 'proxy-authorization', 'proxy-connection',
]);

/**
 * Headers that choose the key or the account an upstream bills: a caller may not pick them for the owner's
 * connection, even where the owner set none.
 */
const CALLER_FORBIDDEN = new Set(['api-key', 'x-api-key', 'x-goog-api-key', 'openai-organization', 'openai-project']);

function allowed(name: string, value: unknown): value is string {
  return typeof value === 'string' && HEADER_NAME.test(name) && HEADER_VALUE.test(value) && !FORBIDDEN.has(name.toLowerCase());
}

/** A value sent as (part of) a header: printable ASCII, one line. */
export function checkHeaderValue(field: string, value: string): void {
  if (!HEADER_VALUE.test(value)) throw ERRORS.validation(`${field} may only hold printable ASCII (no line breaks, at most 4096 characters)`);
}

/** The owner's headers of a connection: each must be one a call can carry (400 naming the first that is not). */
export function checkConnectionHeaders(headers: Record<string, string> | null | undefined): void {
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (!HEADER_NAME.test(name)) throw ERRORS.validation(`config.connection.headers has an invalid header name: ${name}`);
    checkHeaderValue(`config.connection.headers.${name}`, value);
    if (FORBIDDEN.has(name.toLowerCase())) throw ERRORS.validation(`config.connection.headers may not set ${name}; Waygate sets it or it controls the connection (use apiKey for keys)`);
  }
}

/**
 * The headers of a call: a caller's runtime context entries that can be headers, then the owner's stored headers,
 * which win over a runtime header of the same name in any case (a caller cannot replace what the owner set).
 * Stored headers pass the same policy again: those saved before it existed are left out rather than break the call.
 */
export function mergeHeaders(runtime: Record<string, unknown> | undefined, stored: Record<string, string> | undefined): Record<string, string> {
  const byName = new Map<string, [string, string]>();
  for (const [name, value] of Object.entries(runtime ?? {})) {
    if (allowed(name, value) && !CALLER_FORBIDDEN.has(name.toLowerCase())) byName.set(name.toLowerCase(), [name, value]);
  }
  for (const [name, value] of Object.entries(stored ?? {})) if (allowed(name, value)) byName.set(name.toLowerCase(), [name, value]);
  return Object.fromEntries(byName.values());
}
