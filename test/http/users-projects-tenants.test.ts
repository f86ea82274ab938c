import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { ADMIN_EMAIL, BACKENDS, call, createTestApp, type TestApp } from '../helpers/app.js';
import { holdNext, holdTogether } from '../helpers/races.js';

const email = (prefix: string) => `${prefix}-${randomBase32(8)}@example.test`;

async function count(t: TestApp, table: 'tenants' | 'projects' | 'users'): Promise<number> {
  const row = await t.ctx.database.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

describe.each(BACKENDS)('users, projects and tenants on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend });
  });
  afterAll(async () => t.close());

  describe('users', () => {
    it('creates a user with a role and lists it; the user can log in', async () => {
      const address = email('new');
      const res = await call(t.app, t.adminSession, { method: 'POST', url: '/api/users', payload: { email: address.toUpperCase(), password: 'new-user-password', role: 'member', name: 'New User' } });
      expect(res.statusCode, res.body).toBe(201);
      const user = res.json().user;
      expect(user).toMatchObject({ email: address, role: 'member', name: 'New User', isInstanceAdmin: false });
      expect(user.id).toMatch(/^usr_/);
      expect(res.body).not.toContain('new-user-password');
      expect(Object.keys(user).sort()).toEqual(['createdAt', 'email', 'id', 'isInstanceAdmin', 'name', 'role']);

      const list = await call(t.app, t.adminSession, { method: 'GET', url: '/api/users' });
      expect(list.statusCode).toBe(200);
      const emails = list.json().users.map((u: { email: string }) => u.email);
      expect(emails).toContain(address);
      expect(emails).toContain(ADMIN_EMAIL);
      expect(list.body).not.toContain('scrypt');

      const login = await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email: address, password: 'new-user-password' } });
      expect(login.statusCode).toBe(200);
      expect(login.json().user.role).toBe('member');
    });

    it('the stored password is an scrypt hash, not the password', async () => {
      const address = email('hash');
      await call(t.app, t.adminSession, { method: 'POST', url: '/api/users', payload: { email: address, password: 'hash-me-please', role: 'viewer' } });
      const row = await t.ctx.database.db.selectFrom('users').select('password_hash').where('email', '=', address).executeTakeFirstOrThrow();
      expect(row.password_hash).toMatch(/^scrypt\$/);
      expect(row.password_hash).not.toContain('hash-me-please');
    });

    it('a duplicate email is 409, in any case, and adds no row', async () => {
      const address = email('dup');
      const first = await call(t.app, t.adminSession, { method: 'POST', url: '/api/users', payload: { email: address, password: 'password-123', role: 'viewer' } });
      expect(first.statusCode).toBe(201);
      const before = await count(t, 'users');
      for (const variant of [address, address.toUpperCase(), ADMIN_EMAIL]) {
        const dup = await call(t.app, t.adminSession, { method: 'POST', url: '/api/users', payload: { email: variant, password: 'password-456', role: 'viewer' } });
        expect(dup.statusCode, dup.body).toBe(409);
        expect(dup.json().error).toMatchObject({ type: 'conflict_error', code: 'conflict' });
      }
      expect(await count(t, 'users')).toBe(before);
    });

    // Regression: "é" as one code point and as "e" plus a combining accent made two users of one address, and
    // lower-casing "İ" (two code points) stored an email longer than the schema's 254 characters.
    it('an email is one address in any Unicode normal form, and its length counts once lower-cased', async () => {
      const local = `jos${randomBase32(6)}`;
      const composed = `${local}\u00e9@example.test`;
      const created = await call(t.app, t.adminSession, { method: 'POST', url: '/api/users', payload: { email: composed, password: 'password-123', role: 'viewer' } });
      expect(created.statusCode, created.body).toBe(201);
      const decomposed = `${local}e\u0301@example.test`;
      const dup = await call(t.app, t.adminSession, { method: 'POST', url: '/api/users', payload: { email: decomposed, password: 'password-456', role: 'viewer' } });
      expect(dup.statusCode, dup.body).toBe(409);
      const login = await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email: decomposed, password: 'password-123' } });
      expect(login.statusCode, login.body).toBe(200);
      const long = `${'\u0130'.repeat(200)}@example.test`;
      const refused = await call(t.app, t.adminSession, { method: 'POST', url: '/api/users', payload: { email: long, password: 'password-123', role: 'viewer' } });
      expect(refused.statusCode, refused.body).toBe(400);
      expect(refused.json().error.message).toContain('email');
    });

    it('three concurrent creates with the same email give one 201 and two 409s, never a 5xx', async () => {
      const address = email('race');
      const payload = { email: address, password: 'password-123', role: 'viewer' };
      const results = await Promise.all([0, 1, 2].map(() => call(t.app, t.adminSession, { method: 'POST', url: '/api/users', payload })));
      expect(results.map((r) => r.statusCode).sort()).toEqual([201, 409, 409]);
    });

    it('a short password or a bad email is 400', async () => {
      const short = await call(t.app, t.adminSession, { method: 'POST', url: '/api/users', payload: { email: email('short'), password: 'short', role: 'viewer' } });
      expect(short.statusCode).toBe(400);
      expect(short.json().error.message).toContain('password');
      const bad = await call(t.app, t.adminSession, { method: 'POST', url: '/api/users', payload: { email: 'not-an-email', password: 'password-123', role: 'viewer' } });
      expect(bad.statusCode).toBe(400);
      expect(bad.json().error.message).toContain('email');
    });
  });

  describe('projects', () => {
    it('creates a project (key derived from the name, or given) and lists it', async () => {
      const suffix = randomBase32(5);
      const derived = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: `Research Lab ${suffix}` } });
      expect(derived.statusCode, derived.body).toBe(201);
      expect(derived.json().project).toMatchObject({ name: `Research Lab ${suffix}`, key: `research-lab-${suffix}` });
      expect(derived.json().project.id).toMatch(/^prj_/);
      const given = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: 'Anything', key: `given-${suffix}` } });
      expect(given.statusCode).toBe(201);
      expect(given.json().project.key).toBe(`given-${suffix}`);
      const list = await call(t.app, t.adminSession, { method: 'GET', url: '/api/projects' });
      const keys = list.json().projects.map((p: { key: string }) => p.key);
      expect(keys).toEqual(expect.arrayContaining(['default', `research-lab-${suffix}`, `given-${suffix}`]));
    });

    it('a duplicate project key is 409 (given or derived) and adds no row', async () => {
      const key = `dup-${randomBase32(5)}`;
      expect((await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: 'One', key } })).statusCode).toBe(201);
      const before = await count(t, 'projects');
      const given = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: 'Two', key } });
      expect(given.statusCode).toBe(409);
      expect(given.json().error.message).toContain(key);
      const derived = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: key.toUpperCase() } });
      expect(derived.statusCode).toBe(409);
      expect((await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: 'Default' } })).statusCode).toBe(409);
      expect(await count(t, 'projects')).toBe(before);
    });

    it('three concurrent creates with the same key give one 201 and two 409s, never a 5xx', async () => {
      const key = `race-${randomBase32(5)}`;
      const results = await Promise.all([0, 1, 2].map((i) => call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: `Race ${i}`, key } })));
      expect(results.map((r) => r.statusCode).sort()).toEqual([201, 409, 409]);
    });

    it('two PATCHes of different fields at once both hold (neither writes back what it read of the other)', async () => {
      const id = (await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: `Patch race ${randomBase32(4)}` } })).json().project.id;
      const restore = holdTogether((t.ctx.services.projects as unknown as { store: object }).store, 'find', 2);
      const [renamed, budgeted] = await Promise.all([
        call(t.app, t.adminSession, { method: 'PATCH', url: `/api/projects/${id}`, payload: { name: 'Renamed' } }),
        call(t.app, t.adminSession, { method: 'PATCH', url: `/api/projects/${id}`, payload: { budget: { period: 'day', maxTokens: 100 } } }),
      ]);
      restore();
      expect([renamed.statusCode, budgeted.statusCode]).toEqual([200, 200]);
      const stored = (await call(t.app, t.adminSession, { method: 'GET', url: '/api/projects' })).json().projects.find((p: { id: string }) => p.id === id);
      expect(stored).toMatchObject({ name: 'Renamed', budget: { period: 'day', maxTokens: 100 } });
      // Each answer shows the project as stored after its own change.
      expect(budgeted.json().project.budget).toEqual({ period: 'day', maxTokens: 100 });
    });

    it('a cached read that a PATCH overtook is not kept: the new limits apply at once', async () => {
      const id = (await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: `Cache race ${randomBase32(4)}` } })).json().project.id;
      const projects = t.ctx.services.projects;
      const tenantId = (await t.ctx.database.db.selectFrom('projects').select('tenant_id').where('id', '=', id).executeTakeFirstOrThrow()).tenant_id;
      const held = holdNext((projects as unknown as { store: object }).store, 'find');
      const stale = projects.cached(tenantId, id);
      await held.reached;
      held.restore();
      const patched = await call(t.app, t.adminSession, { method: 'PATCH', url: `/api/projects/${id}`, payload: { rateLimit: { rpm: 1 } } });
      expect(patched.statusCode).toBe(200);
      held.release();
      expect((await stale)?.rateLimit).toBeNull();
      expect((await projects.cached(tenantId, id))?.rateLimit).toEqual({ rpm: 1 });
    });

    it('a name with no usable characters for a key, or a bad key, is 400', async () => {
      const noKey = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: '!!! ???' } });
      expect(noKey.statusCode).toBe(400);
      expect(noKey.json().error.message).toContain('key');
      const badKey = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: 'Fine', key: 'Not OK' } });
      expect(badKey.statusCode).toBe(400);
      expect(badKey.json().error.message).toContain('key');
    });

    it('the same key may exist in two tenants', async () => {
      const tenant = await call(t.app, t.adminSession, { method: 'POST', url: '/api/tenants', payload: { name: 'Keys', ownerEmail: email('keys'), ownerPassword: 'keys-owner-pw' } });
      expect(tenant.statusCode).toBe(201);
      expect(tenant.json().project.key).toBe('default');
      expect(tenant.json().project.id).not.toBe(t.ctx.bootstrap.projectId);
    });
  });

  describe('tenants', () => {
    it('creates a tenant, its default project and an owner who can log in', async () => {
      const ownerEmail = email('tenant-owner');
      const before = await count(t, 'tenants');
      const res = await call(t.app, t.adminSession, { method: 'POST', url: '/api/tenants', payload: { name: 'Acme', ownerEmail, ownerPassword: 'acme-owner-password' } });
      expect(res.statusCode, res.body).toBe(201);
      const { tenant, project, user } = res.json();
      expect(tenant).toMatchObject({ name: 'Acme' });
      expect(tenant.id).toMatch(/^ten_/);
      expect(project).toMatchObject({ key: 'default' });
      expect(user).toMatchObject({ email: ownerEmail, role: 'owner', isInstanceAdmin: false });
      expect(res.body).not.toContain('acme-owner-password');
      expect(await count(t, 'tenants')).toBe(before + 1);

      const rows = await t.ctx.database.db.selectFrom('projects').select(['id', 'tenant_id', 'key']).where('tenant_id', '=', tenant.id).execute();
      expect(rows).toEqual([{ id: project.id, tenant_id: tenant.id, key: 'default' }]);

      const login = await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email: ownerEmail, password: 'acme-owner-password' } });
      expect(login.statusCode).toBe(200);
      const me = await call(t.app, login.json().token, { method: 'GET', url: '/api/auth/me' });
      expect(me.json()).toMatchObject({ tenantId: tenant.id, projectId: project.id, user: { id: user.id, role: 'owner' } });
      // The new owner works in their tenant: a token for the default project.
      const token = await call(t.app, login.json().token, { method: 'POST', url: '/api/tokens', payload: { name: 'acme', projectId: 'default', role: 'owner' } });
      expect(token.statusCode).toBe(201);
      expect(token.json().token.projectId).toBe(project.id);
    });

    it('an ownerEmail that already exists is 409 and writes no tenant, project or user', async () => {
      const before = { tenants: await count(t, 'tenants'), projects: await count(t, 'projects'), users: await count(t, 'users') };
      for (const ownerEmail of [ADMIN_EMAIL, ADMIN_EMAIL.toUpperCase()]) {
        const res = await call(t.app, t.adminSession, { method: 'POST', url: '/api/tenants', payload: { name: 'Half', ownerEmail, ownerPassword: 'half-owner-password' } });
        expect(res.statusCode, res.body).toBe(409);
        expect(res.json().error.type).toBe('conflict_error');
      }
      expect(await count(t, 'tenants')).toBe(before.tenants);
      expect(await count(t, 'projects')).toBe(before.projects);
      expect(await count(t, 'users')).toBe(before.users);
      const named = await t.ctx.database.db.selectFrom('tenants').select('id').where('name', '=', 'Half').execute();
      expect(named).toEqual([]);
    });

    it('bad tenant input is 400 and writes nothing', async () => {
      const before = await count(t, 'tenants');
      for (const payload of [
        { name: 'No owner' },
        { name: 'Short pw', ownerEmail: email('short'), ownerPassword: 'short' },
        { name: '', ownerEmail: email('empty'), ownerPassword: 'password-123' },
        { name: 'Bad email', ownerEmail: 'nobody', ownerPassword: 'password-123' },
      ]) {
        const res = await call(t.app, t.adminSession, { method: 'POST', url: '/api/tenants', payload });
        expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      }
      expect(await count(t, 'tenants')).toBe(before);
    });
  });
});
