/** PostgreSQL text cannot hold NUL: text from an upstream is stored (and returned) with U+FFFD in its place. */
export function storableText(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text;
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
