import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { BACKENDS, call, createTestApp, type TestApp } from '../helpers/app.js';
import { expectClientError, otherTenant } from '../helpers/bad-input.js';
import { EVALUATE, GUARDRAILS, createGuardrail, evaluate, guardrail } from '../guardrails/support.js';

describe.each(BACKENDS)('guardrails: bad input on %s', (backend) => {
  let t: TestApp;
  const patch = (key: string, payload: unknown, session = t.adminSession, headers: Record<string, string> = {}) =>
    call(t.app, session, { method: 'PATCH', url: `${GUARDRAILS}/${key}`, payload: payload as Record<string, unknown>, headers });

  beforeAll(async () => {
    t = await createTestApp({ backend, noWorkers: true });
    await guardrail(t, { key: 'mine', type: 'pii', config: { categories: ['email'] } });
    expect((await evaluate(t, { guardrail_key: 'mine', text: 'write to jane.doe@example.com' })).statusCode).toBe(200);
  });
  afterAll(async () => t?.close());

  it.each([
    ['no key', { type: 'pii' }, /key is required/],
    ['no type', { key: 'no-type' }, /type is required/],
    ['a key that is not a string', { key: 5, type: 'pii' }, /key/],
    ['a type that is not a string', { key: 'b1', type: ['pii'] }, /type/],
    ['a name that is not a string', { key: 'b2', type: 'pii', name: 5 }, /name/],
    ['enabled that is not a boolean', { key: 'b3', type: 'pii', enabled: 'yes' }, /enabled/],
    ['config that is not an object', { key: 'b4', type: 'pii', config: 'email' }, /config/],
    ['config that is an array', { key: 'b5', type: 'pii', config: ['email'] }, /config/],
    ['PII categories that are not an array', { key: 'b6', type: 'pii', config: { categories: 'email' } }, /config\.categories/],
    ['a threshold that is not a number', { key: 'b7', type: 'moderation', config: { threshold: 'high' } }, /config\.threshold/],
    ['a modelKey that is not a string', { key: 'b8', type: 'custom_prompt', config: { rules: 'x' }, modelKey: 5 }, /modelKey/],
    ['a modelKey on an offline guardrail', { key: 'b9', type: 'pii', modelKey: 'local-chat' }, /modelKey is not used/],
    ['an unknown target', { key: 'b10', type: 'pii', target: 'everywhere' }, /target/],
    ['an unknown failMode', { key: 'b11', type: 'pii', failMode: 'sometimes' }, /failMode/],
    ['a key over 100 characters', { key: 'k'.repeat(101), type: 'pii' }, /key/],
    ['an unknown field', { key: 'b12', type: 'pii', rules: 'x' }, /rules is not a known field/],
  ])('POST /api/guardrails: 400 for %s, and nothing is stored', async (_case, payload, message) => {
    expectClientError(await createGuardrail(t, payload), 400, message);
    const keys = (await call(t.app, t.adminSession, { method: 'GET', url: GUARDRAILS })).json().guardrails.map((g: { key: string }) => g.key);
    expect(keys).toEqual(['mine']);
  });

  it('the longest key the schema allows (100 characters) is reachable on every guardrail route', async () => {
    const long = `k${'0'.repeat(99)}`;
    await guardrail(t, { key: long, type: 'pii' });
    expect((await patch(long, { name: 'Long' })).statusCode).toBe(200);
    expect((await evaluate(t, { guardrail_key: long, text: 'x' })).statusCode).toBe(200);
    expect((await call(t.app, t.adminSession, { method: 'GET', url: `${GUARDRAILS}/${long}/evaluations` })).statusCode).toBe(200);
    expect((await call(t.app, t.adminSession, { method: 'DELETE', url: `${GUARDRAILS}/${long}` })).statusCode).toBe(200);
  });

  it('POST /api/guardrails: 400 for a body that is not a JSON object', async () => {
    for (const payload of ['[]', '"pii"', '{"key":']) {
      expectClientError(await call(t.app, t.adminSession, { method: 'POST', url: GUARDRAILS, payload, headers: { 'content-type': 'application/json' } }), 400);
    }
  });

  it.each([
    ['enabled that is not a boolean', { enabled: 'no' }, /enabled/],
    ['an action that is not a string', { action: 5 }, /action/],
    ['config that is an array', { config: [] }, /config/],
    ['an unknown PII category', { config: { categories: ['dna'] } }, /config\.categories/],
    ['a modelKey on an offline guardrail', { modelKey: 'local-chat' }, /modelKey is not used/],
    ['a key (it cannot change)', { key: 'renamed' }, /key is not a known field/],
  ])('PATCH /api/guardrails/{key}: 400 for %s, and nothing changes', async (_case, payload, message) => {
    expectClientError(await patch('mine', payload), 400, message);
    const mine = (await call(t.app, t.adminSession, { method: 'GET', url: GUARDRAILS })).json().guardrails[0];
    expect(mine).toMatchObject({ key: 'mine', type: 'pii', action: 'block', enabled: true, modelKey: null, config: { categories: ['email'] } });
  });

  it('GET /api/guardrails/{key}/evaluations: 404 for an unknown key; 400 for a bad limit or an unknown parameter', async () => {
    expectClientError(await call(t.app, t.adminSession, { method: 'GET', url: `${GUARDRAILS}/nope/evaluations` }), 404, /Guardrail "nope" not found/);
    for (const query of ['?limit=ten', '?limit=1.5', '?since=yesterday']) {
      expectClientError(await call(t.app, t.adminSession, { method: 'GET', url: `${GUARDRAILS}/mine/evaluations${query}` }), 400, /limit|since/);
    }
  });

  it.each([
    ['a guardrail_key that is not a string', { guardrail_key: 5, text: 'x' }, /guardrail_key/],
    ['an empty guardrail_key', { guardrail_key: '', text: 'x' }, /guardrail_key/],
    ['a text that is an array', { guardrail_key: 'mine', text: ['x'] }, /text/],
    ['a text that is null', { guardrail_key: 'mine', text: null }, /text/],
    ['an unknown field', { guardrail_key: 'mine', text: 'x', action: 'flag' }, /action is not a known field/],
  ])('POST /guardrails/evaluate: 400 for %s', async (_case, payload, message) => {
    expectClientError(await evaluate(t, payload), 400, message);
  });

  it('POST /guardrails/evaluate: 400 for a body that is not a JSON object', async () => {
    for (const payload of ['[]', '"mine"', '{"guardrail_key":']) {
      expectClientError(await call(t.app, t.ownerToken, { method: 'POST', url: EVALUATE, payload, headers: { 'content-type': 'application/json' } }), 400);
    }
  });

  it("another project's guardrail is a 404 on evaluations (the other routes are in test/guardrails)", async () => {
    const other = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: `Other ${randomBase32(4)}` } });
    const headers = { 'x-waygate-project': other.json().project.id as string };
    expectClientError(await call(t.app, t.adminSession, { method: 'GET', url: `${GUARDRAILS}/mine/evaluations`, headers }), 404, /Guardrail "mine" not found/);
  });

  it("another tenant's guardrail is a 404 like a missing one on every guardrail route, and stays unchanged", async () => {
    const b = await otherTenant(t);
    for (const target of ['mine', 'missing']) {
      for (const options of [
        { method: 'PATCH' as const, url: `${GUARDRAILS}/${target}`, payload: { enabled: false } },
        { method: 'GET' as const, url: `${GUARDRAILS}/${target}/evaluations` },
        { method: 'DELETE' as const, url: `${GUARDRAILS}/${target}` },
      ]) {
        const res = await call(t.app, b.session, options);
        expectClientError(res, 404);
        expect(res.json().error, `${options.method} ${options.url}`).toEqual({ message: `Guardrail "${target}" not found`, type: 'not_found_error', code: 'not_found' });
      }
      const res = await evaluate(t, { guardrail_key: target, text: 'jane.doe@example.com' }, b.token);
      expectClientError(res, 404);
      expect(res.json().error.message).toBe(`Guardrail "${target}" not found`);
    }
    expect((await call(t.app, b.session, { method: 'GET', url: GUARDRAILS })).json().guardrails).toEqual([]);
    const mine = (await call(t.app, t.adminSession, { method: 'GET', url: GUARDRAILS })).json().guardrails[0];
    expect(mine).toMatchObject({ key: 'mine', enabled: true });
    // Its evaluations were not shown to the other tenant, and are still the owner's.
    expect((await call(t.app, t.adminSession, { method: 'GET', url: `${GUARDRAILS}/mine/evaluations` })).json().stats.evaluations).toBe(1);
  });

  it("naming another tenant's project in X-Waygate-Project is refused with a 4xx {error}, never the guardrail", async () => {
    const b = await otherTenant(t);
    const headers = { 'x-waygate-project': t.ctx.bootstrap.projectId };
    for (const options of [
      { method: 'GET' as const, url: GUARDRAILS, headers },
      { method: 'GET' as const, url: `${GUARDRAILS}/mine/evaluations`, headers },
      { method: 'PATCH' as const, url: `${GUARDRAILS}/mine`, headers, payload: { enabled: false } },
    ]) {
      const res = await call(t.app, b.session, options);
      expect(res.statusCode, `${options.method} ${options.url}: ${res.body}`).toBe(404);
      expect(Object.keys(res.json())).toEqual(['error']);
    }
    expect((await call(t.app, t.adminSession, { method: 'GET', url: GUARDRAILS })).json().guardrails[0]).toMatchObject({ key: 'mine', enabled: true });
  });
});
