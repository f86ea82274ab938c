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

const [QUOTE, BACKSLASH, OPEN_BRACKET, CLOSE_BRACKET, OPEN_BRACE, CLOSE_BRACE] = ['"', '\\', '[', ']', '{', '}'].map((c) => c.charCodeAt(0));

/**
 * Whether valid JSON text nests arrays and objects deeper than `maxDepth`. JSON.parse takes any depth, but writing
 * the value out again (JSON.stringify) overflows the stack at a few thousand levels. Text shorter than twice the
 * depth cannot: it is not scanned.
 */
export function jsonNestsDeeperThan(text: string, maxDepth: number): boolean {
  if (text.length <= maxDepth * 2) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > maxDepth) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
  }
  return false;
}
