import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { BACKENDS, call, createTestApp, createToken, createUserSession, type TestApp } from '../helpers/app.js';
import { chatBody } from '../helpers/models.js';

/** Models belong to one project of one tenant; and only sessions with write access change them. */

const newKey = () => `m-${randomBase32(8).toLowerCase()}`;
const mockModel = (key: string, reply: string) => ({ key, provider: { type: 'mock', mock: { reply } }, capabilities: ['chat', 'embeddings'] });

describe.each(BACKENDS)('model isolation on %s', (backend) => {
  let t: TestApp;
  let projectB: { id: string; key: string };
  let tokenA: string;
  let tokenB: string;
  let otherTenant: { session: string; token: string };
  const keyA = newKey();

  const dashboard = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, options: { project?: string; session?: string; payload?: Record<string, unknown> } = {}) =>
    call(t.app, options.session ?? t.adminSession, {
      method,
      url,
      payload: options.payload,
      headers: options.project ? { 'x-waygate-project': options.project } : {},
    });
  const keysIn = async (project?: string, session?: string) =>
    ((await dashboard('GET', '/api/models', { project, session })).json().models as { key: string }[]).map((m) => m.key);
  const clientKeys = async (token: string) =>
    ((await call(t.app, token, { method: 'GET', url: '/api/client/v1/models' })).json().data as { id: string }[]).map((m) => m.id);
  const chat = (token: string, model: string) => call(t.app, token, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody(model) });

  beforeAll(async () => {
    t = await createTestApp({ backend });
    const created = await dashboard('POST', '/api/projects', { payload: { name: 'Project B', key: `proj-b-${randomBase32(6).toLowerCase()}` } });
    if (created.statusCode !== 201) throw new Error(`project create failed: ${created.body}`);
    projectB = created.json().project;
    tokenA = (await createToken(t, { role: 'owner', projectId: 'default' })).value;
    tokenB = (await createToken(t, { role: 'owner', projectId: projectB.id })).value;
    const model = await dashboard('POST', '/api/models', { payload: mockModel(keyA, 'reply from A') });
    if (model.statusCode !== 201) throw new Error(`model create failed: ${model.body}`);

    const email = `owner-${randomBase32(6).toLowerCase()}@example.test`;
    const tenant = await dashboard('POST', '/api/tenants', { payload: { name: 'Other tenant', ownerEmail: email, ownerPassword: 'other-owner-pw' } });
    if (tenant.statusCode !== 201) throw new Error(`tenant create failed: ${tenant.body}`);
    const login = await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password: 'other-owner-pw' } });
    const session = login.json().token as string;
    otherTenant = { session, token: (await createToken(t, { role: 'owner', projectId: 'default' }, session)).value };
  });
  afterAll(async () => t?.close());

  it('positive control: project A sees and calls its model', async () => {
    expect(await keysIn()).toContain(keyA);
    expect(await keysIn(t.ctx.bootstrap.projectId)).toContain(keyA);
    expect(await clientKeys(tokenA)).toContain(keyA);
    const res = await chat(tokenA, keyA);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().choices[0].message.content).toBe('reply from A');
  });

  it("project B does not list A's model and its token gets 404 calling it", async () => {
    for (const project of [projectB.id, projectB.key]) {
      const keys = await keysIn(project);
      expect(keys).toEqual(['local-chat', 'local-embed']);
    }
    expect(await clientKeys(tokenB)).toEqual(['local-chat', 'local-embed']);
    const res = await chat(tokenB, keyA);
    expect(res.statusCode).toBe(404);
    expect(res.json().error.type).toBe('not_found_error');
    const embed = await call(t.app, tokenB, { method: 'POST', url: '/api/client/v1/embeddings', payload: { model: keyA, input: 'x' } });
    expect(embed.statusCode).toBe(404);
  });

  it("PATCH and DELETE of A's model with X-Waygate-Project B are 404 and change nothing", async () => {
    const patched = await dashboard('PATCH', `/api/models/${keyA}`, { project: projectB.key, payload: { name: 'hijacked', provider: { mock: { reply: 'hijacked' } } } });
    expect(patched.statusCode).toBe(404);
    const deleted = await dashboard('DELETE', `/api/models/${keyA}`, { project: projectB.id });
    expect(deleted.statusCode).toBe(404);
    const view = (await dashboard('GET', '/api/models')).json().models.find((m: { key: string }) => m.key === keyA);
    expect(view.name).toBe(keyA);
    expect((await chat(tokenA, keyA)).json().choices[0].message.content).toBe('reply from A');
  });

  it('the same key in project B is a separate model', async () => {
    const created = await dashboard('POST', '/api/models', { project: projectB.key, payload: mockModel(keyA, 'reply from B') });
    expect(created.statusCode, created.body).toBe(201);
    expect((await chat(tokenB, keyA)).json().choices[0].message.content).toBe('reply from B');
    expect((await chat(tokenA, keyA)).json().choices[0].message.content).toBe('reply from A');
    // Deleting B's copy leaves A's.
    expect((await dashboard('DELETE', `/api/models/${keyA}`, { project: projectB.key })).statusCode).toBe(200);
    expect((await chat(tokenB, keyA)).statusCode).toBe(404);
    expect((await chat(tokenA, keyA)).statusCode).toBe(200);
  });

  it("a model of B cannot name A's model as a fallback", async () => {
    const res = await dashboard('POST', '/api/models', { project: projectB.key, payload: { ...mockModel(newKey(), 'b'), fallbacks: [keyA] } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toContain(keyA);
  });

  it("another tenant sees none of A's models and cannot reach them by key or project", async () => {
    expect(await keysIn(undefined, otherTenant.session)).toEqual(['local-chat', 'local-embed']);
    expect(await keysIn('default', otherTenant.session)).toEqual(['local-chat', 'local-embed']);
    expect(await clientKeys(otherTenant.token)).toEqual(['local-chat', 'local-embed']);
    // Naming tenant A's projects is answered as a missing project.
    for (const project of [t.ctx.bootstrap.projectId, projectB.id]) {
      expect((await dashboard('GET', '/api/models', { project, session: otherTenant.session })).statusCode).toBe(404);
      expect((await dashboard('DELETE', `/api/models/${keyA}`, { project, session: otherTenant.session })).statusCode).toBe(404);
    }
    expect((await dashboard('PATCH', `/api/models/${keyA}`, { session: otherTenant.session, payload: { name: 'x' } })).statusCode).toBe(404);
    expect((await dashboard('DELETE', `/api/models/${keyA}`, { session: otherTenant.session })).statusCode).toBe(404);
    expect((await chat(otherTenant.token, keyA)).statusCode).toBe(404);
    expect((await chat(tokenA, keyA)).statusCode).toBe(200);
  });

  it("A's admin does not see the other tenant's models", async () => {
    const theirs = newKey();
    expect((await dashboard('POST', '/api/models', { session: otherTenant.session, payload: mockModel(theirs, 'theirs') })).statusCode).toBe(201);
    expect((await chat(otherTenant.token, theirs)).statusCode).toBe(200);
    expect(await keysIn()).not.toContain(theirs);
    expect(await keysIn(projectB.id)).not.toContain(theirs);
    expect((await chat(tokenA, theirs)).statusCode).toBe(404);
  });
});

describe.each(BACKENDS)('model RBAC on %s', (backend) => {
  let t: TestApp;
  let viewer: string;
  let member: string;
  const existing = newKey();
  beforeAll(async () => {
    t = await createTestApp({ backend });
    viewer = (await createUserSession(t, 'viewer')).session;
    member = (await createUserSession(t, 'member')).session;
    const created = await call(t.app, t.adminSession, { method: 'POST', url: '/api/models', payload: mockModel(existing, 'original') });
    if (created.statusCode !== 201) throw new Error(created.body);
  });
  afterAll(async () => t?.close());

  const listKeys = async () => ((await call(t.app, t.adminSession, { method: 'GET', url: '/api/models' })).json().models as { key: string; name: string }[]);

  it('a viewer session may list models but not create, change or delete them (403)', async () => {
    const list = await call(t.app, viewer, { method: 'GET', url: '/api/models' });
    expect(list.statusCode).toBe(200);
    expect(list.json().models.map((m: { key: string }) => m.key)).toContain(existing);

    const key = newKey();
    const created = await call(t.app, viewer, { method: 'POST', url: '/api/models', payload: mockModel(key, 'x') });
    const patched = await call(t.app, viewer, { method: 'PATCH', url: `/api/models/${existing}`, payload: { name: 'by viewer' } });
    const deleted = await call(t.app, viewer, { method: 'DELETE', url: `/api/models/${existing}` });
    for (const res of [created, patched, deleted]) {
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json().error.type).toBe('permission_error');
    }
    const models = await listKeys();
    expect(models.map((m) => m.key)).not.toContain(key);
    expect(models.find((m) => m.key === existing)?.name).toBe(existing);
  });

  it('a member session may create, change and delete models (the viewer 403s are about the role)', async () => {
    const key = newKey();
    expect((await call(t.app, member, { method: 'POST', url: '/api/models', payload: mockModel(key, 'x') })).statusCode).toBe(201);
    expect((await call(t.app, member, { method: 'PATCH', url: `/api/models/${key}`, payload: { name: 'by member' } })).statusCode).toBe(200);
    expect((await call(t.app, member, { method: 'DELETE', url: `/api/models/${key}` })).statusCode).toBe(200);
  });

  it('an API token, even an owner one, cannot use /api/models (401: it is not a session)', async () => {
    const requests = [
      { method: 'GET' as const, url: '/api/models' },
      { method: 'POST' as const, url: '/api/models', payload: mockModel(newKey(), 'x') },
      { method: 'PATCH' as const, url: `/api/models/${existing}`, payload: { name: 'by token' } },
      { method: 'DELETE' as const, url: `/api/models/${existing}` },
    ];
    for (const request of requests) {
      const res = await call(t.app, t.ownerToken, request);
      expect(res.statusCode, `${request.method} ${res.body}`).toBe(401);
      expect(res.json().error.type).toBe('authentication_error');
    }
    expect((await listKeys()).find((m) => m.key === existing)?.name).toBe(existing);
    // Without any credential, also 401.
    expect((await t.app.inject({ method: 'GET', url: '/api/models' })).statusCode).toBe(401);
  });
});
