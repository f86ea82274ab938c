import type { JsonObject, Usage } from './types.js';

/**
 * Token estimates for when an upstream reports no usage (and for budget reservations before a call).
 * No tokenizer ships with Waygate (they are model-specific and large); this rule stays close to BPE tokenizers
 * on English and errs high elsewhere: a run of ASCII letters or digits is one token per 4 characters (rounded up),
 * any other letter is a token of its own, and so is each punctuation mark.
 */
export function estimateTokens(text: string): number {
  const counter = new TokenCounter();
  counter.add(text);
  return counter.total;
}

/**
 * estimateTokens of the texts added so far, joined, without keeping them. A stream's text arrives piece by piece and
 * is counted only when its upstream sends no usage: joining it kept every piece alive for the whole stream, for
 * nothing in most streams. A run of letters or digits may go on in the next piece, so its length is carried over.
 */
export class TokenCounter {
  private tokens = 0;
  /** ASCII letters and digits at the end of what was added, not counted yet. */
  private run = 0;

  add(text: string): void {
    // One pass over the UTF-16 code units, the rule above as a regular expression would read it
    // (/[A-Za-z0-9]+|[^\sA-Za-z0-9]/g): matchAll made a match object for every piece, some 1,000 instructions a piece.
    let { tokens, run } = this;
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i);
      if (isAsciiLetterOrDigit(code)) {
        run++;
        continue;
      }
      if (run > 0) tokens += Math.ceil(run / 4);
      run = 0;
      if (!isWhitespace(code)) tokens++;
    }
    this.tokens = tokens;
    this.run = run;
  }

  get total(): number {
    return this.run > 0 ? this.tokens + Math.ceil(this.run / 4) : this.tokens;
  }
}

function isAsciiLetterOrDigit(code: number): boolean {
  return (code >= 97 && code <= 122) || (code >= 65 && code <= 90) || (code >= 48 && code <= 57);
}

/** What a regular expression's \s matches: ECMAScript's white space and line terminators. */
function isWhitespace(code: number): boolean {
  if (code < 128) return code === 32 || (code >= 9 && code <= 13);
  return (
    code === 0xa0 || code === 0x1680 || (code >= 0x2000 && code <= 0x200a) || code === 0x2028 || code === 0x2029 || code === 0x202f || code === 0x205f || code === 0x3000 || code === 0xfeff
  );
}

/** Per-message framing OpenAI's chat format adds (role markers), and the reply's priming. */
const PER_MESSAGE = 4;
const PER_REPLY = 3;

/** Text of a chat message's content: a string, or the text parts of a content array. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content) {
    const value = (part as { text?: unknown } | null)?.text;
    if (typeof value === 'string') text += (text ? '\n' : '') + value;
  }
  return text;
}

/**
 * What a model wrote in one message or stream delta, as text to count: its content, its refusal, and the names and
 * arguments of its tool calls (an answer made only of tool calls still cost output tokens).
 */
export function writtenText(message: unknown): string {
  const m = message as { content?: unknown; refusal?: unknown; tool_calls?: unknown } | null | undefined;
  if (!m || typeof m !== 'object') return '';
  let text = contentText(m.content);
  if (typeof m.refusal === 'string') text += m.refusal;
  if (Array.isArray(m.tool_calls)) {
    for (const call of m.tool_calls) {
      const fn = (call as { function?: { name?: unknown; arguments?: unknown } } | null)?.function;
      if (typeof fn?.name === 'string') text += ` ${fn.name} `;
      if (typeof fn?.arguments === 'string') text += fn.arguments;
    }
  }
  return text;
}

/** Estimated output tokens of a chat.completion whose upstream reported no usage: what every choice wrote. */
export function estimateChatOutput(completion: Record<string, unknown>): number {
  const choices = Array.isArray(completion.choices) ? completion.choices : [];
  let tokens = 0;
  for (const choice of choices) tokens += estimateTokens(writtenText((choice as { message?: unknown } | null)?.message));
  return tokens;
}

/** How many choices a chat call asks for (`n`). max_tokens bounds each of them, and usage sums them all. */
export function choiceCount(body: JsonObject): number {
  return typeof body.n === 'number' && Number.isInteger(body.n) && body.n > 1 ? body.n : 1;
}

/** Estimated prompt tokens of a chat request's messages (and tool definitions, which count as prompt). */
export function estimateChatInput(body: Record<string, unknown>): number {
  let tokens = PER_REPLY;
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (const message of messages) {
    const m = message as Record<string, unknown> | null;
    tokens += PER_MESSAGE + estimateTokens(contentText(m?.content));
    if (m?.tool_calls) tokens += estimateTokens(JSON.stringify(m.tool_calls));
  }
  if (body.tools) tokens += estimateTokens(JSON.stringify(body.tools));
  return tokens;
}

/** Estimated tokens of an embeddings input: a string, an array of strings, or token arrays. */
export function estimateEmbeddingInput(input: unknown): number {
  if (typeof input === 'string') return estimateTokens(input);
  if (!Array.isArray(input)) return 0;
  let tokens = 0;
  for (const item of input) {
    if (typeof item === 'string') tokens += estimateTokens(item);
    else if (typeof item === 'number') tokens += 1;
    else if (Array.isArray(item)) tokens += item.length;
  }
  return tokens;
}

/**
 * The most tokens one call may report (no call is that large). Two of them, and their sum, fit the 32-bit integer
 * columns of usage events, batch items and agent messages on PostgreSQL, which would otherwise refuse the event.
 */
export const MAX_REPORTED_TOKENS = 1_000_000_000;

/**
 * A token count an upstream reported, when it is one: a number from 0 to MAX_REPORTED_TOKENS (rounded down).
 * Anything else (a string, null, a negative number, NaN, a billion and more) is no count at all, so that a broken
 * upstream can never carry NaN into the budget counters, which would then admit every call, nor lose its event.
 */
export function tokenCount(value: unknown): number | undefined {
  return typeof value === 'number' && value >= 0 && value <= MAX_REPORTED_TOKENS ? Math.floor(value) : undefined;
}

/** Token counts as OpenAI's usage object (the inverse of usageOf). */
export function openAiUsage(usage: Pick<Usage, 'inputTokens' | 'outputTokens'>): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  return { prompt_tokens: usage.inputTokens, completion_tokens: usage.outputTokens, total_tokens: usage.inputTokens + usage.outputTokens };
}

/**
 * OpenAI's usage object (a completion's, or a stream's usage chunk), when it holds token counts. `withOutput`: a
 * chat answer's usage counts only with a valid `completion_tokens` (else Waygate counts both itself: an output
 * billed as 0 would never spend a budget); embeddings and moderations have no output to report.
 */
export function usageOf(body: JsonObject, withOutput: boolean): Usage | null {
  const usage = body.usage as { prompt_tokens?: unknown; completion_tokens?: unknown } | null | undefined;
  const input = tokenCount(usage?.prompt_tokens);
  const output = tokenCount(usage?.completion_tokens);
  if (input === undefined || (withOutput && output === undefined)) return null;
  return { inputTokens: input, outputTokens: output ?? 0, estimated: false };
}
