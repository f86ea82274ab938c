/** A UTF-16 surrogate without its pair (a high one without a low one after it, or the reverse): no character. */
export const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

/**
 * Text from an upstream as it can be stored, and is then returned: PostgreSQL text cannot hold NUL, and a lone
 * surrogate would come back from the database as other characters. Each becomes U+FFFD.
 */
export function storableText(text: string): string {
  return text.replaceAll('\u0000', '\uFFFD').replace(LONE_SURROGATES, '\uFFFD');
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

/**
 * Whether parsed JSON nests arrays and objects deeper than `maxDepth`. JSON.parse takes any depth, but writing the
 * value out again (JSON.stringify) overflows the stack at a few thousand levels. `text` is the JSON it was parsed
 * from: shorter than twice the depth, it cannot nest that deep, and the value is not walked. The walk skips
 * strings and numbers, so it stays cheap where a scan of the text would not (an embedding's thousands of numbers).
 */
export function jsonNestsDeeperThan(text: string, value: unknown, maxDepth: number): boolean {
  if (text.length <= maxDepth * 2 || typeof value !== 'object' || value === null) return false;
  const nodes: object[] = [value];
  const depths: number[] = [1];
  while (nodes.length > 0) {
    const node = nodes.pop()!;
    const depth = depths.pop()!;
    if (depth > maxDepth) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (typeof child === 'object' && child !== null) {
        nodes.push(child as object);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}

/**
 * The one form an email is stored and looked up in: NFC (so "é" typed as one or two code points is one address) and
 * lower case.
 */
export function normalEmail(email: string): string {
  return email.normalize('NFC').toLowerCase();
}

/** A JSON object: not null, not an array. */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
