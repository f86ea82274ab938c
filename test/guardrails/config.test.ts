import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, call, createTestApp, createUserSession, flushAudit, type TestApp } from '../helpers/app.js';
import { registerModel } from '../helpers/models.js';
import { holdTogether } from '../helpers/races.js';
import { createGuardrail, evaluate, GUARDRAILS, guardrail } from './support.js';

describe.each(BACKENDS)('guardrail configuration on %s', (backend) => {
  let t: TestApp;
  let chatModel: string;
  let embedModel: string;

  beforeAll(async () => {
    t = await createTestApp({ backend, noWorkers: true });
    chatModel = await registerModel(t, { provider: { type: 'mock' }, capabilities: ['chat'] });
    embedModel = await registerModel(t, { provider: { type: 'mock' }, capabilities: ['embeddings'] });
  });
  afterAll(async () => t?.close());

  it('creates a guardrail with defaults and lists it', async () => {
    const res = await createGuardrail(t, { key: 'pii-default', type: 'pii' });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().guardrail).toEqual({
      key: 'pii-default', name: 'pii-default', type: 'pii', action: 'block', target: 'input', config: {}, modelKey: null, failMode: 'closed', enabled: true,
      createdAt: expect.any(String), updatedAt: expect.any(String),
    });
    const list = await call(t.app, t.adminSession, { method: 'GET', url: GUARDRAILS });
    expect(list.json().guardrails.map((g: { key: string }) => g.key)).toContain('pii-default');
  });

  it.each([
    ['pii', { key: 'p1', type: 'pii', action: 'redact', target: 'both', config: { categories: ['email', 'phone'] } }],
    ['moderation (built in)', { key: 'm1', type: 'moderation', config: { categories: ['violence'], threshold: 0.6, extraCategories: [{ name: 'competitors', terms: ['acme corp'], patterns: ['globex\\s+inc'] }] } }],
    ['prompt shield', { key: 's1', type: 'prompt_shield', action: 'flag', config: { sensitivity: 'high' } }],
  ])('accepts a %s configuration', async (_case, body) => {
    const res = await createGuardrail(t, body);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().guardrail).toMatchObject({ ...body, config: body.config });
  });

  it('model-based checks need a model of the project that can judge', async () => {
    const ok = await createGuardrail(t, { key: 'c1', type: 'custom_prompt', config: { rules: 'Never mention prices.' }, modelKey: chatModel, failMode: 'open' });
    expect(ok.statusCode, ok.body).toBe(201);
    expect((await createGuardrail(t, { key: 's2', type: 'prompt_shield', config: { modelCheck: true }, modelKey: chatModel })).statusCode).toBe(201);
    expect((await createGuardrail(t, { key: 'm2', type: 'moderation', config: { engine: 'model' }, modelKey: chatModel })).statusCode).toBe(201);
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ key: 'x1', type: 'custom_prompt', config: { rules: 'x' } }, /modelKey is required: custom_prompt guardrails are judged by a chat model/],
      [{ key: 'x2', type: 'custom_prompt', config: { rules: 'x' }, modelKey: 'nope' }, /modelKey: model "nope" does not exist in this project/],
      [{ key: 'x3', type: 'custom_prompt', config: { rules: 'x' }, modelKey: embedModel }, /cannot judge/],
      [{ key: 'x4', type: 'prompt_shield', config: { modelCheck: true } }, /modelKey is required: modelCheck asks a chat model/],
      [{ key: 'x5', type: 'pii', modelKey: chatModel }, /modelKey is not used by this guardrail/],
    ];
    for (const [body, message] of cases) {
      const res = await createGuardrail(t, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().error.message).toMatch(message);
    }
  });

  it.each([
    ['an unknown type', { key: 'b1', type: 'regex' }, /type must be one of: pii, moderation, prompt_shield, custom_prompt/],
    ['an unknown action', { key: 'b2', type: 'pii', action: 'mask' }, /action must be one of: block, flag, redact/],
    ['redact on moderation', { key: 'b3', type: 'moderation', action: 'redact' }, /action redact is for pii guardrails only/],
    ['an unknown PII category', { key: 'b4', type: 'pii', config: { categories: ['dna'] } }, /config\.categories\.0 must be one of/],
    ['an unknown config field', { key: 'b5', type: 'pii', config: { everything: true } }, /config\.everything is not a known field/],
    ['custom prompt without rules', { key: 'b6', type: 'custom_prompt', config: {} }, /config\.rules is required/],
    ['a bad threshold', { key: 'b7', type: 'moderation', config: { threshold: 2 } }, /config\.threshold/],
    ['an unknown moderation category', { key: 'b8', type: 'moderation', config: { categories: ['spam'] } }, /config\.categories\.0 must be one of/],
    ['a dangerous extra pattern', { key: 'b9', type: 'moderation', config: { extraCategories: [{ name: 'x', terms: [], patterns: ['(a+)+$'] }] } }, /config\.extraCategories/],
    ['a bad key', { key: '-bad key', type: 'pii' }, /key/],
    ['an unknown sensitivity', { key: 'b10', type: 'prompt_shield', config: { sensitivity: 'paranoid' } }, /config\.sensitivity must be one of: low, balanced, high/],
  ])('refuses %s (400)', async (_case, body, message) => {
    const res = await createGuardrail(t, body);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error.message).toMatch(message);
  });

  it('refuses a duplicate key (409)', async () => {
    await guardrail(t, { key: 'dup', type: 'pii' });
    const res = await createGuardrail(t, { key: 'dup', type: 'moderation' });
    expect(res.statusCode).toBe(409);
  });

  it('PATCH changes what it names and validates the result; 404 for an unknown key', async () => {
    await guardrail(t, { key: 'patch-me', type: 'pii' });
    const res = await call(t.app, t.adminSession, { method: 'PATCH', url: `${GUARDRAILS}/patch-me`, payload: { name: 'Patched', action: 'redact', config: { categories: ['email'] }, enabled: false } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().guardrail).toMatchObject({ key: 'patch-me', name: 'Patched', action: 'redact', config: { categories: ['email'] }, enabled: false, type: 'pii', target: 'input' });
    const bad = await call(t.app, t.adminSession, { method: 'PATCH', url: `${GUARDRAILS}/patch-me`, payload: { config: { categories: [] } } });
    expect(bad.statusCode).toBe(400);
    expect((await call(t.app, t.adminSession, { method: 'PATCH', url: `${GUARDRAILS}/nope`, payload: { name: 'x' } })).statusCode).toBe(404);
    expect((await call(t.app, t.adminSession, { method: 'PATCH', url: `${GUARDRAILS}/patch-me`, payload: { type: 'moderation' } })).statusCode).toBe(400);
  });

  it('two PATCHes of different fields at once both hold: the later one starts again from the first one\'s result', async () => {
    const key = await guardrail(t, { key: `race-${Date.now().toString(36)}`, type: 'pii', action: 'flag' });
    const restore = holdTogether((t.ctx.services.guardrails as unknown as { store: object }).store, 'find', 2);
    const [blocked, renamed] = await Promise.all([
      call(t.app, t.adminSession, { method: 'PATCH', url: `${GUARDRAILS}/${key}`, payload: { action: 'block' } }),
      call(t.app, t.adminSession, { method: 'PATCH', url: `${GUARDRAILS}/${key}`, payload: { name: 'Renamed' } }),
    ]);
    restore();
    expect([blocked.statusCode, renamed.statusCode]).toEqual([200, 200]);
    const stored = (await call(t.app, t.adminSession, { method: 'GET', url: GUARDRAILS })).json().guardrails.find((g: { key: string }) => g.key === key);
    expect(stored).toMatchObject({ action: 'block', name: 'Renamed' });
  });

  it('a guardrail deleted and created again under its key starts with no evaluations of its own', async () => {
    const key = `reused-${Date.now().toString(36)}`;
    await guardrail(t, { key, type: 'pii' });
    for (let i = 0; i < 3; i++) expect((await evaluate(t, { guardrail_key: key, text: 'mail me at a.b@example.com' })).statusCode).toBe(200);
    expect((await call(t.app, t.adminSession, { method: 'DELETE', url: `${GUARDRAILS}/${key}` })).statusCode).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 2));
    await guardrail(t, { key, type: 'prompt_shield' });
    const res = await call(t.app, t.adminSession, { method: 'GET', url: `${GUARDRAILS}/${key}/evaluations` });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ stats: { evaluations: 0, failed: 0, failRate: 0 } });
    expect(res.json().evaluations).toEqual([]);
  });

  it('PATCH keeps modelKey when it is left out and removes it when it is null', async () => {
    await guardrail(t, { key: 'judged', type: 'moderation', config: { engine: 'model' }, modelKey: chatModel });
    const renamed = await call(t.app, t.adminSession, { method: 'PATCH', url: `${GUARDRAILS}/judged`, payload: { name: 'Renamed' } });
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect(renamed.json().guardrail).toMatchObject({ name: 'Renamed', modelKey: chatModel });
    const offline = await call(t.app, t.adminSession, { method: 'PATCH', url: `${GUARDRAILS}/judged`, payload: { config: {}, modelKey: null } });
    expect(offline.statusCode, offline.body).toBe(200);
    expect(offline.json().guardrail).toMatchObject({ name: 'Renamed', config: {}, modelKey: null });
  });

  it('models may name only existing guardrails, for a stage their target allows', async () => {
    await guardrail(t, { key: 'in-only', type: 'pii' });
    await guardrail(t, { key: 'out-only', type: 'pii', target: 'output' });
    const bad = [
      [{ input: ['missing'] }, /guardrail "missing" does not exist in this project/],
      [{ output: ['in-only'] }, /targets input only, but model ".*" runs it on output/],
      [{ input: ['out-only'] }, /targets output only, but model ".*" runs it on input/],
    ] as const;
    for (const [guardrails, message] of bad) {
      const res = await call(t.app, t.adminSession, { method: 'POST', url: '/api/models', payload: { key: `g-${Math.random().toString(36).slice(2, 8)}`, provider: { type: 'mock' }, capabilities: ['chat'], guardrails } });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error.message).toMatch(message);
    }
    const model = await registerModel(t, { provider: { type: 'mock' }, capabilities: ['chat'], guardrails: { input: ['in-only'], output: ['out-only'] } });
    // Changing a guardrail's target under a model that runs it on the other stage is refused, not silently skipped.
    const retarget = await call(t.app, t.adminSession, { method: 'PATCH', url: `${GUARDRAILS}/in-only`, payload: { target: 'output' } });
    expect(retarget.statusCode).toBe(400);
    expect(retarget.json().error.message).toMatch(new RegExp(`model "${model}" runs it on input`));
    // And a guardrail a model names cannot be deleted.
    const del = await call(t.app, t.adminSession, { method: 'DELETE', url: `${GUARDRAILS}/in-only` });
    expect(del.statusCode).toBe(409);
    expect(del.json().error.message).toMatch(new RegExp(`used by model "${model}"`));
    expect((await call(t.app, t.adminSession, { method: 'PATCH', url: `/api/models/${model}`, payload: { guardrails: { input: [] } } })).statusCode).toBe(200);
    expect((await call(t.app, t.adminSession, { method: 'DELETE', url: `${GUARDRAILS}/in-only` })).json()).toEqual({ success: true });
    expect((await call(t.app, t.adminSession, { method: 'DELETE', url: `${GUARDRAILS}/in-only` })).statusCode).toBe(404);
  });

  it("another project's guardrails are invisible (404), and a viewer may read but not write", async () => {
    await guardrail(t, { key: 'mine', type: 'pii' });
    const other = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: 'Other' } });
    const otherProject = { 'x-waygate-project': other.json().project.id };
    const list = await call(t.app, t.adminSession, { method: 'GET', url: GUARDRAILS, headers: otherProject });
    expect(list.json().guardrails).toEqual([]);
    expect((await call(t.app, t.adminSession, { method: 'PATCH', url: `${GUARDRAILS}/mine`, headers: otherProject, payload: { name: 'x' } })).statusCode).toBe(404);
    expect((await call(t.app, t.adminSession, { method: 'DELETE', url: `${GUARDRAILS}/mine`, headers: otherProject })).statusCode).toBe(404);
    const viewer = await createUserSession(t, 'viewer');
    expect((await call(t.app, viewer.session, { method: 'GET', url: GUARDRAILS })).statusCode).toBe(200);
    const denied = await createGuardrail(t, { key: 'viewer-made', type: 'pii' }, viewer.session);
    expect(denied.statusCode).toBe(403);
  });

  it('changes are audited without their configuration', async () => {
    await guardrail(t, { key: 'audited', type: 'custom_prompt', config: { rules: 'secret rule text' }, modelKey: chatModel });
    await flushAudit(t);
    const rows = await t.ctx.database.db.selectFrom('audit_events').selectAll().where('action', '=', 'guardrails.create').where('resource_id', '=', 'audited').execute();
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows[0])).not.toContain('secret rule text');
  });
});
