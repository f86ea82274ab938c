import type { AppError } from '../../http/errors.js';
import { parseClientJson } from '../../http/body.js';
import { isJsonObject } from '../../platform/text.js';

/**
 * A2A over JSON-RPC 2.0 (interface 4.1, 9.3): the two protocol dialects served on one endpoint, the envelope,
 * the error codes, the task id format and the readers of each dialect's parameters. No I/O here.
 */

/** The protocol dialects served: 0.3 (`message/send`, `kind` discriminators) and 1.0 (`SendMessage`, proto JSON). */
export type Dialect = '0.3' | '1.0';

/** The request header naming the protocol version (lower-case, as Node delivers header names). */
export const VERSION_HEADER = 'a2a-version';

/** `Major.Minor`, optionally `.Patch` (patch numbers play no part in negotiation, A2A 1.0 section 3.6). */
const VERSION = /^(\d{1,4})(?:\.(\d{1,4})(?:\.\d{1,4})?)?$/;

/**
 * The dialect an `A2A-Version` header asks for. Absent or blank means 0.3 (A2A 1.0 section 3.6.2); `1`, `1.0` and
 * `1.0.x` mean 1.0; `0.3` and `0.3.x` mean 0.3; anything else is unsupported (null: JSON-RPC -32009).
 */
export function dialectOf(header: string | string[] | undefined): Dialect | null {
  if (header === undefined) return '0.3';
  if (Array.isArray(header)) return header.length === 0 ? '0.3' : null;
  const value = header.trim();
  if (value === '') return '0.3';
  const match = VERSION.exec(value);
  if (!match) return null;
  const major = Number(match[1]);
  const minor = Number(match[2] ?? '0');
  if (major === 1 && minor === 0) return '1.0';
  if (major === 0 && minor === 3) return '0.3';
  return null;
}

/** JSON-RPC 2.0 and A2A error codes. */
export const RPC_CODES = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
  taskNotFound: -32001,
  taskNotCancelable: -32002,
  pushNotificationNotSupported: -32003,
  unsupportedOperation: -32004,
  versionNotSupported: -32009,
} as const;

/** A protocol failure: answered with HTTP 200 and a JSON-RPC `error` object. */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'RpcError';
  }
}

export const RPC_ERRORS = {
  parse: (detail: string) => new RpcError(RPC_CODES.parseError, `Parse error: ${detail}`),
  invalidRequest: (detail: string) => new RpcError(RPC_CODES.invalidRequest, `Invalid request: ${detail}`),
  methodNotFound: (method: string, hint = '') => new RpcError(RPC_CODES.methodNotFound, `Method not found: ${method}${hint}`),
  invalidParams: (detail: string, data?: Record<string, unknown>) => new RpcError(RPC_CODES.invalidParams, `Invalid params: ${detail}`, data),
  internal: (message = 'Internal error', data?: Record<string, unknown>) => new RpcError(RPC_CODES.internalError, message, data),
  taskNotFound: (id: string) => new RpcError(RPC_CODES.taskNotFound, `Task not found: ${id}`),
  unsupported: (detail: string) => new RpcError(RPC_CODES.unsupportedOperation, `Unsupported operation: ${detail}`),
  pushNotSupported: () => new RpcError(RPC_CODES.pushNotificationNotSupported, 'Push notifications are not supported by this agent (capabilities.pushNotifications is false)'),
  versionNotSupported: (requested: string) =>
    new RpcError(RPC_CODES.versionNotSupported, `The requested A2A protocol version "${requested}" is not supported. Supported versions: 1.0, 0.3`),
};

export type RpcId = string | number | null;

export interface RpcRequest {
  id: RpcId;
  method: string;
  params: unknown;
}

export type RpcResponse = { jsonrpc: '2.0'; id: RpcId; result: unknown } | { jsonrpc: '2.0'; id: RpcId; error: { code: number; message: string; data?: Record<string, unknown> } };

export function rpcResult(id: RpcId, result: unknown): RpcResponse {
  return { jsonrpc: '2.0', id, result };
}

export function rpcError(id: RpcId, error: RpcError): RpcResponse {
  return { jsonrpc: '2.0', id, error: { code: error.code, message: error.message, ...(error.data ? { data: error.data } : {}) } };
}


/**
 * The raw body as a JSON-RPC 2.0 request. Not JSON: -32700. JSON but not a request object (a batch, a wrong
 * `jsonrpc`, no method, an id that is not a string, number or null): -32600, with the id when one was readable.
 */
export function parseEnvelope(body: unknown): { id: RpcId; request?: RpcRequest; error?: RpcError } {
  const text = typeof body === 'string' ? body : Buffer.isBuffer(body) ? body.toString('utf8') : '';
  if (text.trim() === '') return { id: null, error: RPC_ERRORS.parse('the body is empty; send a JSON-RPC 2.0 request object') };
  let value: unknown;
  try {
    value = parseClientJson(text);
  } catch (err) {
    const appError = err as AppError;
    if (appError.code === 'invalid_json') return { id: null, error: RPC_ERRORS.parse(appError.message) };
    return { id: null, error: RPC_ERRORS.invalidRequest(appError.message) };
  }
  if (Array.isArray(value)) return { id: null, error: RPC_ERRORS.invalidRequest('batch requests are not supported; send one request object') };
  if (!isJsonObject(value)) return { id: null, error: RPC_ERRORS.invalidRequest('the body must be a JSON-RPC 2.0 request object') };
  const rawId = value.id;
  const idValid = rawId === undefined || rawId === null || typeof rawId === 'string' || (typeof rawId === 'number' && Number.isFinite(rawId));
  const id: RpcId = idValid ? ((rawId as RpcId | undefined) ?? null) : null;
  if (!idValid) return { id, error: RPC_ERRORS.invalidRequest('id must be a string, a number or null') };
  if (value.jsonrpc !== '2.0') return { id, error: RPC_ERRORS.invalidRequest('jsonrpc must be "2.0"') };
  if (typeof value.method !== 'string' || value.method === '') return { id, error: RPC_ERRORS.invalidRequest('method must be a non-empty string') };
  return { id, request: { id, method: value.method, params: value.params } };
}

/** The parameters of a request as an object (JSON-RPC by-name parameters); anything else is -32602. */
export function paramsObject(params: unknown): Record<string, unknown> {
  if (!isJsonObject(params)) throw RPC_ERRORS.invalidParams('params must be an object');
  return params;
}

// --- Task ids -------------------------------------------------------------------------------------------------

const CONVERSATION_PREFIX = 'conv_';
/** One spelling per task: the seq without leading zeros. */
const TASK_ID = /^task_([a-z2-7]{24})_(0|[1-9]\d{0,8})$/;

/**
 * A task is one turn of a stored conversation: `task_<the conversation id's 24 characters>_<seq>`, where seq is the
 * assistant message's position in the conversation (0-based; the first reply is 1). The conversation is the
 * task's `contextId`.
 */
export function taskIdOf(conversationId: string, seq: number): string {
  return `task_${conversationId.slice(CONVERSATION_PREFIX.length)}_${seq}`;
}

/** The conversation and message a task id names; null for anything malformed. */
export function parseTaskId(id: string): { conversationId: string; seq: number } | null {
  const match = TASK_ID.exec(id);
  return match ? { conversationId: `${CONVERSATION_PREFIX}${match[1]}`, seq: Number(match[2]) } : null;
}

/** Message and artifact ids derived the same way, so a rebuilt task is identical to the one first returned. */
export function messageIdOf(conversationId: string, seq: number): string {
  return `msg_${conversationId.slice(CONVERSATION_PREFIX.length)}_${seq}`;
}

export function artifactIdOf(conversationId: string, seq: number): string {
  return `artifact_${conversationId.slice(CONVERSATION_PREFIX.length)}_${seq}`;
}

// --- Parameter readers ------------------------------------------------------------------------------------------

/** What `message/send` / `SendMessage` asks for, in either dialect. */
export interface SendRequest {
  /** The message's text parts, joined by newlines. */
  text: string;
  contextId?: string;
  taskId?: string;
  runtimeContext?: Record<string, unknown>;
  historyLength?: number;
}

const USER_ROLES: Record<Dialect, readonly unknown[]> = { '0.3': ['user'], '1.0': ['ROLE_USER', 1] };

/** A field spelled in camelCase, or (1.0, proto JSON) in snake_case. */
function field(object: Record<string, unknown>, camel: string, snake: string, dialect: Dialect): unknown {
  return object[camel] ?? (dialect === '1.0' ? object[snake] : undefined);
}

function optionalString(value: unknown, name: string): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw RPC_ERRORS.invalidParams(`${name} must be a string`);
  return value;
}

/** `historyLength` (3.2.4 of A2A 1.0): unset is all history, 0 none, n the last n messages. */
function readHistoryLength(object: Record<string, unknown> | undefined, dialect: Dialect, name: string): number | undefined {
  if (!object) return undefined;
  const value = field(object, 'historyLength', 'history_length', dialect);
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) throw RPC_ERRORS.invalidParams(`${name} must be a non-negative integer`);
  return value;
}

/** A text part: 0.3 `{ kind: 'text', text }` (a part without `kind` but with text counts too), 1.0 `{ text }`. */
function partText(part: unknown, index: number, dialect: Dialect): string | null {
  if (!isJsonObject(part)) throw RPC_ERRORS.invalidParams(`params.message.parts[${index}] must be an object`);
  const isText = dialect === '0.3' ? part.kind === 'text' || (part.kind === undefined && 'text' in part) : 'text' in part;
  if (!isText) return null;
  if (typeof part.text !== 'string') throw RPC_ERRORS.invalidParams(`params.message.parts[${index}].text must be a string`);
  return part.text;
}

/**
 * `message/send` (0.3) or `SendMessage` (1.0) parameters. The message must carry text (other parts are ignored);
 * `contextId` continues a conversation, `taskId` names a task to continue, `metadata.runtime_context` (an object)
 * reaches the agent run.
 */
export function readSendRequest(params: unknown, dialect: Dialect): SendRequest {
  const object = paramsObject(params);
  const message = object.message;
  if (!isJsonObject(message)) throw RPC_ERRORS.invalidParams('params.message is required and must be an object');
  if (message.role !== undefined && !USER_ROLES[dialect].includes(message.role)) {
    throw RPC_ERRORS.invalidParams(`params.message.role must be ${dialect === '0.3' ? '"user"' : '"ROLE_USER"'}`);
  }
  if (!Array.isArray(message.parts)) throw RPC_ERRORS.invalidParams('params.message.parts must be an array');
  const texts = message.parts.map((part, i) => partText(part, i, dialect)).filter((text): text is string => text !== null);
  const text = texts.join('\n');
  if (text.trim() === '') throw RPC_ERRORS.invalidParams('params.message.parts must contain a text part with text');
  const metadata = message.metadata;
  if (metadata !== undefined && metadata !== null && !isJsonObject(metadata)) throw RPC_ERRORS.invalidParams('params.message.metadata must be an object');
  const runtimeContext = isJsonObject(metadata) ? metadata.runtime_context : undefined;
  if (runtimeContext !== undefined && runtimeContext !== null && !isJsonObject(runtimeContext)) {
    throw RPC_ERRORS.invalidParams('params.message.metadata.runtime_context must be an object');
  }
  const configuration = object.configuration;
  if (configuration !== undefined && configuration !== null && !isJsonObject(configuration)) throw RPC_ERRORS.invalidParams('params.configuration must be an object');
  return {
    text,
    contextId: optionalString(field(message, 'contextId', 'context_id', dialect), 'params.message.contextId'),
    taskId: optionalString(field(message, 'taskId', 'task_id', dialect), 'params.message.taskId'),
    runtimeContext: isJsonObject(runtimeContext) ? runtimeContext : undefined,
    historyLength: readHistoryLength(isJsonObject(configuration) ? configuration : undefined, dialect, 'params.configuration.historyLength'),
  };
}

/** `tasks/get` (0.3) or `GetTask` (1.0) parameters: the task id and an optional history length. */
export function readGetRequest(params: unknown, dialect: Dialect): { id: string; historyLength?: number } {
  const object = paramsObject(params);
  if (typeof object.id !== 'string' || object.id === '') throw RPC_ERRORS.invalidParams('params.id must be a task id');
  return { id: object.id, historyLength: readHistoryLength(object, dialect, 'params.historyLength') };
}

// --- Errors of a run --------------------------------------------------------------------------------------------

/**
 * An error of the agent run as a JSON-RPC error: the request's own fault (400, 413, 422: a guardrail block, no
 * published version, empty input) is -32602; everything else (a missing model, 429 rate limits and budgets,
 * 502/504 upstream failures) is -32603 with its message. `data` keeps the HTTP status, type and code the REST
 * endpoints would answer, the Retry-After seconds and any extra fields (a guardrail block's findings).
 */
export function rpcErrorOf(err: AppError): RpcError {
  const data: Record<string, unknown> = { status: err.statusCode, type: err.type, ...(err.code ? { code: err.code } : {}), ...err.details };
  const retryAfter = err.headers['retry-after'];
  if (retryAfter !== undefined) data.retryAfter = Number(retryAfter);
  if (err.statusCode === 400 || err.statusCode === 413 || err.statusCode === 422) return new RpcError(RPC_CODES.invalidParams, err.message, data);
  return new RpcError(RPC_CODES.internalError, err.message, data);
}
