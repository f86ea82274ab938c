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

/** Message fields read when they hold a string, in this order (content parts come before them). */
const MESSAGE_FIELDS = ['refusal', 'reasoning_content', 'reasoning'] as const;
/** Part fields read from a part of any type ("text", "input_text", "output_text", "refusal"...) that has them. */
const PART_FIELDS = ['text', 'refusal'] as const;

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

/** The text of an arguments value: a string canonicalised, any other value (an upstream's object) as JSON. */
function argumentsText(value: unknown): string | undefined {
  if (typeof value === 'string') return canonicalArguments(value);
  return value === undefined || value === null ? undefined : JSON.stringify(value);
}

/** Whether reading the arguments changed a string (so the canonical form must be written even if nothing is redacted). */
function canonicalised(value: unknown): boolean {
  return typeof value === 'string' && argumentsText(value) !== value;
}

function toolCallsOf(message: Message): ToolCall[] {
  return Array.isArray(message.tool_calls) ? (message.tool_calls as ToolCall[]) : [];
}

/**
 * Every text of a chat message: string content or its parts' text and refusals, a refusal, reasoning, an audio
 * transcript, tool call arguments, and the arguments of a legacy function call. `read` collects them; `rewrite` puts
 * replacements back in the same order (arguments always as strings).
 */
const messageTexts = {
  read(message: Message | undefined, into: string[]): void {
    if (!message) return;
    if (typeof message.content === 'string') into.push(message.content);
    else if (Array.isArray(message.content)) {
      for (const part of message.content as (Part | null)[]) for (const field of PART_FIELDS) if (typeof part?.[field] === 'string') into.push(part[field]);
    }
    for (const field of MESSAGE_FIELDS) if (typeof message[field] === 'string') into.push(message[field]);
    if (typeof message.audio?.transcript === 'string') into.push(message.audio.transcript);
    for (const call of toolCallsOf(message)) {
      const text = argumentsText(call?.function?.arguments);
      if (text !== undefined) into.push(text);
    }
    const text = argumentsText(message.function_call?.arguments);
    if (text !== undefined) into.push(text);
  },
  /** Whether a rewrite is due even when no text changed: an arguments string was canonicalised. */
  canonicalised(message: Message | undefined): boolean {
    if (!message) return false;
    return toolCallsOf(message).some((call) => canonicalised(call?.function?.arguments)) || canonicalised(message.function_call?.arguments);
  },
  rewrite(message: Message, next: () => string): Message {
    const out: Message = { ...message };
    if (typeof message.content === 'string') out.content = next();
    else if (Array.isArray(message.content)) {
      out.content = (message.content as (Part | null)[]).map((part) => {
        if (!part) return part;
        const changed: Part = { ...part };
        for (const field of PART_FIELDS) if (typeof part[field] === 'string') changed[field] = next();
        return changed;
      });
    }
    for (const field of MESSAGE_FIELDS) if (typeof message[field] === 'string') out[field] = next();
    if (typeof message.audio?.transcript === 'string') out.audio = { ...message.audio, transcript: next() };
    if (Array.isArray(message.tool_calls)) {
      out.tool_calls = toolCallsOf(message).map((call) => (argumentsText(call?.function?.arguments) !== undefined ? { ...call, function: { ...call.function, arguments: next() } } : call));
    }
    if (argumentsText(message.function_call?.arguments) !== undefined) out.function_call = { ...message.function_call, arguments: next() };
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
  // Canonicalised arguments go upstream in the form the guardrails read, redacted or not.
  const rewrite = messages.some((message) => messageTexts.canonicalised(message));
  return {
    texts,
    write(next) {
      if (unchanged(texts, next) && !rewrite) return body;
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
  // The client gets canonicalised arguments in the form the guardrails read.
  const rewrite = hasLogprobs || choices.some((choice) => messageTexts.canonicalised(choice?.message));
  return {
    texts,
    write(next) {
      if (unchanged(texts, next) && !rewrite) return answer;
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
