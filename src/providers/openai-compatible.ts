import { UpstreamError } from './errors.js';
import { parseObject, type UpstreamClient } from './http.js';
import { parseSse } from './sse.js';
import { usageOf } from './tokens.js';
import type { CallOptions, ChatChunk, ChatStream, JsonObject, JsonResult, ModelTarget, Provider } from './types.js';

/** Where an openai-compatible model without a baseUrl goes: OpenAI's own API. */
export const OPENAI_BASE_URL = 'https://api.openai.com/v1';

export type Operation = 'chat/completions' | 'embeddings' | 'moderations';

/** Where an OpenAI-style upstream takes an operation, and how it is authenticated. */
export interface OpenAiStyleEndpoint {
  url(target: ModelTarget, operation: Operation): string;
  authHeaders(target: ModelTarget): Record<string, string>;
}

/**
 * The field that limits a chat call's output when Waygate sets one the client did not: OpenAI's own API and Azure
 * OpenAI take `max_completion_tokens` (their reasoning models refuse `max_tokens`); other OpenAI-compatible servers
 * are sent `max_tokens`, the field they all know.
 */
export function outputLimitField(target: Pick<ModelTarget, 'type' | 'baseUrl'>): 'max_tokens' | 'max_completion_tokens' {
  if (target.type === 'azure-openai') return 'max_completion_tokens';
  if (target.type !== 'openai-compatible' || !target.baseUrl) return 'max_tokens';
  return URL.canParse(target.baseUrl) && new URL(target.baseUrl).hostname === 'api.openai.com' ? 'max_completion_tokens' : 'max_tokens';
}

/**
 * The one base for every upstream that speaks OpenAI's API (OpenAI, vLLM, Ollama, LM Studio, OpenRouter, Together,
 * Azure OpenAI): bodies are forwarded with `model` replaced, answers are forwarded byte for byte.
 */
export class OpenAiStyleProvider implements Provider {
  constructor(private readonly client: UpstreamClient, private readonly endpoint: OpenAiStyleEndpoint) {}

  private headers(target: ModelTarget, options: CallOptions): Record<string, string> {
    return { ...target.headers, ...this.endpoint.authHeaders(target), 'x-request-id': options.requestId };
  }

  private async postJson(target: ModelTarget, operation: Operation, body: JsonObject, options: CallOptions): Promise<JsonResult> {
    const response = await this.client.postJson({
      url: this.endpoint.url(target, operation),
      headers: this.headers(target, options),
      body: JSON.stringify({ ...body, model: target.upstreamModel }),
      signal: options.signal,
    });
    const parsed = parseObject(response.text);
    return { body: parsed, raw: response.text, usage: usageOf(parsed), upstreamMs: response.ms };
  }

  chat(target: ModelTarget, body: JsonObject, options: CallOptions): Promise<JsonResult> {
    return this.postJson(target, 'chat/completions', body, options);
  }

  async chatStream(target: ModelTarget, body: JsonObject, options: CallOptions): Promise<ChatStream> {
    // Usage is always asked for, so metering never has to guess; the gateway drops the usage chunk for clients
    // that did not ask for it.
    const streamOptions = { ...((body.stream_options as JsonObject | undefined) ?? {}), include_usage: true };
    const response = await this.client.postStream({
      url: this.endpoint.url(target, 'chat/completions'),
      headers: { ...this.headers(target, options), accept: 'text/event-stream' },
      body: JSON.stringify({ ...body, model: target.upstreamModel, stream: true, stream_options: streamOptions }),
      signal: options.signal,
    });
    return { chunks: openAiChunks(response.body), upstreamMs: response.ms };
  }

  embeddings(target: ModelTarget, body: JsonObject, options: CallOptions): Promise<JsonResult> {
    return this.postJson(target, 'embeddings', body, options);
  }

  moderations(target: ModelTarget, body: JsonObject, options: CallOptions): Promise<JsonResult> {
    return this.postJson(target, 'moderations', body, options);
  }
}

/** chat.completion.chunk objects from an OpenAI-style SSE body, up to `data: [DONE]`. */
async function* openAiChunks(body: AsyncIterable<Buffer>): AsyncGenerator<ChatChunk> {
  for await (const event of parseSse(body)) {
    if (event.data === '[DONE]') return;
    let data: JsonObject;
    try {
      data = JSON.parse(event.data) as JsonObject;
    } catch {
      throw new UpstreamError('malformed', 'Upstream stream sent malformed JSON');
    }
    if (!data || typeof data !== 'object') throw new UpstreamError('malformed', 'Upstream stream sent a non-object event');
    if (data.error) throw new UpstreamError('http', 'Upstream stream reported an error', 502, { error: data.error as Record<string, unknown> });
    yield { data, raw: event.data };
  }
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
