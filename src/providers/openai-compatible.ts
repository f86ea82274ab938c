import { openAiErrorBody, UpstreamError } from './errors.js';
import { withFirst } from '../platform/iterables.js';
import { isJsonObject } from '../platform/text.js';
import { parseEvent, parseObject, type UpstreamClient } from './http.js';
import { sseBatches } from './sse.js';
import { openAiUsage, usageOf } from './tokens.js';
import type { CallOptions, ChatChunk, JsonObject, JsonResult, ModelTarget, Provider } from './types.js';

/** Where an openai-compatible model without a baseUrl goes: OpenAI's own API. */
export const OPENAI_BASE_URL = 'https://api.openai.com/v1';

export type Operation = 'chat/completions' | 'embeddings' | 'moderations';

/** Where an OpenAI-style upstream takes an operation, and how it is authenticated. */
export interface OpenAiStyleEndpoint {
  url(target: ModelTarget, operation: Operation): string;
  authHeaders(target: ModelTarget): Record<string, string>;
}

/** The first Azure OpenAI api-version that knows `max_completion_tokens` (older ones refuse it with a 400). */
const AZURE_FIRST_COMPLETION_TOKENS_VERSION = '2024-09-01';

/**
 * The field that limits a chat call's output when Waygate sets one the client did not: OpenAI's own API and Azure
 * OpenAI take `max_completion_tokens` (their reasoning models refuse `max_tokens`), except Azure api-versions dated
 * before 2024-09-01; other OpenAI-compatible servers are sent `max_tokens`, the field they all know.
 */
export function outputLimitField(target: Pick<ModelTarget, 'type' | 'baseUrl' | 'apiVersion'>): 'max_tokens' | 'max_completion_tokens' {
  if (target.type === 'azure-openai') {
    const dated = /^\d{4}-\d{2}-\d{2}/.exec(target.apiVersion ?? '')?.[0];
    return dated !== undefined && dated < AZURE_FIRST_COMPLETION_TOKENS_VERSION ? 'max_tokens' : 'max_completion_tokens';
  }
  if (target.type !== 'openai-compatible') return 'max_tokens';
  const url = target.baseUrl ?? OPENAI_BASE_URL;
  return URL.canParse(url) && new URL(url).hostname === 'api.openai.com' ? 'max_completion_tokens' : 'max_tokens';
}

/**
 * The one base for every upstream that speaks OpenAI's API (OpenAI, vLLM, Ollama, LM Studio, OpenRouter, Together,
 * Azure OpenAI): bodies are forwarded with `model` replaced, answers are forwarded byte for byte.
 */
export class OpenAiStyleProvider implements Provider {
  /**
   * What every call to a model shares, its URLs and headers, made on its first call. Targets are held by the models
   * cache, so this lives as long as the model's cached copy, and a changed model is a new target.
   */
  private readonly routes = new WeakMap<ModelTarget, { urls: Partial<Record<Operation, string>>; headers: Record<string, string> }>();

  constructor(private readonly client: UpstreamClient, private readonly endpoint: OpenAiStyleEndpoint) {}

  private route(target: ModelTarget) {
    let route = this.routes.get(target);
    if (!route) {
      route = { urls: {}, headers: { ...target.headers, ...this.endpoint.authHeaders(target) } };
      this.routes.set(target, route);
    }
    return route;
  }

  private url(target: ModelTarget, operation: Operation): string {
    const { urls } = this.route(target);
    return (urls[operation] ??= this.endpoint.url(target, operation));
  }

  private headers(target: ModelTarget, options: CallOptions): Record<string, string> {
    return { ...this.route(target).headers, 'x-request-id': options.requestId };
  }

  private async postJson(target: ModelTarget, operation: Operation, body: JsonObject, options: CallOptions): Promise<JsonResult> {
    const response = await this.client.postJson({
      url: this.url(target, operation),
      headers: this.headers(target, options),
      body: JSON.stringify({ ...body, model: target.upstreamModel }),
      signal: options.signal,
    });
    const parsed = parseObject(response.text);
    // Some routers (OpenRouter, for one) answer a failed call with 200 and an error object: that is no answer.
    if (isErrorAnswer(parsed)) throw new UpstreamError('http', 'Upstream answered 200 with an error', 502, openAiErrorBody(200, parsed, response.text));
    return { body: parsed, raw: response.text, usage: usageOf(parsed, operation === 'chat/completions') };
  }

  chat(target: ModelTarget, body: JsonObject, options: CallOptions): Promise<JsonResult> {
    return this.postJson(target, 'chat/completions', body, options);
  }

  async chatStream(target: ModelTarget, body: JsonObject, options: CallOptions): Promise<AsyncIterable<ChatChunk>> {
    // Usage is always asked for, so metering never has to guess; the gateway drops the usage chunk for clients
    // that did not ask for it.
    const streamOptions = { ...((body.stream_options as JsonObject | undefined) ?? {}), include_usage: true };
    const response = await this.client.postStream({
      url: this.url(target, 'chat/completions'),
      headers: { ...this.headers(target, options), accept: 'text/event-stream' },
      body: JSON.stringify({ ...body, model: target.upstreamModel, stream: true, stream_options: streamOptions }),
      signal: options.signal,
    });
    return streamedChunks(response.body, response.complete);
  }

  embeddings(target: ModelTarget, body: JsonObject, options: CallOptions): Promise<JsonResult> {
    return this.postJson(target, 'embeddings', body, options);
  }

  moderations(target: ModelTarget, body: JsonObject, options: CallOptions): Promise<JsonResult> {
    return this.postJson(target, 'moderations', body, options);
  }
}

/** A 2xx body that holds an error (an object, or just its message) and none of the fields an answer has. */
function isErrorAnswer(body: JsonObject): boolean {
  const { error } = body;
  return ((typeof error === 'object' && error !== null) || (typeof error === 'string' && error !== '')) && !('choices' in body) && !('data' in body) && !('results' in body);
}

/**
 * chat.completion.chunk objects from an OpenAI-style SSE body, up to `data: [DONE]`. A body that ends before
 * `[DONE]` is complete only if a choice finished (a few servers never send `[DONE]`); otherwise it was cut off. A
 * `[DONE]` before any chunk is no answer either: it fails like an empty body, before the client's first byte.
 */
async function* openAiChunks(body: AsyncIterable<Buffer>, complete: () => void): AsyncGenerator<ChatChunk> {
  let finished = false;
  let started = false;
  for await (const events of sseBatches(body)) {
    for (const event of events) {
      if (event.data.trim() === '[DONE]') {
        if (!started) throw new UpstreamError('malformed', 'Upstream stream ended before its first chunk');
        complete();
        return;
      }
      const data = parseEvent(event.data);
      if (!isJsonObject(data)) throw new UpstreamError('malformed', 'Upstream stream sent an event that is not a JSON object');
      started = true;
      if (data.error) throw new UpstreamError('http', 'Upstream stream reported an error', 502, openAiErrorBody(502, data, event.data));
      finished ||= Array.isArray(data.choices) && (data.choices as { finish_reason?: unknown }[]).some((choice) => typeof choice?.finish_reason === 'string');
      // Data spread over several lines is forwarded re-serialized: SSE would need each line prefixed again.
      yield event.data.includes('\n') ? { data } : { data, raw: event.data };
    }
  }
  if (!finished) throw new UpstreamError('malformed', 'Upstream stream ended before it was complete');
}

const OPEN_BRACE = 0x7b;
const SPACE = 0x20;

/**
 * The chunks of a stream request's answer, once its first visible byte has arrived. A server that ignores
 * `stream: true` answers one chat.completion (told by that byte: SSE lines never start with a brace, whatever the
 * content type says), replayed as chunks. The chunk reader is handed back as it is, with no generator in between.
 */
async function streamedChunks(body: AsyncIterable<Buffer>, complete: () => void): Promise<AsyncIterable<ChatChunk>> {
  const reader = body[Symbol.asyncIterator]();
  let first = await reader.next();
  let visible = -1;
  // Chunks of white space alone mean nothing to either format.
  while (!first.done && (visible = first.value.findIndex((byte) => byte > SPACE)) === -1) first = await reader.next();
  if (first.done) throw new UpstreamError('malformed', 'Upstream answered the stream with an empty body');
  const whole = withFirst(first, reader);
  return first.value[visible] === OPEN_BRACE ? completionChunks(whole) : openAiChunks(whole, complete);
}

/** Largest non-streamed answer replayed as a stream (what a JSON answer may hold). */
const MAX_COMPLETION_BYTES = 10 * 1024 * 1024;

/** Message fields a stream delta carries under the same name: a replay without them would lose part of the answer. */
const DELTA_FIELDS = ['refusal', 'function_call', 'reasoning_content', 'reasoning', 'audio'] as const;

function carried(message: JsonObject): JsonObject {
  const fields: JsonObject = {};
  for (const field of DELTA_FIELDS) if (message[field] != null) fields[field] = message[field];
  return fields;
}

/** A whole chat.completion, answered to a stream request, as the chunks a stream would have sent. */
async function* completionChunks(body: AsyncIterable<Buffer>): AsyncGenerator<ChatChunk> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of body) {
    size += part.length;
    if (size > MAX_COMPLETION_BYTES) throw new UpstreamError('malformed', 'Upstream answered a stream request with an over-long JSON body');
    parts.push(part);
  }
  const text = Buffer.concat(parts).toString('utf8');
  const completion = parseObject(text);
  if (isErrorAnswer(completion)) throw new UpstreamError('http', 'Upstream reported an error', 502, openAiErrorBody(200, completion, text));
  const head = {
    id: completion.id,
    object: 'chat.completion.chunk',
    created: completion.created,
    model: completion.model,
    ...(completion.system_fingerprint !== undefined ? { system_fingerprint: completion.system_fingerprint } : {}),
  };
  const choices = Array.isArray(completion.choices) ? (completion.choices as unknown[]) : [];
  if (choices.some((choice) => !isJsonObject(choice))) throw new UpstreamError('malformed', 'Upstream answered a stream request with a choice that is not an object');
  for (const [position, choice] of (choices as JsonObject[]).entries()) {
    const index = typeof choice.index === 'number' ? choice.index : position;
    const message = (choice.message ?? {}) as JsonObject;
    const toolCalls = Array.isArray(message.tool_calls) ? (message.tool_calls as JsonObject[]).map((call, i) => ({ index: i, ...call })) : undefined;
    const delta = { role: 'assistant', content: message.content ?? '', ...carried(message), ...(toolCalls ? { tool_calls: toolCalls } : {}) };
    // Logprobs, when asked for, go with the content they describe, as in a stream.
    yield { data: { ...head, choices: [{ index, delta, ...(choice.logprobs != null ? { logprobs: choice.logprobs } : {}), finish_reason: null }] } };
    yield { data: { ...head, choices: [{ index, delta: {}, finish_reason: choice.finish_reason ?? 'stop' }] } };
  }
  // Only counts in OpenAI's form reach the client; without them Waygate counts the stream's tokens itself.
  const usage = usageOf(completion, true);
  if (usage) yield { data: { ...head, choices: [], usage: openAiUsage(usage) } };
}

export function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, '')}/${path}`;
}

/** Plain OpenAI-compatible servers: `{baseUrl}/chat/completions` with a bearer key. */
export function openAiCompatible(client: UpstreamClient): Provider {
  return new OpenAiStyleProvider(client, {
    url: (target, operation) => joinUrl(target.baseUrl ?? OPENAI_BASE_URL, operation),
    authHeaders: (target): Record<string, string> => (target.apiKey ? { authorization: `Bearer ${target.apiKey}` } : {}),
  });
}
