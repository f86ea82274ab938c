import type { GuardedText } from '../guardrails/evaluator.js';
import { argumentsJson, MESSAGE_TEXT_FIELDS, readableArguments, writtenArguments } from '../guardrails/fields.js';
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
type Message = {
  role?: unknown;
  content?: unknown;
  refusal?: unknown;
  reasoning_content?: unknown;
  /** vLLM's, OpenRouter's and Ollama's name for reasoning_content. */
  reasoning?: unknown;
  audio?: { transcript?: unknown } | null;
  tool_calls?: unknown;
  function_call?: FunctionCall;
};

/** Part fields read from a part of any type ("text", "input_text", "output_text", "refusal"...) that has them. */
const PART_FIELDS = ['text', 'refusal'] as const;

/**
 * Every text of a chat message, in one fixed order: string content or its parts' text and refusals, a refusal,
 * reasoning, an audio transcript, tool call arguments, and the arguments of a legacy function call. `each` gets each
 * text and returns what goes in its place; the message comes back with them (arguments always as strings).
 */
function mapMessageTexts(message: Message, each: (text: string) => string): Message {
  const out: Message = { ...message };
  // Read with their escapes decoded (readableArguments), and sent as they came unless a guardrail changed them; any
  // other value (an upstream's object) is read, and sent, as its JSON.
  const args = (value: unknown): string | undefined => {
    const text = typeof value === 'string' ? value : argumentsJson(value);
    if (text === undefined) return undefined;
    const readable = readableArguments(text);
    return writtenArguments(text, readable, each(readable));
  };
  if (typeof message.content === 'string') out.content = each(message.content);
  else if (Array.isArray(message.content)) {
    out.content = (message.content as (Part | null)[]).map((part) => {
      if (!part) return part;
      const changed: Part = { ...part };
      for (const field of PART_FIELDS) if (typeof part[field] === 'string') changed[field] = each(part[field]);
      return changed;
    });
  }
  for (const field of MESSAGE_TEXT_FIELDS) if (typeof message[field] === 'string') out[field] = each(message[field]);
  if (typeof message.audio?.transcript === 'string') out.audio = { ...message.audio, transcript: each(message.audio.transcript) };
  if (Array.isArray(message.tool_calls)) {
    out.tool_calls = (message.tool_calls as (ToolCall | null)[]).map((call) => {
      const text = args(call?.function?.arguments);
      return text === undefined ? call : { ...call, function: { ...call!.function, arguments: text } };
    });
  }
  const functionArguments = args(message.function_call?.arguments);
  if (functionArguments !== undefined) out.function_call = { ...message.function_call, arguments: functionArguments };
  return out;
}

/** The texts of each message, in order. Writing back walks the messages again and replaces every text. */
function readMessages(messages: (Message | null | undefined)[]): string[][] {
  return messages.map((message) => {
    const texts: string[] = [];
    if (message) mapMessageTexts(message, (text) => (texts.push(text), text));
    return texts;
  });
}

/** Puts the texts back, in the order they were read. */
function rewriteMessage(message: Message, next: () => string): Message {
  return mapMessageTexts(message, next);
}

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
  const found = readMessages(messages);
  const texts: GuardedText[] = [];
  messages.forEach((message, i) => {
    const trusted = TRUSTED_ROLES.has(String(message?.role));
    for (const text of found[i]!) texts.push({ text, trusted });
  });
  return {
    texts,
    write(next) {
      if (unchanged(texts, next)) return body;
      const take = cursor(next);
      return { ...body, messages: messages.map((message) => (message ? rewriteMessage(message, take) : message)) };
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
  const found = readMessages(choices.map((choice) => choice?.message));
  const texts = found.flat().map((text) => ({ text, trusted: false }));
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
          return choice.message ? { ...rest, message: rewriteMessage(choice.message, take) } : rest;
        }),
      };
    },
  };
}
