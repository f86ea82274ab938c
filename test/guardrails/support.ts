import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { call, type TestApp } from '../helpers/app.js';

export const GUARDRAILS = '/api/guardrails';
export const EVALUATE = '/api/client/v1/guardrails/evaluate';

export function createGuardrail(t: TestApp, body: Record<string, unknown>, session = t.adminSession): Promise<LightMyRequestResponse> {
  return call(t.app, session, { method: 'POST', url: GUARDRAILS, payload: body });
}

/** Creates a guardrail (fails the test unless 201) and returns its key. */
export async function guardrail(t: TestApp, body: Record<string, unknown>): Promise<string> {
  const res = await createGuardrail(t, body);
  expect(res.statusCode, res.body).toBe(201);
  return res.json().guardrail.key as string;
}

export function evaluate(t: TestApp, body: Record<string, unknown>, token = t.ownerToken): Promise<LightMyRequestResponse> {
  return call(t.app, token, { method: 'POST', url: EVALUATE, payload: body });
}

/** A chat completion whose message is `content`: what a judge model answers. */
export function judgeAnswer(content: string): Record<string, unknown> {
  return { id: 'chatcmpl-judge', object: 'chat.completion', created: 1, model: 'judge', choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage: { prompt_tokens: 30, completion_tokens: 8, total_tokens: 38 } };
}

/** Evaluation rows of a guardrail, flushed first. */
export async function evaluationRows(t: TestApp, key: string) {
  await t.ctx.services.guardrailEvaluator.flush();
  return t.ctx.database.db.selectFrom('guardrail_evaluations').selectAll().where('guardrail_key', '=', key).orderBy('created_at').orderBy('id').execute();
}
