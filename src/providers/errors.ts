import { asText } from '../platform/text.js';

/**
 * Why an upstream call failed. `http` carries the upstream's status and error body; the others have no answer.
 * `retryable` failures (429, 5xx, timeouts, refused connections) are retried before the first byte and then
 * hand over to the next fallback model. `refused` is Waygate's own refusal (a non-public address, an oversized answer).
 */
export type UpstreamFailure = 'http' | 'timeout' | 'connection' | 'malformed' | 'aborted' | 'refused';

export class UpstreamError extends Error {
  constructor(
    readonly failure: UpstreamFailure,
    message: string,
    readonly status?: number,
    /** The upstream's error object, in OpenAI's shape when it can be made so. */
    readonly body?: { error: Record<string, unknown> },
    readonly retryAfterMs?: number,
    /** The request had been written to the upstream when the call failed: the upstream may have worked on it. */
    readonly reachedUpstream = false,
  ) {
    super(message);
    this.name = 'UpstreamError';
  }

  get retryable(): boolean {
    if (this.failure === 'http') return this.status === 429 || (this.status ?? 0) >= 500;
    return this.failure === 'timeout' || this.failure === 'connection';
  }
}

/**
 * An upstream error body in OpenAI's shape `{ error: { message, type, code } }`, whatever the upstream sent; a code
 * it did not send is null, as in OpenAI's own errors without one.
 */
export function openAiErrorBody(status: number, parsed: unknown, text: string): { error: Record<string, unknown> } {
  const inner = (parsed as { error?: unknown } | null)?.error;
  if (inner && typeof inner === 'object') {
    const error = inner as Record<string, unknown>;
    return { error: { ...error, message: asText(error.message, `Upstream answered ${status}`), type: asText(error.type, 'upstream_error'), code: error.code ?? null } };
  }
  if (typeof inner === 'string') return { error: { message: inner, type: 'upstream_error', code: null } };
  const message = (parsed as { message?: unknown } | null)?.message;
  return { error: { message: typeof message === 'string' ? message : `Upstream answered ${status}: ${text.slice(0, 200)}`, type: 'upstream_error', code: null } };
}
