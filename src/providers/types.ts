/** What every provider module implements: OpenAI-shaped requests in, OpenAI-shaped results out. */

export const PROVIDER_TYPES = ['openai-compatible', 'azure-openai', 'anthropic', 'local', 'mock'] as const;
export type ProviderType = (typeof PROVIDER_TYPES)[number];

export const CAPABILITIES = ['chat', 'embeddings', 'moderation', 'tts', 'stt'] as const;
export type Capability = (typeof CAPABILITIES)[number];

export type JsonObject = Record<string, unknown>;

/** The scriptable behaviour of a `mock` model (demos and load tests). */
export interface MockOptions {
  /** Assistant reply; default "This is a mock reply." */
  reply?: string;
  /** Delay before answering (and between streamed words / 10). */
  latencyMs?: number;
  /** Share of calls, 0..1, that fail with a 503 the way an overloaded upstream would. */
  failureRate?: number;
}

/** Everything a provider needs to reach one model; secrets already decrypted. */
export interface ModelTarget {
  key: string;
  type: ProviderType;
  baseUrl: string | null;
  apiKey: string | null;
  apiVersion: string | null;
  deployment: string | null;
  headers: Record<string, string>;
  upstreamModel: string;
  mock: MockOptions | null;
}

export interface CallOptions {
  signal: AbortSignal;
  requestId: string;
}

/** Token counts in OpenAI's names; `estimated` when Waygate counted them because the upstream did not. */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  estimated: boolean;
}

/** A complete JSON answer. `raw` is the upstream's own text when the body is forwarded unchanged. */
export interface JsonResult {
  body: JsonObject;
  raw?: string;
  usage: Usage | null;
}

/** One `chat.completion.chunk`; `raw` is the upstream's JSON text when it can be forwarded as is. */
export interface ChatChunk {
  data: JsonObject;
  raw?: string;
}

export interface Provider {
  chat(target: ModelTarget, body: JsonObject, options: CallOptions): Promise<JsonResult>;
  /**
   * Resolves once the upstream accepted the stream (retries happen before that) with its chunks, still to come; a
   * provider may read the answer's first bytes first (openai-compatible does, to tell SSE from a JSON answer). The
   * upstream request ends when the chunks are read to the end or, once their reading has started, closed early.
   */
  chatStream(target: ModelTarget, body: JsonObject, options: CallOptions): Promise<AsyncIterable<ChatChunk>>;
  embeddings(target: ModelTarget, body: JsonObject, options: CallOptions): Promise<JsonResult>;
  moderations(target: ModelTarget, body: JsonObject, options: CallOptions): Promise<JsonResult>;
}
