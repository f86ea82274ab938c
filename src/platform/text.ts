/** A UTF-16 surrogate without its pair: no character, and not storable as UTF-8. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Text from an upstream as it can be stored, and is then returned: PostgreSQL text cannot hold NUL, and a lone
 * surrogate would come back from the database as other characters. Each becomes U+FFFD.
 */
export function storableText(text: string): string {
  return text.replaceAll('\u0000', '\uFFFD').replace(LONE_SURROGATE, '\uFFFD');
}

/**
 * A value from a client or an upstream as text: strings as they are, numbers and booleans spelled out, anything
 * else the fallback. Unlike String(), it cannot throw on an object such as `{"toString": false}`.
 */
export function asText(value: unknown, fallback = ''): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return fallback;
}
