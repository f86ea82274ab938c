import { setTimeout as sleep } from 'node:timers/promises';
import { UpstreamError } from './errors.js';
import { chunksFromText, completionFromText, embeddingsFromText } from './local.js';
import { estimateEmbeddingInput } from './tokens.js';
import type { CallOptions, JsonObject, ModelTarget, Provider } from './types.js';

const DEFAULT_REPLY = 'This is a mock reply.';

/** Waits the scripted latency, then fails the scripted share of calls like an overloaded upstream (503). */
async function behave(target: ModelTarget, options: CallOptions): Promise<void> {
  const latency = target.mock?.latencyMs ?? 0;
  if (latency > 0) {
    try {
      await sleep(latency, undefined, { signal: options.signal });
    } catch {
      throw new UpstreamError('aborted', 'The client went away');
    }
  }
  if (Math.random() < (target.mock?.failureRate ?? 0)) {
    throw new UpstreamError('http', 'Mock failure', 503, { error: { message: 'Scripted mock failure', type: 'server_error' } });
  }
}

/**
 * Scriptable model for demos and load tests: a fixed reply, a latency and a failure rate (`provider.mock`).
 * Embeddings come from the built-in embedder; moderation flags nothing.
 */
export function mock(): Provider {
  return {
    async chat(target, body, options) {
      await behave(target, options);
      return completionFromText(body, target.mock?.reply ?? DEFAULT_REPLY, target.upstreamModel);
    },
    async chatStream(target, body, options) {
      await behave(target, options);
      const pause = (target.mock?.latencyMs ?? 0) / 10;
      return chunksFromText(body, target.mock?.reply ?? DEFAULT_REPLY, target.upstreamModel, pause, options.signal);
    },
    async embeddings(target, body, options) {
      await behave(target, options);
      return embeddingsFromText(body, target.upstreamModel);
    },
    async moderations(target, body: JsonObject, options) {
      await behave(target, options);
      const inputs = Array.isArray(body.input) ? body.input : [body.input];
      const results = inputs.map(() => ({ flagged: false, categories: {}, category_scores: {} }));
      const tokens = estimateEmbeddingInput(body.input);
      return { body: { id: `modr-${Date.now()}`, model: target.upstreamModel, results }, usage: { inputTokens: tokens, outputTokens: 0, estimated: false } };
    },
  };
}
