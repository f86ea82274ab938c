import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { settledWithin } from '../../src/platform/time.js';
import { BACKENDS, call, createTestApp, type TestApp } from '../helpers/app.js';
import { registerModel } from '../helpers/models.js';
import { holdNext } from '../helpers/races.js';
import { GUARDRAILS, guardrail } from './support.js';

/** How long the second change may run while the first is held; ample for it to finish when nothing holds it up. */
const SECOND_CHANGE_MS = 250;

const newKey = (prefix: string) => `${prefix}-${randomBase32(8).toLowerCase()}`;

type Change = () => Promise<LightMyRequestResponse>;

/**
 * Runs `first` until `target[method]`, which it calls after its checks and before its commit, has returned, and holds
 * it there while `second` runs; then lets `first` go on. Without a lock the second change checks the state before the
 * first and commits (`secondWaited` false); with one it waits for what the first holds (its rows on PostgreSQL, the
 * one connection on SQLite) and then checks the first's result.
 */
async function interleaved(target: object, method: string, first: Change, second: Change) {
  const held = holdNext(target, method);
  const firstDone = first();
  await Promise.race([held.reached, firstDone]);
  held.restore();
  const secondDone = second();
  const secondWaited = !(await settledWithin(secondDone, SECOND_CHANGE_MS));
  held.release();
  const [firstAnswer, secondAnswer] = await Promise.all([firstDone, secondDone]);
  return { firstAnswer, secondAnswer, secondWaited };
}

interface StoredModel {
  key: string;
  capabilities: string[];
  guardrails: { input: string[]; output: string[] };
}
interface StoredGuardrail {
  key: string;
  type: string;
  target: string;
  modelKey: string | null;
  enabled: boolean;
}

/**
 * What both areas promise, read back once the dust has settled: a model runs a guardrail only at a stage its target
 * allows, and an enabled custom_prompt guardrail names an existing chat model as its judge.
 */
async function expectLinksHold(t: TestApp): Promise<void> {
  const models: StoredModel[] = (await call(t.app, t.adminSession, { method: 'GET', url: '/api/models' })).json().models;
  const guardrails = new Map<string, StoredGuardrail>((await call(t.app, t.adminSession, { method: 'GET', url: GUARDRAILS })).json().guardrails.map((g: StoredGuardrail) => [g.key, g]));
  for (const model of models) {
    for (const key of model.guardrails.input) expect(guardrails.get(key)?.target, `${model.key} runs ${key} on input`).toMatch(/^(input|both)$/);
    for (const key of model.guardrails.output) expect(guardrails.get(key)?.target, `${model.key} runs ${key} on output`).toMatch(/^(output|both)$/);
  }
  for (const judged of [...guardrails.values()].filter((g) => g.enabled && g.type === 'custom_prompt')) {
    expect(models.find((m) => m.key === judged.modelKey)?.capabilities, `judge of ${judged.key}`).toContain('chat');
  }
}

/**
 * Models and guardrails each check the other before writing. Two changes at once, each valid against the state the
 * other replaces, used to both commit: a model running a guardrail at a stage its new target excludes, or an enabled
 * guardrail whose judge model was deleted or lost chat. Each race is forced from both sides: the change held first
 * wins, the other gets the answer it gets when the two are sent one after the other.
 */
describe.each(BACKENDS)('models and guardrails changed at once on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend, noWorkers: true });
  });
  afterAll(async () => t?.close());

  const guardrailStore = () => (t.ctx.services.guardrails as unknown as { store: object }).store;
  const patchModel = (key: string, payload: Record<string, unknown>) => () => call(t.app, t.adminSession, { method: 'PATCH', url: `/api/models/${key}`, payload });
  const patchGuardrail = (key: string, payload: Record<string, unknown>) => () => call(t.app, t.adminSession, { method: 'PATCH', url: `${GUARDRAILS}/${key}`, payload });

  describe('a guardrail narrowed to input while a model attaches it on output', () => {
    it('the attach, held after its check, wins; the new target is refused (400)', async () => {
      const key = await guardrail(t, { key: newKey('g'), type: 'pii', action: 'flag', target: 'both' });
      const model = await registerModel(t, { provider: { type: 'mock' }, capabilities: ['chat'] });
      const { firstAnswer: attached, secondAnswer: narrowed, secondWaited } = await interleaved(t.ctx.services.guardrails, 'checkModelGuardrails', patchModel(model, { guardrails: { output: [key] } }), patchGuardrail(key, { target: 'input' }));
      expect(attached.statusCode, attached.body).toBe(200);
      expect(narrowed.statusCode, narrowed.body).toBe(400);
      expect(narrowed.json().error.message).toBe(`Guardrail "${key}" targets input only, but model "${model}" runs it on output`);
      expect(secondWaited).toBe(true);
      await expectLinksHold(t);
    });

    it('the new target, held after its write, wins; the attach is refused (400)', async () => {
      const key = await guardrail(t, { key: newKey('g'), type: 'pii', action: 'flag', target: 'both' });
      const model = await registerModel(t, { provider: { type: 'mock' }, capabilities: ['chat'], guardrails: { input: [key], output: [] } });
      const { firstAnswer: narrowed, secondAnswer: attached, secondWaited } = await interleaved(guardrailStore(), 'update', patchGuardrail(key, { target: 'input' }), patchModel(model, { guardrails: { output: [key] } }));
      expect(narrowed.statusCode, narrowed.body).toBe(200);
      expect(attached.statusCode, attached.body).toBe(400);
      expect(attached.json().error.message).toBe(`Guardrail "${key}" targets input only, but model "${model}" runs it on output`);
      expect(secondWaited).toBe(true);
      await expectLinksHold(t);
    });
  });

  describe('a judge model deleted or losing chat while a guardrail comes to rely on it', () => {
    it('the delete, held after its check, wins; enabling a guardrail judged by it is refused (400)', async () => {
      const judge = await registerModel(t, { provider: { type: 'mock' }, capabilities: ['chat'] });
      const key = await guardrail(t, { key: newKey('g'), type: 'custom_prompt', config: { rules: 'Be polite.' }, modelKey: judge, enabled: false });
      const { firstAnswer: deleted, secondAnswer: enabled, secondWaited } = await interleaved(
        t.ctx.services.guardrails,
        'checkJudgeChange',
        () => call(t.app, t.adminSession, { method: 'DELETE', url: `/api/models/${judge}` }),
        patchGuardrail(key, { enabled: true }),
      );
      expect(deleted.statusCode, deleted.body).toBe(200);
      expect(enabled.statusCode, enabled.body).toBe(400);
      expect(enabled.json().error.message).toBe(`modelKey: model "${judge}" does not exist in this project`);
      expect(secondWaited).toBe(true);
      await expectLinksHold(t);
    });

    it('a guardrail naming it, held after its write, wins; taking chat from the model is refused (409)', async () => {
      const judge = await registerModel(t, { provider: { type: 'mock' }, capabilities: ['chat', 'embeddings'] });
      const key = newKey('g');
      const { firstAnswer: created, secondAnswer: narrowed, secondWaited } = await interleaved(
        guardrailStore(),
        'insert',
        () => call(t.app, t.adminSession, { method: 'POST', url: GUARDRAILS, payload: { key, type: 'custom_prompt', config: { rules: 'Be polite.' }, modelKey: judge } }),
        patchModel(judge, { capabilities: ['embeddings'] }),
      );
      expect(created.statusCode, created.body).toBe(201);
      expect(narrowed.statusCode, narrowed.body).toBe(409);
      expect(narrowed.json().error.message).toBe(`Model "${judge}" judges for guardrail "${key}" (custom_prompt guardrails are judged by a chat model); change or disable the guardrail first`);
      expect(secondWaited).toBe(true);
      await expectLinksHold(t);
    });
  });
});
