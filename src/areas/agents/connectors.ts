import { randomUUID } from 'node:crypto';
import { ERRORS } from '../../http/errors.js';
import { UpstreamError } from '../../providers/errors.js';
import type { UpstreamClient } from '../../providers/http.js';
import { parseObject } from '../../providers/http.js';
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
  /** Caller runtime headers (A2A `runtime_context`), forwarded as request headers. */
  runtimeHeaders: Record<string, string>;
  signal: AbortSignal;
  requestId: string;
}

export interface ConnectionAnswer {
  text: string;
  usage: { inputTokens: number; outputTokens: number } | null;
  remoteContext: string | null;
  upstreamMs: number;
}

const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/;
const HEADER_VALUE = /^[\t\x20-\x7e]{0,2000}$/;
/** Headers a caller's runtime context may not set on the call to a connected agent. */
const PROTECTED = new Set(['authorization', 'content-type', 'content-length', 'host', 'a2a-version', 'x-request-id', 'cookie', 'connection', 'transfer-encoding']);

/** Runtime context entries that can be headers; the rest are not forwarded. */
export function runtimeHeaders(context: Record<string, unknown> | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(context ?? {})) {
    if (typeof value === 'string' && HEADER_NAME.test(name) && HEADER_VALUE.test(value) && !PROTECTED.has(name.toLowerCase())) headers[name] = value;
  }
  return headers;
}

function endpoint(base: string, path: string): string {
  return `${base.replace(/\/+$/, '')}${path}`;
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

function openAiChatBody(connection: Connection, call: ConnectionCall) {
  return { model: connection.model, messages: call.messages.map((m) => ({ role: m.role, content: m.content })) };
}

function openAiChatAnswer(parsed: unknown): Omit<ConnectionAnswer, 'remoteContext' | 'upstreamMs'> {
  const answer = parsed as { choices?: { message?: { content?: unknown } }[]; usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } } | null;
  const content = answer?.choices?.[0]?.message?.content;
  if (typeof content !== 'string') throw malformed('a message');
  const usage = answer?.usage;
  return { text: content, usage: typeof usage?.prompt_tokens === 'number' ? { inputTokens: usage.prompt_tokens, outputTokens: Number(usage.completion_tokens ?? 0) } : null };
}

function openAiResponsesBody(connection: Connection, call: ConnectionCall) {
  return { model: connection.model, input: call.messages.map((m) => ({ type: 'message', role: m.role, content: m.content })) };
}

function openAiResponsesAnswer(parsed: unknown): Omit<ConnectionAnswer, 'remoteContext' | 'upstreamMs'> {
  const answer = parsed as { output?: { type?: unknown; content?: { type?: unknown; text?: unknown }[] }[]; usage?: { input_tokens?: unknown; output_tokens?: unknown } } | null;
  if (!Array.isArray(answer?.output)) throw malformed('output');
  const text = answer.output
    .filter((item) => item?.type === 'message')
    .flatMap((item) => item.content ?? [])
    .filter((part) => part?.type === 'output_text' && typeof part.text === 'string')
    .map((part) => part.text as string)
    .join('');
  const usage = answer.usage;
  return { text, usage: typeof usage?.input_tokens === 'number' ? { inputTokens: usage.input_tokens, outputTokens: Number(usage.output_tokens ?? 0) } : null };
}

/** A2A 0.3 `message/send` (the dialect every A2A server speaks): the new text, and the remote context to continue. */
function a2aBody(call: ConnectionCall) {
  const text = call.input.map((m) => m.content).join('\n\n');
  return {
    jsonrpc: '2.0',
    id: call.requestId,
    method: 'message/send',
    params: { message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text }], ...(call.remoteContext ? { contextId: call.remoteContext } : {}) } },
  };
}

type A2aPart = { kind?: unknown; text?: unknown };

function a2aAnswer(parsed: unknown): Omit<ConnectionAnswer, 'upstreamMs'> {
  const envelope = parsed as { result?: Record<string, unknown>; error?: { code?: unknown; message?: unknown } } | null;
  if (envelope?.error) throw ERRORS.upstreamFailed(`The connected agent answered JSON-RPC error ${String(envelope.error.code)}: ${String(envelope.error.message ?? '').slice(0, 200)}`);
  const result = envelope?.result;
  if (!result) throw malformed('a JSON-RPC result');
  const texts = (parts: unknown) => (Array.isArray(parts) ? (parts as A2aPart[]).filter((p) => typeof p?.text === 'string').map((p) => p.text as string) : []);
  let text: string[];
  if (result.kind === 'message') text = texts(result.parts);
  else {
    const artifacts = (result.artifacts as { parts?: unknown }[] | undefined) ?? [];
    text = artifacts.flatMap((a) => texts(a.parts));
    if (text.length === 0) text = texts((result.status as { message?: { parts?: unknown } } | undefined)?.message?.parts);
  }
  if (text.length === 0) throw malformed('text');
  return { text: text.join('\n'), usage: null, remoteContext: typeof result.contextId === 'string' ? result.contextId : null };
}

/**
 * Calls a connected (external) agent: an OpenAI-compatible chat completions or Responses endpoint (the connection
 * URL is the base URL, as an OpenAI SDK's baseURL), or an A2A agent (the URL is its JSON-RPC endpoint). Stateless
 * for OpenAI (the whole conversation is sent each turn); A2A continues the remote context it gave.
 */
export async function callConnection(upstream: UpstreamClient, connection: Connection, secrets: ConnectionSecrets, call: ConnectionCall): Promise<ConnectionAnswer> {
  const headers: Record<string, string> = { ...call.runtimeHeaders, ...secrets.headers, 'x-request-id': call.requestId };
  if (secrets.apiKey) headers.authorization = `Bearer ${secrets.apiKey}`;
  const request =
    connection.protocol === 'openai-chat'
      ? { url: endpoint(connection.url, '/chat/completions'), body: openAiChatBody(connection, call) }
      : connection.protocol === 'openai-responses'
        ? { url: endpoint(connection.url, '/responses'), body: openAiResponsesBody(connection, call) }
        : { url: connection.url, body: a2aBody(call) };
  let parsed: Record<string, unknown>;
  let upstreamMs: number;
  try {
    const response = await upstream.postJson({ url: request.url, headers, body: JSON.stringify(request.body), signal: call.signal });
    parsed = parseObject(response.text);
    upstreamMs = response.ms;
  } catch (err) {
    throw failed(err);
  }
  if (connection.protocol === 'a2a') return { ...a2aAnswer(parsed), upstreamMs };
  const answer = connection.protocol === 'openai-chat' ? openAiChatAnswer(parsed) : openAiResponsesAnswer(parsed);
  return { ...answer, remoteContext: null, upstreamMs };
}
