import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { call, type TestApp } from '../helpers/app.js';
import { createAgent, publish } from '../agents/support.js';

export const A2A = '/api/client/v1/a2a';

export type Version = '0.3' | '1.0';

export interface WirePart {
  kind?: string;
  text?: string;
}
export interface WireMessage {
  kind?: string;
  messageId: string;
  contextId: string;
  taskId: string;
  role: string;
  parts: WirePart[];
}
export interface WireTask {
  kind?: string;
  id: string;
  contextId: string;
  status: { state: string; message?: WireMessage; timestamp: string };
  artifacts: { artifactId: string; name: string; parts: WirePart[] }[];
  history?: WireMessage[];
  metadata: Record<string, unknown>;
}

/** The methods of each dialect. */
export const METHODS = {
  '0.3': { send: 'message/send', get: 'tasks/get', cancel: 'tasks/cancel' },
  '1.0': { send: 'SendMessage', get: 'GetTask', cancel: 'CancelTask' },
} as const;

/** A published agent exposed over A2A (local-chat unless told), with whatever else `body` sets. */
export async function exposedAgent(t: TestApp, config: Record<string, unknown> = { modelKey: 'local-chat' }, body: Record<string, unknown> = {}, token = t.ownerToken): Promise<string> {
  const agent = await createAgent(t, { name: 'A2A agent', config, metadata: { a2a: { enabled: true } }, ...body }, token);
  await publish(t, agent.key, undefined, token);
  return agent.key;
}

/** POST /a2a/{key} with a raw body (a string is sent as it is, as application/json) and an optional A2A-Version. */
export function rpcRaw(t: TestApp, key: string, payload: string | object, options: { version?: string; token?: string | null; headers?: Record<string, string> } = {}): Promise<LightMyRequestResponse> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(options.version === undefined ? {} : { 'a2a-version': options.version }), ...options.headers };
  return call(t.app, options.token === undefined ? t.ownerToken : options.token, {
    method: 'POST',
    url: `${A2A}/${key}`,
    headers,
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });
}

/** A JSON-RPC request of a dialect (0.3 without the header, 1.0 with `A2A-Version: 1.0`). */
export function rpc(t: TestApp, key: string, version: Version, method: string, params: unknown, id: string | number = 1, token?: string): Promise<LightMyRequestResponse> {
  return rpcRaw(t, key, { jsonrpc: '2.0', id, method, params }, { version: version === '1.0' ? '1.0' : undefined, token });
}

/** A user message of a dialect with one text part. */
export function userMessage(version: Version, text: string, extra: Record<string, unknown> = {}) {
  return version === '0.3'
    ? { kind: 'message', messageId: `m-${Math.random().toString(36).slice(2)}`, role: 'user', parts: [{ kind: 'text', text }], ...extra }
    : { messageId: `m-${Math.random().toString(36).slice(2)}`, role: 'ROLE_USER', parts: [{ text }], ...extra };
}

/** The task of a send result (1.0 wraps it: `{ task }`). */
export function taskOf(version: Version, result: Record<string, unknown>): WireTask {
  return (version === '1.0' ? result.task : result) as WireTask;
}

/** Sends a message and returns the task (fails the test on a JSON-RPC error). */
export async function send(t: TestApp, key: string, version: Version, text: string, extra: Record<string, unknown> = {}): Promise<WireTask> {
  const res = await rpc(t, key, version, METHODS[version].send, { message: userMessage(version, text, extra) });
  expect(res.statusCode, res.body).toBe(200);
  const body = res.json();
  expect(body.error, res.body).toBeUndefined();
  return taskOf(version, body.result);
}

/** A JSON-RPC error answer: HTTP 200, the request's id, and the code. */
export function expectRpcError(res: LightMyRequestResponse, code: number, id: string | number | null = 1): { code: number; message: string; data?: Record<string, unknown> } {
  expect(res.statusCode, res.body).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const body = res.json();
  expect(body.jsonrpc).toBe('2.0');
  expect(body.id).toBe(id);
  expect(body.result).toBeUndefined();
  expect(body.error?.code, res.body).toBe(code);
  expect(typeof body.error.message).toBe('string');
  return body.error;
}

/** The text of a task's first artifact, in either dialect. */
export function replyText(task: WireTask): string {
  return task.artifacts[0]!.parts[0]!.text!;
}
