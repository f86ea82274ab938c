import { REDACTION_MARKER } from './pii.js';

/** Which fields of a chat message or stream delta hold text that guardrails read, beyond content and function calls. */

/** Message (and delta) fields read when they hold a string, in this order. */
export const MESSAGE_TEXT_FIELDS = ['refusal', 'reasoning_content', 'reasoning'] as const;
export type MessageTextField = (typeof MESSAGE_TEXT_FIELDS)[number];

/**
 * Function arguments as guardrails read them: every escape decoded, so that none can hide a finding (`\n4111 1111
 * 1111 1111` would read as one word "n4111...", `\ud800` glue "ud800" to what follows) nor be cut in two by a
 * redaction. A JSON parser reads each string so; quotes and backslashes stay escaped (they are the structure), and
 * nothing outside strings changes, so arguments that guardrails leave alone are sent exactly as they came.
 */
export function readableArguments(text: string): string {
  if (!text.includes('\\')) return text;
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    const next = text[i + 1];
    if (c !== '\\' || next === undefined) {
      out += c;
      continue;
    }
    const code = next === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6)) ? parseInt(text.slice(i + 2, i + 6), 16) : -1;
    if (code >= 0) {
      // A quote or backslash written as \u stays an escape of the structure, in its short form.
      out += code === 0x22 ? '\\"' : code === 0x5c ? '\\\\' : String.fromCharCode(code);
      i += 5;
    } else {
      out += SHORT_ESCAPES[next] ?? c + next;
      i += 1;
    }
  }
  return out;
}

/**
 * The arguments to send once guardrails read `readable` (from `original`) and gave back `checked`: the original
 * itself when they changed nothing; otherwise `checked` with the characters JSON escapes inside strings (control
 * characters, lone surrogates) escaped again. Arguments that were JSON stay JSON: when a redaction took part of their
 * structure (a custom rule's pattern can match quotes and braces), they go as one JSON string holding the text.
 */
export function writtenArguments(original: string, readable: string, checked: string): string {
  if (checked === readable) return original;
  let written = '';
  let inString = false;
  for (let i = 0; i < checked.length; i++) {
    const c = checked[i]!;
    // A redacted number (`{"card": 4111111111111111}`) becomes a string, so the arguments keep their shape.
    REDACTION_MARKER.lastIndex = i;
    const marker = inString ? null : REDACTION_MARKER.exec(checked);
    if (marker) {
      written += JSON.stringify(marker[0]);
      i += marker[0].length - 1;
    } else if (c === '\\' || pairedSurrogate(checked, i)) {
      // An escape, or a character in two code units: both go as they are.
      written += c + (checked[i + 1] ?? '');
      i += 1;
    } else {
      if (c === '"') inString = !inString;
      // JSON.stringify writes a control character or a lone surrogate as its escape (`\n`, `\u0007`, `\ud800`).
      written += inString && NEEDS_ESCAPE.test(c) ? JSON.stringify(c).slice(1, -1) : c;
    }
  }
  if (!isJson(original) || isJson(written)) return written;
  return JSON.stringify(checked);
}

/** `\"` and `\\` are kept: they are the structure. */
const SHORT_ESCAPES: Record<string, string> = { n: '\n', r: '\r', t: '\t', b: '\b', f: '\f', '/': '/' };
/** Characters a JSON string holds only as escapes: control characters and lone surrogates. */
// eslint-disable-next-line no-control-regex -- control characters are what it finds
const NEEDS_ESCAPE = /[\u0000-\u001f\ud800-\udfff]/;

/** Whether a high surrogate at `i` is followed by its low one: one character, which JSON holds as it is. */
function pairedSurrogate(text: string, i: number): boolean {
  const high = text.charCodeAt(i);
  const low = text.charCodeAt(i + 1);
  return high >= 0xd800 && high <= 0xdbff && low >= 0xdc00 && low <= 0xdfff;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Arguments that are not a string (an upstream's object) as JSON text; nothing for null or a missing value. */
export function argumentsJson(value: unknown): string | undefined {
  return value === undefined || value === null ? undefined : JSON.stringify(value);
}
