import { SHOWN_VALUE_CHARS, TOKEN_PREFIX } from '../areas/tokens/service.js';

/** One character of a URL as sent: itself or its percent-escape (a client may escape any character). */
function sentAs(char: string): string {
  const escape = `%${char.charCodeAt(0).toString(16).padStart(2, '0')}`;
  return `(?:${char.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}|${escape})`;
}

/** A base64url character as sent in a URL. */
const VALUE_CHAR = '(?:[\\w-]|%[0-9a-f]{2})';

/** An API token value (base64url): the prefix, the 8 characters every listing shows, then the secret rest. */
const TOKEN_VALUE = new RegExp(`(${[...TOKEN_PREFIX].map(sentAs).join('')}${VALUE_CHAR}{${SHOWN_VALUE_CHARS}})${VALUE_CHAR}+`, 'gi');

/**
 * A URL or path parameter with any API token value in it (percent-escaped or not) cut to the part listings show. A
 * value pasted where an id belongs (`DELETE /api/tokens/wgt_...`) or sent in a query string would otherwise reach the
 * audit trail and the log.
 */
export function withoutTokenValues(text: string): string {
  return text.includes(TOKEN_PREFIX) || text.includes('%') ? text.replace(TOKEN_VALUE, '$1…') : text;
}
