import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { TokenStore } from '../../src/areas/tokens/store.js';
import { randomBase32 } from '../../src/platform/ids.js';
import { call, createTestApp, type TestApp } from '../helpers/app.js';

describe('unknown token values', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => t.close());

  it('reach the database once, then are answered from memory', async () => {
    const lookups = vi.spyOn(TokenStore.prototype, 'findByHash');
    const value = `wgt_${randomBase32(43)}`;
    for (let i = 0; i < 5; i++) expect((await call(t.app, value, { method: 'GET', url: '/api/client/v1/token' })).statusCode).toBe(401);
    expect(lookups).toHaveBeenCalledTimes(1);
    lookups.mockRestore();
  });

  it('a value seen as unknown works as soon as a token with exactly that value is created', async () => {
    const value = `wgt_${randomBase32(43)}`;
    expect((await call(t.app, value, { method: 'GET', url: '/api/client/v1/token' })).statusCode).toBe(401);
    await t.ctx.services.tokens.create({ kind: 'system', tenantId: t.ctx.bootstrap.tenantId }, { name: 'chosen', projectId: t.ctx.bootstrap.projectId, role: 'viewer' }, value);
    expect((await call(t.app, value, { method: 'GET', url: '/api/client/v1/token' })).statusCode).toBe(200);
  });

  it('are answered from memory by checkHeld once looked up: a held token, a refused one, an unknown one', async () => {
    const { tokens } = t.ctx.services;
    const { value } = await tokens.create({ kind: 'system', tenantId: t.ctx.bootstrap.tenantId }, { name: 'held', projectId: t.ctx.bootstrap.projectId, role: 'viewer' });
    expect(tokens.checkHeld('not-a-token')).toEqual({ principal: null, refused: null });
    expect(tokens.checkHeld(value)).toBeUndefined();
    const checked = await tokens.check(value);
    expect(checked.principal).toMatchObject({ kind: 'api_token', tenantId: t.ctx.bootstrap.tenantId, projectId: t.ctx.bootstrap.projectId, role: 'viewer' });
    expect(tokens.checkHeld(value)).toEqual(checked);
    const unknown = `wgt_${randomBase32(43)}`;
    expect(tokens.checkHeld(unknown)).toBeUndefined();
    expect(await tokens.check(unknown)).toEqual({ principal: null, refused: null });
    expect(tokens.checkHeld(unknown)).toEqual({ principal: null, refused: null });
  });

  it.each([
    ['an error', new Error('database unreachable')],
    ['no error at all', undefined],
  ])('a look-up that fails with %s is answered with an error, never let through', async (_case, reason) => {
    const lookups = vi.spyOn(TokenStore.prototype, 'findByHash').mockImplementation(() => Promise.reject(reason));
    const res = await call(t.app, `wgt_${randomBase32(43)}`, { method: 'GET', url: '/api/client/v1/token' });
    lookups.mockRestore();
    expect(res.statusCode).toBe(500);
    expect(res.json().error).toBeTruthy();
  });
});
