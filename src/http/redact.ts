import { TOKEN_PREFIX } from '../areas/tokens/service.js';

/** An API token value (base64url): the prefix, the 8 characters every listing shows, then the secret rest. */
const TOKEN_VALUE = new RegExp(`(${TOKEN_PREFIX}[\\w-]{8})[\\w-]+`, 'g');

/**
 * A URL or path parameter with any API token value in it cut to the part listings show. A value pasted where an id
 * belongs (`DELETE /api/tokens/wgt_...`) or sent in a query string would otherwise reach the audit trail and the log.
 */
export function withoutTokenValues(text: string): string {
  return text.includes(TOKEN_PREFIX) ? text.replace(TOKEN_VALUE, '$1…') : text;
}
