import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import { call, createTestApp, type TestApp } from '../helpers/app.js';
import { startFakeAnthropic, startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { post, registerFakeModel, UPSTREAM_KEY } from '../helpers/inference.js';
import { chatBody, registerModel } from '../helpers/models.js';

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

/** An app with PII guardrails that block or redact, on input or output models of a fake OpenAI and an Anthropic model. */
export interface PiiModels {
  t: TestApp;
  fake: FakeUpstream;
  anthropic: FakeUpstream;
  blockIn: string;
  redactIn: string;
  blockOut: string;
  redactOut: string;
  /** An Anthropic model with the blocking guardrail on input. */
  claude: string;
  close(): Promise<void>;
}

export async function startPiiModels(): Promise<PiiModels> {
  const t = await createTestApp({ backend: 'sqlite', env: { WAYGATE_UPSTREAM_RETRIES: '0' } });
  const fake = await startFakeOpenAi();
  const anthropic = await startFakeAnthropic();
  const block = await guardrail(t, { key: 'pii-block', type: 'pii', target: 'both' });
  const redact = await guardrail(t, { key: 'pii-redact', type: 'pii', action: 'redact', target: 'both' });
  return {
    t,
    fake,
    anthropic,
    blockIn: await registerFakeModel(t, fake, { capabilities: ['chat'], guardrails: { input: [block] } }),
    redactIn: await registerFakeModel(t, fake, { capabilities: ['chat'], guardrails: { input: [redact] } }),
    blockOut: await registerFakeModel(t, fake, { capabilities: ['chat'], guardrails: { output: [block] } }),
    redactOut: await registerFakeModel(t, fake, { capabilities: ['chat'], guardrails: { output: [redact] } }),
    claude: await registerModel(t, { provider: { type: 'anthropic', baseUrl: anthropic.baseUrl, apiKey: UPSTREAM_KEY }, upstreamModel: 'claude-x', capabilities: ['chat'], guardrails: { input: [block] } }),
    close: async () => {
      await t.close();
      await fake.close();
      await anthropic.close();
    },
  };
}

/** PiiModels for one describe block, with its chat call and what the fake OpenAI upstream got first. */
export interface PiiSuite extends PiiModels {
  chat(model: string, extra: Record<string, unknown>): Promise<LightMyRequestResponse>;
  upstreamMessages(): Record<string, unknown>[];
}

/**
 * Starts the PII models before the block's tests and closes them after; each test starts with empty upstream records.
 * The fields are filled in by the block's beforeAll, so read them inside tests.
 */
export function usePiiModels(): PiiSuite {
  const suite = {
    chat: (model: string, extra: Record<string, unknown>) => post(suite.t, suite.t.ownerToken, '/chat/completions', chatBody(model, extra)),
    upstreamMessages: () => suite.fake.requests[0]?.body.messages as Record<string, unknown>[],
  } as PiiSuite;
  beforeAll(async () => {
    Object.assign(suite, await startPiiModels());
  });
  afterAll(async () => suite.close?.());
  beforeEach(() => {
    if (!suite.fake) return;
    suite.fake.requests.length = 0;
    suite.anthropic.requests.length = 0;
  });
  return suite;
}
