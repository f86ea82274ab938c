/** Which fields of a chat message or stream delta hold text that guardrails read, beyond content and function calls. */

/** Message (and delta) fields read when they hold a string, in this order. */
export const MESSAGE_TEXT_FIELDS = ['refusal', 'reasoning_content', 'reasoning'] as const;
export type MessageTextField = (typeof MESSAGE_TEXT_FIELDS)[number];

/**
 * Function arguments as guardrails read them: a JSON text's strings with their escapes decoded (`\u0040` is "@",
 * `\n` a line break), so that an escape can neither hide a finding (`\n4111 1111 1111 1111` would read as one word
 * "n4111...") nor be cut in two by a redaction. Valid JSON is first re-serialised (decoding `\u` and `\/` escapes);
 * then, in both valid and broken JSON, escaped control characters become the characters themselves. The structure
 * stays (quotes and backslashes are kept escaped), so `writtenArguments` can turn the text back into JSON.
 */
export function readableArguments(text: string): { text: string; json: boolean } {
  let canonical: string;
  let json = true;
  try {
    canonical = JSON.stringify(JSON.parse(text));
  } catch {
    canonical = text;
    json = false;
  }
  return { text: decodeEscapes(canonical, !json), json };
}

/**
 * Arguments read by `readableArguments` (and perhaps redacted) as the arguments text to send: control characters
 * escaped again. Arguments that were JSON stay JSON: when a redaction took part of their structure (a custom rule's
 * pattern can match quotes and braces), they go as one JSON string holding the redacted text.
 */
export function writtenArguments(readable: string, json: boolean): string {
  const written = readable.replace(CONTROL_CHARACTERS, (c) => JSON.stringify(c).slice(1, -1));
  if (!json) return written;
  try {
    JSON.parse(written);
    return written;
  } catch {
    return JSON.stringify(readable);
  }
}

// eslint-disable-next-line no-control-regex -- control characters are what it finds
const CONTROL_CHARACTERS = /[\u0000-\u001f]/g;
const SHORT_ESCAPES: Record<string, string> = { n: '\n', r: '\r', t: '\t', b: '\b', f: '\f' };

/**
 * Escapes of control characters (`\n`, `\u0007`...) as the characters; in broken JSON (`all`) every `\u` escape and
 * `\/` as well. An escaped backslash or quote stays escaped: it is part of the structure.
 */
function decodeEscapes(text: string, all: boolean): string {
  if (!text.includes('\\')) return text;
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c !== '\\' || i + 1 >= text.length) {
      out += c;
      continue;
    }
    const next = text[i + 1]!;
    const hex = next === 'u' ? text.slice(i + 2, i + 6) : '';
    const code = /^[0-9a-fA-F]{4}$/.test(hex) ? parseInt(hex, 16) : -1;
    if (SHORT_ESCAPES[next] !== undefined) {
      out += SHORT_ESCAPES[next];
      i += 1;
    } else if (code >= 0 && (code < 0x20 || (all && code !== 0x22 && code !== 0x5c))) {
      out += String.fromCharCode(code);
      i += 5;
    } else if (all && next === '/') {
      out += '/';
      i += 1;
    } else {
      out += c + next;
      i += 1;
    }
  }
  return out;
}

/** Arguments that are not a string (an upstream's object) as JSON text; nothing for null or a missing value. */
export function argumentsJson(value: unknown): string | undefined {
  return value === undefined || value === null ? undefined : JSON.stringify(value);
}
