import type { GuardedText } from '../guardrails/evaluator.js';
import type { JsonObject } from '../../providers/types.js';

/** The texts of a request or an answer that guardrails read, and how to put changed (redacted) ones back. */
export interface TextSlots {
  texts: GuardedText[];
  /** The body with these texts in place of the originals, in the same order; the same object when none changed. */
  write(texts: string[]): JsonObject;
}

/**
 * System and developer messages are the application's own instructions: every guardrail reads them, but a prompt
 * shield does not (it would flag every system prompt).
 */
const TRUSTED_ROLES = new Set(['system', 'developer']);

type Part = { type?: unknown; text?: unknown; refusal?: unknown };
type FunctionCall = { arguments?: unknown } | null;
type ToolCall = { function?: FunctionCall };
type Message = { role?: unknown; content?: unknown; refusal?: unknown; reasoning_content?: unknown; tool_calls?: unknown; function_call?: FunctionCall };

/** The field holding a content part's text: `text` of a text part, `refusal` of a refusal part (an assistant's). */
function textField(part: Part | null | undefined): 'text' | 'refusal' | undefined {
  if (part?.type === 'text' && typeof part.text === 'string') return 'text';
  if (part?.type === 'refusal' && typeof part.refusal === 'string') return 'refusal';
  return undefined;
}

/**
 * Every text of a chat message: string content or its text and refusal parts, a refusal, reasoning, tool call
 * arguments, and the arguments of a legacy function call. `read` collects them; `rewrite` puts replacements back in
 * the same order.
 */
const messageTexts = {
  read(message: Message | undefined, into: string[]): void {
    if (!message) return;
    if (typeof message.content === 'string') into.push(message.content);
    else if (Array.isArray(message.content)) {
      for (const part of message.content as Part[]) {
        const field = textField(part);
        if (field) into.push(part[field] as string);
      }
    }
    if (typeof message.refusal === 'string') into.push(message.refusal);
    if (typeof message.reasoning_content === 'string') into.push(message.reasoning_content);
    if (Array.isArray(message.tool_calls)) for (const call of message.tool_calls as ToolCall[]) if (typeof call?.function?.arguments === 'string') into.push(call.function.arguments);
    if (typeof message.function_call?.arguments === 'string') into.push(message.function_call.arguments);
  },
  rewrite(message: Message, next: () => string): Message {
    const out: Message = { ...message };
    if (typeof message.content === 'string') out.content = next();
    else if (Array.isArray(message.content)) {
      out.content = (message.content as Part[]).map((part) => {
        const field = textField(part);
        return field ? { ...part, [field]: next() } : part;
      });
    }
    if (typeof message.refusal === 'string') out.refusal = next();
    if (typeof message.reasoning_content === 'string') out.reasoning_content = next();
    if (Array.isArray(message.tool_calls)) {
      out.tool_calls = (message.tool_calls as ToolCall[]).map((call) => (typeof call?.function?.arguments === 'string' ? { ...call, function: { ...call.function, arguments: next() } } : call));
    }
    if (typeof message.function_call?.arguments === 'string') out.function_call = { ...message.function_call, arguments: next() };
    return out;
  },
};

function unchanged(before: GuardedText[], after: string[]): boolean {
  return before.length === after.length && before.every((t, i) => t.text === after[i]);
}

function cursor(texts: string[]): () => string {
  let i = 0;
  return () => texts[i++]!;
}

/** Chat request: the texts of every message. */
export function chatInputTexts(body: JsonObject): TextSlots {
  const messages = (body.messages as Message[] | undefined) ?? [];
  const texts: GuardedText[] = [];
  for (const message of messages) {
    const found: string[] = [];
    messageTexts.read(message, found);
    const trusted = TRUSTED_ROLES.has(String(message?.role));
    for (const text of found) texts.push({ text, trusted });
  }
  return {
    texts,
    write(next) {
      if (unchanged(texts, next)) return body;
      const take = cursor(next);
      return { ...body, messages: messages.map((message) => (message ? messageTexts.rewrite(message, take) : message)) };
    },
  };
}

/** Embeddings request: `input` when it is text (token arrays are left alone). */
export function embeddingInputTexts(body: JsonObject): TextSlots {
  const input = body.input;
  const strings = typeof input === 'string' ? [input] : Array.isArray(input) && input.every((item) => typeof item === 'string') ? (input as string[]) : [];
  const texts = strings.map((text) => ({ text, trusted: false }));
  return {
    texts,
    write(next) {
      if (unchanged(texts, next)) return body;
      return { ...body, input: typeof input === 'string' ? next[0] : next };
    },
  };
}

/**
 * Chat answer: the texts of every choice's message. Logprobs repeat the text token by token, so an answer that
 * output guardrails may change goes without them.
 */
export function chatOutputTexts(answer: JsonObject): TextSlots {
  // Not an array: a malformed answer, passed on as it came (there is no text to check in it).
  const choices = Array.isArray(answer.choices) ? (answer.choices as { message?: Message; logprobs?: unknown }[]) : [];
  const found: string[] = [];
  for (const choice of choices) messageTexts.read(choice?.message, found);
  const texts = found.map((text) => ({ text, trusted: false }));
  const hasLogprobs = choices.some((choice) => choice?.logprobs != null);
  return {
    texts,
    write(next) {
      if (unchanged(texts, next) && !hasLogprobs) return answer;
      const take = cursor(next);
      return {
        ...answer,
        choices: choices.map((choice) => {
          if (!choice) return choice;
          const { logprobs: _logprobs, ...rest } = choice;
          return choice.message ? { ...rest, message: messageTexts.rewrite(choice.message, take) } : rest;
        }),
      };
    },
  };
}
