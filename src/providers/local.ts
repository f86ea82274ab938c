import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ERRORS } from '../http/errors.js';
import { choiceCount, contentText, estimateChatInput, estimateEmbeddingInput, estimateTokens, openAiUsage } from './tokens.js';
import type { CallOptions, ChatChunk, JsonObject, JsonResult, ModelTarget, Provider } from './types.js';
import { unixSeconds } from '../platform/time.js';

export const LOCAL_CHAT_MODEL = 'local-chat';
export const LOCAL_EMBED_MODEL = 'local-embed';
export const LOCAL_EMBED_DIMENSIONS = 384;

/**
 * The built-in chat model's whole behaviour, documented in the README: it answers `Echo: ` followed by the text of
 * the last user message (or "Hello from Waygate." when there is none), cut to `max_completion_tokens` /
 * `max_tokens` (then finish_reason is "length"), as each of the `n` choices. Token counts use Waygate's estimator.
 */
export function localReply(body: JsonObject): string {
  const messages = Array.isArray(body.messages) ? (body.messages as JsonObject[]) : [];
  const lastUser = [...messages].reverse().find((m) => m?.role === 'user');
  const text = lastUser ? contentText(lastUser.content).trim() : '';
  return text === '' ? 'Hello from Waygate.' : `Echo: ${text}`;
}

/** The words of a reply, each with the whitespace before it, cut to a token limit. */
function replyPieces(reply: string, maxTokens: number | undefined): { pieces: string[]; truncated: boolean } {
  const pieces = reply.match(/\s*\S+/g) ?? [];
  if (maxTokens === undefined) return { pieces, truncated: false };
  const kept: string[] = [];
  let tokens = 0;
  for (const piece of pieces) {
    tokens += estimateTokens(piece);
    if (tokens > maxTokens) return { pieces: kept, truncated: true };
    kept.push(piece);
  }
  return { pieces: kept, truncated: false };
}

function maxTokensOf(body: JsonObject): number | undefined {
  const value = body.max_completion_tokens ?? body.max_tokens;
  return typeof value === 'number' ? value : undefined;
}

/**
 * A chat.completion answering `reply` to `body` in each of its `n` choices, with counted usage (local and mock
 * models). A client that asks for several choices reads `choices[1]`: one choice would break it.
 */
export function completionFromText(body: JsonObject, reply: string, model: string): JsonResult {
  const { pieces, truncated } = replyPieces(reply, maxTokensOf(body));
  const content = pieces.join('').trimStart();
  const choices = choiceCount(body);
  const input = estimateChatInput(body);
  const output = estimateTokens(content) * choices;
  const completion = {
    id: `chatcmpl-${randomUUID()}`,
    object: 'chat.completion',
    created: unixSeconds(Date.now()),
    model,
    choices: Array.from({ length: choices }, (_, index) => ({
      index,
      message: { role: 'assistant', content, refusal: null },
      finish_reason: truncated ? 'length' : 'stop',
      logprobs: null,
    })),
    usage: openAiUsage({ inputTokens: input, outputTokens: output }),
  };
  return { body: completion, usage: { inputTokens: input, outputTokens: output, estimated: false } };
}

/**
 * The same answer as chunks: each choice's role, then one chunk per word and choice (the choices take turns, as
 * OpenAI interleaves them), each choice's finish reason, then usage.
 */
export async function* chunksFromText(body: JsonObject, reply: string, model: string, pauseMs = 0, signal?: AbortSignal): AsyncGenerator<ChatChunk> {
  const { pieces, truncated } = replyPieces(reply, maxTokensOf(body));
  const choices = choiceCount(body);
  const id = `chatcmpl-${randomUUID()}`;
  const created = unixSeconds(Date.now());
  /** The same delta for each choice in turn. */
  const forEachChoice = function* (delta: JsonObject, finish: string | null = null): Generator<ChatChunk> {
    for (let index = 0; index < choices; index++) {
      yield { data: { id, object: 'chat.completion.chunk', created, model, choices: [{ index, delta, finish_reason: finish, logprobs: null }] } };
    }
  };
  yield* forEachChoice({ role: 'assistant', content: '' });
  let first = true;
  for (const piece of pieces) {
    if (pauseMs > 0) await sleep(pauseMs, undefined, { signal });
    yield* forEachChoice({ content: first ? piece.trimStart() : piece });
    first = false;
  }
  yield* forEachChoice({}, truncated ? 'length' : 'stop');
  const input = estimateChatInput(body);
  const output = estimateTokens(pieces.join('').trimStart()) * choices;
  yield { data: { id, object: 'chat.completion.chunk', created, model, choices: [], usage: openAiUsage({ inputTokens: input, outputTokens: output }) } };
}

/** FNV-1a over UTF-16 code units, seeded so two independent hashes come from one function. */
function fnv1a(text: string, seed: number): number {
  let hash = 0x811c9dc5 ^ seed;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

const WORD_WEIGHT = 1;
const CHAR_GRAM_WEIGHT = 0.5;
const CHAR_GRAM = 3;

function addFeature(vector: Float64Array, feature: string, weight: number): void {
  const index = fnv1a(feature, 0) % vector.length;
  // A second hash picks the sign, so colliding features cancel out on average instead of piling up. Its top bit:
  // FNV-1a's lowest bit is the parity of the text whatever the seed, so it would follow the index's lowest bit.
  vector[index]! += fnv1a(feature, 0x5bd1e995) >>> 31 === 1 ? weight : -weight;
}

/**
 * The words of a text: letters with their combining marks, and digits, after NFKC (composed and decomposed accents,
 * full-width forms are one word). A text without any (punctuation, emoji) is taken by its whitespace-separated runs.
 */
function wordsOf(text: string): string[] {
  const folded = text.normalize('NFKC').toLowerCase();
  const words = folded.match(/[\p{L}\p{M}\p{N}]+/gu);
  return words ?? folded.split(/\s+/).filter((run) => run !== '');
}

/**
 * The built-in embedder: feature hashing of lower-cased words, word bigrams and character trigrams (of each word
 * with boundary marks) into 384 dimensions, L2-normalised. Texts sharing words or word pieces point the same way,
 * so cosine similarity is meaningful for overlapping text; it knows nothing of synonyms.
 */
export function localEmbedding(text: string, dimensions = LOCAL_EMBED_DIMENSIONS): number[] {
  const vector = new Float64Array(dimensions);
  const words = wordsOf(text);
  // Blank text still gets a unit vector (a zero vector has no direction: its cosine with anything is NaN).
  if (words.length === 0) addFeature(vector, 'blank', WORD_WEIGHT);
  words.forEach((word, i) => {
    addFeature(vector, `w:${word}`, WORD_WEIGHT);
    if (i > 0) addFeature(vector, `b:${words[i - 1]} ${word}`, WORD_WEIGHT / 2);
    const marked = `<${word}>`;
    for (let start = 0; start + CHAR_GRAM <= marked.length; start++) addFeature(vector, `c:${marked.slice(start, start + CHAR_GRAM)}`, CHAR_GRAM_WEIGHT);
  });
  let norm = 0;
  for (const value of vector) norm += value * value;
  norm = Math.sqrt(norm);
  return Array.from(vector, (value) => (norm === 0 ? 0 : value / norm));
}

/** OpenAI's base64 embedding encoding: little-endian float32 values. */
export function base64Embedding(values: number[]): string {
  // Written byte by byte: a Float32Array's own bytes follow the machine's order.
  const bytes = Buffer.alloc(values.length * 4);
  for (const [i, value] of values.entries()) bytes.writeFloatLE(value, i * 4);
  return bytes.toString('base64');
}

function embeddingInputs(input: unknown): string[] {
  const items = Array.isArray(input) && input.length > 0 && typeof input[0] !== 'number' ? input : [input];
  return items.map((item) => (typeof item === 'string' ? item : Array.isArray(item) || typeof item === 'number' ? [item].flat().join(' ') : ''));
}

/** An OpenAI embeddings list from the built-in embedder. */
export function embeddingsFromText(body: JsonObject, model: string): JsonResult {
  const dimensions = body.dimensions === undefined ? LOCAL_EMBED_DIMENSIONS : Number(body.dimensions);
  if (!Number.isInteger(dimensions) || dimensions < 1 || dimensions > LOCAL_EMBED_DIMENSIONS) {
    throw ERRORS.validation(`dimensions must be an integer from 1 to ${LOCAL_EMBED_DIMENSIONS} for ${model}`);
  }
  const base64 = body.encoding_format === 'base64';
  const data = embeddingInputs(body.input).map((text, index) => {
    const values = localEmbedding(text, dimensions);
    return { object: 'embedding', index, embedding: base64 ? base64Embedding(values) : values };
  });
  const tokens = estimateEmbeddingInput(body.input);
  return {
    body: { object: 'list', data, model, usage: { prompt_tokens: tokens, total_tokens: tokens } },
    usage: { inputTokens: tokens, outputTokens: 0, estimated: false },
  };
}

/** Built in and offline: `local-chat` (the echo model above) and `local-embed` (the feature-hashing embedder). */
export function local(): Provider {
  return {
    async chat(target: ModelTarget, body: JsonObject) {
      return completionFromText(body, localReply(body), target.upstreamModel);
    },
    async chatStream(target: ModelTarget, body: JsonObject, options: CallOptions): Promise<AsyncIterable<ChatChunk>> {
      return chunksFromText(body, localReply(body), target.upstreamModel, 0, options.signal);
    },
    async embeddings(target: ModelTarget, body: JsonObject) {
      return embeddingsFromText(body, target.upstreamModel);
    },
    async moderations() {
      throw ERRORS.validation('The local provider offers no moderation model');
    },
  };
}
