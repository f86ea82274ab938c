import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { BACKENDS, call, createTestApp, createToken, createUserSession, type TestApp } from '../helpers/app.js';
import { chatBody } from '../helpers/models.js';
import { holdTogether } from '../helpers/races.js';

/** PATCH /api/projects/:idOrKey: name, budget and rate limit of a project (owners and admins of its tenant only). */

interface ProjectView {
  id: string;
  key: string;
  name: string;
  budget: Record<string, unknown> | null;
  rateLimit: Record<string, unknown> | null;
}

describe.each(BACKENDS)('project limits on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend });
  });
  afterAll(async () => t?.close());

  const patch = (idOrKey: string, payload: Record<string, unknown>, session = t.adminSession) =>
    call(t.app, session, { method: 'PATCH', url: `/api/projects/${idOrKey}`, payload });
  const projects = async (session = t.adminSession) => (await call(t.app, session, { method: 'GET', url: '/api/projects' })).json().projects as ProjectView[];
  const listed = async (id: string) => (await projects()).find((p) => p.id === id)!;
  async function newProject(): Promise<ProjectView> {
    const res = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: `P ${randomBase32(6)}` } });
    if (res.statusCode !== 201) throw new Error(res.body);
    return res.json().project;
  }

  it('a new project has no budget and no rate limit', async () => {
    const project = await newProject();
    expect(project).toMatchObject({ budget: null, rateLimit: null });
    expect(await listed(project.id)).toMatchObject({ budget: null, rateLimit: null });
  });

  it('sets name, budget and rate limit by id or by key, and GET /api/projects shows them', async () => {
    const project = await newProject();
    const byId = await patch(project.id, { name: 'Renamed', budget: { maxTokens: 1000, period: 'day' }, rateLimit: { rpm: 60 } });
    expect(byId.statusCode, byId.body).toBe(200);
    expect(byId.json().project).toEqual({ ...project, name: 'Renamed', budget: { maxTokens: 1000, period: 'day' }, rateLimit: { rpm: 60 } });
    expect(await listed(project.id)).toEqual(byId.json().project);

    const byKey = await patch(project.key, { budget: { maxCostUsd: 12.5, period: 'month' }, rateLimit: { tpm: 5000 } });
    expect(byKey.statusCode, byKey.body).toBe(200);
    expect(byKey.json().project).toMatchObject({ id: project.id, name: 'Renamed', budget: { maxCostUsd: 12.5, period: 'month' }, rateLimit: { tpm: 5000 } });
    expect(await listed(project.id)).toMatchObject({ budget: { maxCostUsd: 12.5, period: 'month' }, rateLimit: { tpm: 5000 } });

    const both = await patch(project.id, { budget: { maxTokens: 10, maxCostUsd: 0.01, period: 'total' }, rateLimit: { rpm: 1, tpm: 2 } });
    expect(both.json().project).toMatchObject({ budget: { maxTokens: 10, maxCostUsd: 0.01, period: 'total' }, rateLimit: { rpm: 1, tpm: 2 } });
    expect(await listed(project.id)).toMatchObject({ budget: { maxTokens: 10, maxCostUsd: 0.01, period: 'total' }, rateLimit: { rpm: 1, tpm: 2 } });
  });

  it('omitted fields are kept; null removes the budget or the rate limit', async () => {
    const project = await newProject();
    await patch(project.id, { budget: { maxTokens: 500, period: 'month' }, rateLimit: { rpm: 10 } });
    expect((await patch(project.id, { name: 'Only the name' })).json().project).toMatchObject({ budget: { maxTokens: 500, period: 'month' }, rateLimit: { rpm: 10 } });

    const noBudget = await patch(project.id, { budget: null });
    expect(noBudget.statusCode).toBe(200);
    expect(noBudget.json().project).toMatchObject({ name: 'Only the name', budget: null, rateLimit: { rpm: 10 } });
    const noRate = await patch(project.id, { rateLimit: null });
    expect(noRate.json().project).toMatchObject({ budget: null, rateLimit: null });
    expect(await listed(project.id)).toMatchObject({ name: 'Only the name', budget: null, rateLimit: null });
  });

  it('invalid limits are 400 with {error:{message}} and change nothing', async () => {
    const project = await newProject();
    await patch(project.id, { budget: { maxTokens: 7, period: 'day' }, rateLimit: { rpm: 7 } });
    const cases: [string, Record<string, unknown>][] = [
      ['budget without maxTokens or maxCostUsd', { budget: { period: 'day' } }],
      ['empty rateLimit', { rateLimit: {} }],
      ['budget without period', { budget: { maxTokens: 5 } }],
      ['unknown period', { budget: { maxTokens: 5, period: 'week' } }],
      ['zero maxTokens', { budget: { maxTokens: 0, period: 'day' } }],
      ['fractional maxTokens', { budget: { maxTokens: 1.5, period: 'day' } }],
      ['zero maxCostUsd', { budget: { maxCostUsd: 0, period: 'day' } }],
      ['negative rpm', { rateLimit: { rpm: -1 } }],
      ['zero tpm', { rateLimit: { tpm: 0 } }],
      ['unknown budget field', { budget: { maxTokens: 5, period: 'day', maxRequests: 3 } }],
      ['unknown rateLimit field', { rateLimit: { rpm: 5, rps: 1 } }],
      ['unknown top-level field', { key: 'renamed' }],
      ['empty name', { name: '' }],
      ['budget as a number', { budget: 5 }],
    ];
    for (const [what, payload] of cases) {
      const res = await patch(project.id, payload);
      expect(res.statusCode, `${what}: ${res.body}`).toBe(400);
      expect(typeof res.json().error.message, what).toBe('string');
    }
    expect(await listed(project.id)).toMatchObject({ name: project.name, budget: { maxTokens: 7, period: 'day' }, rateLimit: { rpm: 7 } });
  });

  it('members and viewers get 403; admins may', async () => {
    const project = await newProject();
    for (const role of ['member', 'viewer']) {
      const { session } = await createUserSession(t, role);
      const res = await patch(project.id, { name: `by ${role}`, budget: { maxTokens: 1, period: 'day' } }, session);
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json().error.type).toBe('permission_error');
      // They may still read the projects.
      expect((await projects(session)).map((p) => p.id)).toContain(project.id);
    }
    expect(await listed(project.id)).toMatchObject({ name: project.name, budget: null });
    const admin = await createUserSession(t, 'admin');
    expect((await patch(project.id, { rateLimit: { rpm: 100 } }, admin.session)).statusCode).toBe(200);
  });

  it("another tenant's project is 404, like an unknown one, and stays unchanged", async () => {
    const project = await newProject();
    const email = `owner-${randomBase32(6).toLowerCase()}@example.test`;
    const tenant = await call(t.app, t.adminSession, { method: 'POST', url: '/api/tenants', payload: { name: 'Other', ownerEmail: email, ownerPassword: 'other-owner-pw' } });
    expect(tenant.statusCode).toBe(201);
    const other = (await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password: 'other-owner-pw' } })).json().token as string;

    for (const idOrKey of [project.id, t.ctx.bootstrap.projectId]) {
      const res = await patch(idOrKey, { budget: { maxTokens: 1, period: 'total' } }, other);
      expect(res.statusCode, res.body).toBe(404);
      expect(res.json().error.type).toBe('not_found_error');
    }
    expect((await patch(`prj_${randomBase32(20)}`, { name: 'x' })).statusCode).toBe(404);
    // Their key `default` is their own project.
    const own = await patch('default', { rateLimit: { rpm: 5 } }, other);
    expect(own.statusCode).toBe(200);
    expect(own.json().project.id).toBe(tenant.json().project.id);
    expect(await listed(project.id)).toMatchObject({ budget: null, rateLimit: null });
    expect(await listed(t.ctx.bootstrap.projectId)).toMatchObject({ budget: null, rateLimit: null });
    // And tenant A's list does not show theirs.
    expect((await projects()).map((p) => p.id)).not.toContain(tenant.json().project.id);
  });

  it('an API token cannot patch a project (401: it is not a session)', async () => {
    const res = await call(t.app, t.ownerToken, { method: 'PATCH', url: '/api/projects/default', payload: { budget: { maxTokens: 1, period: 'day' } } });
    expect(res.statusCode).toBe(401);
    expect(await listed(t.ctx.bootstrap.projectId)).toMatchObject({ budget: null });
  });

  it("the project's rate limit applies to its tokens at once, and null lifts it", async () => {
    const project = await newProject();
    const token = (await createToken(t, { projectId: project.id, role: 'member' })).value;
    const chat = () => call(t.app, token, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody('local-chat') });
    expect((await chat()).statusCode).toBe(200); // the project is now cached without limits
    expect((await patch(project.id, { rateLimit: { rpm: 1 } })).statusCode).toBe(200);
    // Three calls: even if a rate window turns over between two of them, two share a window.
    const statuses = [(await chat()).statusCode, (await chat()).statusCode, (await chat()).statusCode];
    expect(statuses).toContain(429);
    expect((await patch(project.id, { rateLimit: null })).statusCode).toBe(200);
    expect((await chat()).statusCode).toBe(200);
  });

  it("the project's budget applies to its tokens at once, and null lifts it", async () => {
    const project = await newProject();
    const token = (await createToken(t, { projectId: project.id, role: 'member' })).value;
    const chat = () => call(t.app, token, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody('local-chat') });
    expect((await chat()).statusCode).toBe(200);
    expect((await patch(project.id, { budget: { maxTokens: 1, period: 'total' } })).statusCode).toBe(200);
    const refused = await chat();
    expect(refused.statusCode, refused.body).toBe(429);
    expect(refused.json().error.code).toBe('budget_exceeded');
    expect((await patch(project.id, { budget: null })).statusCode).toBe(200);
    expect((await chat()).statusCode).toBe(200);
  });
  // Regression (found in review): both PATCHes read the budget before either wrote; the one setting it again decided
  // on the stale read that the budget had been there all along, so its counters were not restarted and the calls
  // made while it was removed went uncounted. The decision is now made on the row read inside the update's
  // transaction, so this holds both PATCHes just before their transactions until both have arrived (every read
  // outside the transaction done), then lets the removal write first and the new budget 50 ms later.
  it('a budget set again while another PATCH removes it restarts the counters, however the two interleave', async () => {
    const project = await newProject();
    expect((await patch(project.id, { budget: { maxTokens: 100, period: 'day' } })).statusCode).toBe(200);
    const version = async () =>
      Number((await t.ctx.database.db.selectFrom('projects').select('limits_updated_at').where('id', '=', project.id).executeTakeFirstOrThrow()).limits_updated_at);
    const before = await version();
    await new Promise((resolve) => setTimeout(resolve, 5));
    let reachedStore!: () => void;
    const removalReachedStore = new Promise<void>((resolve) => (reachedStore = resolve));
    const restore = holdTogether((t.ctx.services.projects as unknown as { store: object }).store, 'update', 2, 50, {
      before: true,
      onArrive: (index) => index === 0 && reachedStore(),
    });
    try {
      const removing = patch(project.id, { budget: null });
      // Sent alone until it has reached the store, so that the removal is the first to write.
      await Promise.race([
        removalReachedStore,
        removing.then((res) => {
          throw new Error(`the removal answered ${res.statusCode} before it reached the store: ${res.body}`);
        }),
      ]);
      const setting = patch(project.id, { budget: { maxTokens: 100, period: 'day' } });
      expect((await removing).statusCode).toBe(200);
      expect((await setting).statusCode).toBe(200);
    } finally {
      restore();
    }
    expect(await listed(project.id)).toMatchObject({ budget: { maxTokens: 100, period: 'day' } });
    expect(await version()).toBeGreaterThan(before);
  });
});
