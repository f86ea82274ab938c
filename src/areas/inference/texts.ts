import type { JsonObject } from '../../providers/types.js';

/** The texts of a request or an answer that guardrails read, and how to put changed (redacted) ones back. */
export interface TextSlots {
  texts: string[];
  /** The body with these texts in place of the originals, in the same order; the same object when none changed. */
  write(texts: string[]): JsonObject;
}

/**
 * Input guardrails read what the application's users and tools wrote. System and developer messages are the
 * application's own instructions: checking them would make a prompt shield flag every system prompt.
 */
const CHECKED_ROLES = new Set(['user', 'assistant', 'tool', 'function']);

type Part = { type?: unknown; text?: unknown };
type Message = { role?: unknown; content?: unknown };

function unchanged(before: string[], after: string[]): boolean {
  return before.length === after.length && before.every((text, i) => text === after[i]);
}

/** Chat request: the string content, or each text part, of every message in a checked role. */
export function chatInputTexts(body: JsonObject): TextSlots {
  const messages = (body.messages as Message[] | undefined) ?? [];
  const texts: string[] = [];
  for (const message of messages) {
    if (!CHECKED_ROLES.has(String(message?.role))) continue;
    if (typeof message.content === 'string') texts.push(message.content);
    else if (Array.isArray(message.content)) for (const part of message.content as Part[]) if (part?.type === 'text' && typeof part.text === 'string') texts.push(part.text);
  }
  return {
    texts,
    write(next) {
      if (unchanged(texts, next)) return body;
      let i = 0;
      const rewritten = messages.map((message) => {
        if (!CHECKED_ROLES.has(String(message?.role))) return message;
        if (typeof message.content === 'string') return { ...message, content: next[i++] };
        if (!Array.isArray(message.content)) return message;
        return { ...message, content: (message.content as Part[]).map((part) => (part?.type === 'text' && typeof part.text === 'string' ? { ...part, text: next[i++] } : part)) };
      });
      return { ...body, messages: rewritten };
    },
  };
}

/** Embeddings request: `input` when it is text (token arrays are left alone). */
export function embeddingInputTexts(body: JsonObject): TextSlots {
  const input = body.input;
  const texts = typeof input === 'string' ? [input] : Array.isArray(input) && input.every((item) => typeof item === 'string') ? (input as string[]) : [];
  return {
    texts,
    write(next) {
      if (unchanged(texts, next)) return body;
      return { ...body, input: typeof input === 'string' ? next[0] : next };
    },
  };
}

/** Chat answer: the text content of every choice's message (tool call arguments are not read). */
export function chatOutputTexts(answer: JsonObject): TextSlots {
  const choices = (answer.choices as { message?: { content?: unknown } }[] | undefined) ?? [];
  const texts = choices.flatMap((choice) => (typeof choice?.message?.content === 'string' ? [choice.message.content] : []));
  return {
    texts,
    write(next) {
      if (unchanged(texts, next)) return answer;
      let i = 0;
      return {
        ...answer,
        choices: choices.map((choice) => (typeof choice?.message?.content === 'string' ? { ...choice, message: { ...choice.message, content: next[i++] } } : choice)),
      };
    },
  };
}
