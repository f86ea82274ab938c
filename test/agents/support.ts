import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { call, type TestApp } from '../helpers/app.js';

export const AGENTS = '/api/client/v1/agents';

export interface AgentView {
  key: string;
  name: string;
  status: string;
  kind: string;
  hasApiKey: boolean;
  config: Record<string, unknown> & { connection: Record<string, unknown> | null };
  metadata: Record<string, unknown>;
  publishedVersion: number | null;
}

export function agentsCall(t: TestApp, options: InjectOptions, token = t.ownerToken): Promise<LightMyRequestResponse> {
  return call(t.app, token, options);
}

/** Creates an agent (fails the test unless 201) and returns its view. */
export async function createAgent(t: TestApp, body: Record<string, unknown>, token = t.ownerToken): Promise<AgentView> {
  const res = await agentsCall(t, { method: 'POST', url: AGENTS, payload: body }, token);
  expect(res.statusCode, res.body).toBe(201);
  return res.json().agent as AgentView;
}

/** Publishes the agent's current configuration and returns the version number. */
export async function publish(t: TestApp, key: string, changelog?: string, token = t.ownerToken): Promise<number> {
  const res = await agentsCall(t, { method: 'POST', url: `${AGENTS}/${key}/publish`, payload: changelog === undefined ? undefined : { changelog } }, token);
  expect(res.statusCode, res.body).toBe(201);
  return res.json().version.number as number;
}

/** POST /agents/responses. */
export function respond(t: TestApp, body: Record<string, unknown>, token = t.ownerToken): Promise<LightMyRequestResponse> {
  return agentsCall(t, { method: 'POST', url: `${AGENTS}/responses`, payload: body }, token);
}

export { otherProject } from '../helpers/app.js';
