/** Which fields of a chat message or stream delta hold text that guardrails read, beyond content and function calls. */

/** Message (and delta) fields read when they hold a string, in this order. */
export const MESSAGE_TEXT_FIELDS = ['refusal', 'reasoning_content', 'reasoning'] as const;
export type MessageTextField = (typeof MESSAGE_TEXT_FIELDS)[number];

/**
 * Function arguments as the upstream (Anthropic parses them) or the client will read them: JSON with `\u` escapes is
 * decoded and re-serialised, so guardrails see "a-b" rather than "a\u002db". Other strings are left as they are.
 */
export function canonicalArguments(text: string): string {
  if (!text.includes('\\u')) return text;
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return text;
  }
}

/** Arguments that are not a string (an upstream's object) as JSON text; nothing for null or a missing value. */
export function argumentsJson(value: unknown): string | undefined {
  return value === undefined || value === null ? undefined : JSON.stringify(value);
}
