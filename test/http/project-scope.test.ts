import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerErrorHandling } from '../../src/http/error-handler.js';
import { requireApiToken } from '../../src/http/guards.js';
import { BACKENDS, call, createTestApp, createToken, type TestApp } from '../helpers/app.js';

/** A throwaway app whose one guarded scope holds the routes `define` registers. */
async function guardedApp(t: TestApp, define: (scope: FastifyInstance) => void): Promise<FastifyInstance> {
  const app = Fastify();
  app.decorateRequest('principal', null);
  registerErrorHandling(app, 1024 * 1024);
  try {
    await app.register(async (scope) => {
      requireApiToken(scope, t.ctx.services.tokens);
      define(scope);
    });
    await app.ready();
  } catch (err) {
    await app.close().catch(() => undefined);
    throw err;
  }
  return app;
}

describe.each(BACKENDS)('project-less tokens on %s', (backend) => {
  let t: TestApp;
  let projectLess: { id: string; value: string };
  beforeAll(async () => {
    t = await createTestApp({ backend });
    projectLess = await createToken(t, { role: 'owner', projectId: null });
  });
  afterAll(async () => t.close());

  it('is created with projectId null and listed so', async () => {
    const list = await call(t.app, t.adminSession, { method: 'GET', url: '/api/tokens' });
    const row = list.json().tokens.find((tok: { id: string }) => tok.id === projectLess.id);
    expect(row).toMatchObject({ projectId: null, role: 'owner' });
    const stored = await t.ctx.database.db.selectFrom('api_tokens').select('project_id').where('id', '=', projectLess.id).executeTakeFirstOrThrow();
    expect(stored.project_id).toBeNull();
  });

  it('works on GET /api/client/v1/token (not project-scoped) and shows projectId null', async () => {
    const res = await call(t.app, projectLess.value, { method: 'GET', url: '/api/client/v1/token' });
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ id: projectLess.id, projectId: null, tenantId: t.ctx.bootstrap.tenantId });
  });

  it('works on the tenant-wide audit log', async () => {
    const res = await call(t.app, projectLess.value, { method: 'GET', url: '/api/client/v1/audit/logs' });
    expect(res.statusCode).toBe(200);
    expect(res.json().object).toBe('list');
  });

  describe('the requireApiToken guard on a project-scoped route', () => {
    let guarded: FastifyInstance;
    beforeAll(async () => {
      guarded = await guardedApp(t, (scope) => {
        scope.get('/scoped', { schema: { operationId: 'tokens.self' } }, async () => ({ ok: true }));
        scope.get('/unscoped', { schema: { operationId: 'tokens.self' }, config: { projectScoped: false } }, async () => ({ ok: true }));
        scope.get('/admin-only', { schema: { operationId: 'audit.list' } }, async () => ({ ok: true }));
      });
    });
    afterAll(async () => guarded.close());

    it('answers 400 project_required to a project-less token', async () => {
      const res = await call(guarded, projectLess.value, { method: 'GET', url: '/scoped' });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({ type: 'invalid_request_error', code: 'project_required' });
    });

    it('answers 200 to a project token', async () => {
      const res = await call(guarded, t.ownerToken, { method: 'GET', url: '/scoped' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ ok: true });
    });

    it('lets a project-less token through when the route says projectScoped: false', async () => {
      expect((await call(guarded, projectLess.value, { method: 'GET', url: '/unscoped' })).statusCode).toBe(200);
    });

    it('checks 401 before 403 before 400', async () => {
      expect((await call(guarded, null, { method: 'GET', url: '/scoped' })).statusCode).toBe(401);
      expect((await call(guarded, 'wgt_unknownunknownunknown', { method: 'GET', url: '/admin-only' })).statusCode).toBe(401);
      const viewerProjectLess = await createToken(t, { role: 'viewer', projectId: null });
      const denied = await call(guarded, viewerProjectLess.value, { method: 'GET', url: '/admin-only' });
      expect(denied.statusCode).toBe(403);
      expect(denied.json().error.code).toBe('insufficient_permission');
      expect((await call(guarded, projectLess.value, { method: 'GET', url: '/admin-only' })).json().error.code).toBe('project_required');
    });
  });

  it('a route without an operationId in a guarded scope fails at start-up', async () => {
    await expect(guardedApp(t, (scope) => {
      scope.get('/anonymous', async () => ({ ok: true }));
    })).rejects.toThrow(/operationId/);
  });

  it('a route whose operationId is not in the RBAC table fails at start-up', async () => {
    await expect(guardedApp(t, (scope) => {
      scope.get('/unlisted', { schema: { operationId: 'nothing.here' } }, async () => ({ ok: true }));
    })).rejects.toThrow(/ROUTE_PERMISSIONS/);
  });
});
