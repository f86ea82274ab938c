import { randomUUID } from 'node:crypto';
import { ERRORS } from '../../http/errors.js';
import { asText } from '../../platform/text.js';
import { UpstreamError } from '../../providers/errors.js';
import type { UpstreamClient } from '../../providers/http.js';
import { MAX_REPORTED_TOKENS } from '../../providers/tokens.js';
import { parseObject } from '../../providers/http.js';
import { mergeHeaders } from './headers.js';
import type { ConnectionSecrets } from './service.js';
import type { Connection } from './store.js';

/** A message of a turn: what the connected agent is sent. */
export interface TurnMessage {
  role: 'user' | 'assistant' | 'system';
  content: string;
}

export interface ConnectionCall {
  /** The conversation so far and this turn's messages. */
  messages: TurnMessage[];
  /** The new messages of this turn (A2A sends only these; the remote side keeps its own history). */
  input: TurnMessage[];
  /** The remote side's id of this conversation (an A2A contextId), when it gave one. */
  remoteContext: string | null;
  /** Caller runtime context (A2A `runtime_context`): its header-like entries are forwarded as request headers. */
  runtimeContext: Record<string, unknown> | undefined;
  signal: AbortSignal;
  requestId: string;
  /** Set when a failed call's request had reached the remote agent (it may have worked on it). */
  attempt: { reachedUpstream: boolean };
}

export interface ConnectionAnswer {
  text: string;
  usage: { inputTokens: number; outputTokens: number } | null;
  remoteContext: string | null;
}

/** A connected agent's answer is read whole; a larger one fails the call rather than filling memory. */
export const AGENT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024;

/** An endpoint under a base URL, as an OpenAI SDK joins them: the base's path and query stay. */
function endpoint(base: string, path: string): string {
  const url = new URL(base);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}${path}`;
  return url.toString();
}

/** The connected agent's failure as the client's: 504 after a timeout, else 502 naming what went wrong. */
function failed(err: unknown): Error {
  if (!(err instanceof UpstreamError)) return err as Error;
  if (err.failure === 'aborted') return ERRORS.clientClosed();
  if (err.failure === 'timeout') return ERRORS.upstreamTimeout(`The connected agent timed out: ${err.message}`);
  const detail = err.body?.error.message;
  return ERRORS.upstreamFailed(`The connected agent failed: ${err.message}${typeof detail === 'string' ? ` (${detail.slice(0, 200)})` : ''}`);
}

function malformed(what: string): Error {
  return ERRORS.upstreamFailed(`The connected agent answered without ${what}`);
}

/**
 * Token counts as reported, when both are counts (else null: Waygate counts them itself; an output reported as
 * missing would otherwise be billed as none).
 */
function reportedUsage(input: unknown, output: unknown): ConnectionAnswer['usage'] {
  const count = (n: unknown) => typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= MAX_REPORTED_TOKENS;
  if (!count(input) || !count(output)) return null;
  return { inputTokens: input as number, outputTokens: output as number };
}

function openAiChatBody(connection: Connection, call: ConnectionCall) {
  return { model: connection.model, messages: call.messages.map((m) => ({ role: m.role, content: m.content })) };
}

function openAiChatAnswer(parsed: unknown): Omit<ConnectionAnswer, 'remoteContext'> {
  const answer = parsed as { choices?: { message?: { content?: unknown } }[]; usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } } | null;
  const content = answer?.choices?.[0]?.message?.content;
  if (typeof content !== 'string') throw malformed('a message');
  const usage = answer?.usage;
  return { text: content, usage: reportedUsage(usage?.prompt_tokens, usage?.completion_tokens) };
}

function openAiResponsesBody(connection: Connection, call: ConnectionCall) {
  return { model: connection.model, input: call.messages.map((m) => ({ type: 'message', role: m.role, content: m.content })) };
}

type ResponsesPart = { type?: unknown; text?: unknown; refusal?: unknown };

/** A message part's text: output text, or a refusal (the model's answer too). */
function partText(part: ResponsesPart | null): string | null {
  if (part?.type === 'output_text' && typeof part.text === 'string') return part.text;
  return part?.type === 'refusal' && typeof part.refusal === 'string' ? part.refusal : null;
}

function openAiResponsesAnswer(parsed: unknown): Omit<ConnectionAnswer, 'remoteContext'> {
  const answer = parsed as { status?: unknown; error?: { message?: unknown } | null; output?: { type?: unknown; content?: unknown }[]; usage?: { input_tokens?: unknown; output_tokens?: unknown } } | null;
  // A response that failed, or stopped short, answered nothing to pass on as a reply.
  if (answer?.error || answer?.status === 'failed' || answer?.status === 'incomplete') {
    const reason = asText(answer.error?.message, `its response is ${asText(answer.status, 'failed')}`);
    throw ERRORS.upstreamFailed(`The connected agent failed: ${reason.slice(0, 200)}`);
  }
  if (!Array.isArray(answer?.output)) throw malformed('output');
  const texts = answer.output
    .filter((item) => item?.type === 'message' && Array.isArray(item.content))
    .flatMap((item) => (item.content as (ResponsesPart | null)[]).map(partText))
    .filter((text) => text !== null);
  if (texts.length === 0) throw malformed('text');
  const usage = answer.usage;
  return { text: texts.join(''), usage: reportedUsage(usage?.input_tokens, usage?.output_tokens) };
}

/**
 * A2A 0.3 `message/send` (the dialect every A2A server speaks): the new text, and the remote context to continue.
 * Blocking: the answer is the finished task (or a message), not one still working.
 */
function a2aBody(call: ConnectionCall) {
  const text = call.input.map((m) => m.content).join('\n\n');
  return {
    jsonrpc: '2.0',
    id: call.requestId,
    method: 'message/send',
    params: {
      message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text }], ...(call.remoteContext ? { contextId: call.remoteContext } : {}) },
      configuration: { blocking: true },
    },
  };
}

type A2aPart = { kind?: unknown; text?: unknown };

function a2aAnswer(parsed: unknown): ConnectionAnswer {
  const envelope = parsed as { result?: Record<string, unknown>; error?: { code?: unknown; message?: unknown } } | null;
  if (envelope?.error) throw ERRORS.upstreamFailed(`The connected agent answered JSON-RPC error ${asText(envelope.error.code, 'without a code')}: ${asText(envelope.error.message).slice(0, 200)}`);
  const result = envelope?.result;
  if (!result) throw malformed('a JSON-RPC result');
  const texts = (parts: unknown) => (Array.isArray(parts) ? (parts as A2aPart[]).filter((p) => typeof p?.text === 'string').map((p) => p.text as string) : []);
  let text: string[];
  if (result.kind === 'message') text = texts(result.parts);
  else {
    // A task that did not complete has no answer to give: it failed, was refused, or waits for what a turn cannot send.
    const state = (result.status as { state?: unknown } | undefined)?.state;
    if (state !== 'completed') throw ERRORS.upstreamFailed(`The connected agent's task ended ${typeof state === 'string' ? state.slice(0, 50) : 'without a state'}, not completed`);
    const artifacts = Array.isArray(result.artifacts) ? (result.artifacts as ({ parts?: unknown } | null)[]) : [];
    text = artifacts.flatMap((a) => texts(a?.parts));
    if (text.length === 0) text = texts((result.status as { message?: { parts?: unknown } } | undefined)?.message?.parts);
  }
  if (text.length === 0) throw malformed('text');
  return { text: text.join('\n'), usage: null, remoteContext: remoteContextOf(result.contextId) };
}

/** A remote contextId is stored and sent back every turn: an id, not arbitrary text (NUL cannot even be stored). */
const REMOTE_CONTEXT = /^[\x21-\x7e]{1,256}$/;

function remoteContextOf(contextId: unknown): string | null {
  if (contextId === undefined || contextId === null) return null;
  if (typeof contextId !== 'string' || !REMOTE_CONTEXT.test(contextId)) throw malformed('a contextId of at most 256 printable ASCII characters');
  return contextId;
}

/**
 * Calls a connected (external) agent: an OpenAI-compatible chat completions or Responses endpoint (the connection
 * URL is the base URL, as an OpenAI SDK's baseURL), or an A2A agent (the URL is its JSON-RPC endpoint). Stateless
 * for OpenAI (the whole conversation is sent each turn); A2A continues the remote context it gave.
 */
export async function callConnection(upstream: UpstreamClient, connection: Connection, secrets: ConnectionSecrets, call: ConnectionCall): Promise<ConnectionAnswer> {
  const headers: Record<string, string> = { ...mergeHeaders(call.runtimeContext, secrets.headers), 'x-request-id': call.requestId };
  if (secrets.apiKey) headers.authorization = `Bearer ${secrets.apiKey}`;
  const request =
    connection.protocol === 'openai-chat'
      ? { url: endpoint(connection.url, '/chat/completions'), body: openAiChatBody(connection, call) }
      : connection.protocol === 'openai-responses'
        ? { url: endpoint(connection.url, '/responses'), body: openAiResponsesBody(connection, call) }
        : { url: connection.url, body: a2aBody(call) };
  let parsed: Record<string, unknown>;
  try {
    const response = await upstream.postJson({ url: request.url, headers, body: JSON.stringify(request.body), signal: call.signal });
    parsed = parseObject(response.text);
  } catch (err) {
    if (err instanceof UpstreamError && err.reachedUpstream) call.attempt.reachedUpstream = true;
    throw failed(err);
  }
  if (connection.protocol === 'a2a') return a2aAnswer(parsed);
  const answer = connection.protocol === 'openai-chat' ? openAiChatAnswer(parsed) : openAiResponsesAnswer(parsed);
  return { ...answer, remoteContext: null };
}
