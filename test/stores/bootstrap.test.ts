import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import { createContext, type Context } from '../../src/context.js';
import { hashToken } from '../../src/areas/tokens/service.js';
import { randomBase32 } from '../../src/platform/ids.js';
import { BACKENDS, tempDeployment, type Backend } from '../helpers/app.js';

const silent = pino({ level: 'silent' });
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

async function freshConfig(backend: Backend, env: Record<string, string> = {}): Promise<Config> {
  const deployment = await tempDeployment(backend);
  cleanups.push(deployment.remove);
  return loadConfig({ WAYGATE_DATA_DIR: deployment.dataDir, DATABASE_URL: deployment.databaseUrl, ...env });
}

async function open(config: Config): Promise<Context> {
  return createContext(config, { logger: silent });
}

async function counts(ctx: Context) {
  const { db } = ctx.database;
  const count = async (table: 'tenants' | 'projects' | 'users' | 'api_tokens') =>
    Number((await db.selectFrom(table).select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
  return { tenants: await count('tenants'), projects: await count('projects'), users: await count('users'), tokens: await count('api_tokens') };
}

describe.each(BACKENDS)('first-start bootstrap on %s', (backend) => {
  it('creates tenant, project, admin and bootstrap token once; a restart changes nothing', async () => {
    const bootstrapToken = `wgt_${randomBase32(43)}`;
    const config = await freshConfig(backend, { WAYGATE_BOOTSTRAP_TOKEN: bootstrapToken });

    const first = await open(config);
    expect(first.bootstrap.created).toBe(true);
    expect(first.bootstrap.generatedAdminPassword).toMatch(/^[\w-]{20,}$/);
    expect(first.bootstrap.bootstrapTokenCreated).toBe(true);
    const before = await counts(first);
    expect(before).toEqual({ tenants: 1, projects: 1, users: 1, tokens: 1 });
    const row = await first.database.db.selectFrom('api_tokens').selectAll().executeTakeFirstOrThrow();
    expect(row.token_hash).toBe(hashToken(bootstrapToken));
    expect(row.role).toBe('owner');
    await first.close();

    const second = await open(config);
    expect(second.bootstrap.created).toBe(false);
    expect(second.bootstrap.generatedAdminPassword).toBeNull();
    expect(second.bootstrap.bootstrapTokenCreated).toBe(false);
    expect(second.bootstrap.tenantId).toBe(first.bootstrap.tenantId);
    expect(second.bootstrap.projectId).toBe(first.bootstrap.projectId);
    expect(await counts(second)).toEqual(before);
    await second.close();
  });

  it('uses WAYGATE_ADMIN_PASSWORD instead of generating one, and never stores it in clear', async () => {
    const config = await freshConfig(backend, { WAYGATE_ADMIN_EMAIL: 'Root@Example.test', WAYGATE_ADMIN_PASSWORD: 'chosen-password-1' });
    const ctx = await open(config);
    expect(ctx.bootstrap.generatedAdminPassword).toBeNull();
    const admin = await ctx.database.db.selectFrom('users').selectAll().executeTakeFirstOrThrow();
    expect(admin.email).toBe('root@example.test');
    expect(admin.is_instance_admin).toBe(1);
    expect(admin.role).toBe('owner');
    expect(admin.password_hash).not.toContain('chosen-password-1');
    expect(admin.password_hash.startsWith('scrypt$')).toBe(true);
    await ctx.close();
  });

  it('two instances starting together on one database bootstrap exactly once, bootstrap token included', async () => {
    for (let round = 0; round < 3; round++) {
      const config = await freshConfig(backend, { WAYGATE_BOOTSTRAP_TOKEN: `wgt_${randomBase32(43)}` });
      const [a, b] = await Promise.all([open(config), open(config)]);
      expect(a.bootstrap.tenantId).toBe(b.bootstrap.tenantId);
      expect([a.bootstrap.created, b.bootstrap.created].filter(Boolean)).toHaveLength(1);
      expect([a.bootstrap.bootstrapTokenCreated, b.bootstrap.bootstrapTokenCreated].filter(Boolean)).toHaveLength(1);
      expect(await counts(a)).toEqual({ tenants: 1, projects: 1, users: 1, tokens: 1 });
      await a.close();
      await b.close();
    }
  });

  it('a changed WAYGATE_BOOTSTRAP_TOKEN replaces the previous token, which stops working', async () => {
    const first = `wgt_${randomBase32(43)}`;
    const second = `wgt_${randomBase32(43)}`;
    const config = await freshConfig(backend, { WAYGATE_BOOTSTRAP_TOKEN: first });
    await (await open(config)).close();
    const ctx = await open({ ...config, bootstrapToken: second });
    expect(ctx.bootstrap.bootstrapTokenCreated).toBe(true);
    expect(await ctx.services.tokens.authenticate(first)).toBeNull();
    expect((await ctx.services.tokens.authenticate(second))?.role).toBe('owner');
    await ctx.close();
    const again = await open({ ...config, bootstrapToken: second });
    expect(again.bootstrap.bootstrapTokenCreated).toBe(false);
    expect(await counts(again)).toMatchObject({ tokens: 2 });
    await again.close();
  });

  it('going back to a replaced (revoked) value refuses to start and leaves the current token working', async () => {
    const x = `wgt_${randomBase32(43)}`;
    const y = `wgt_${randomBase32(43)}`;
    const config = await freshConfig(backend, { WAYGATE_BOOTSTRAP_TOKEN: x });
    await (await open(config)).close();
    await (await open({ ...config, bootstrapToken: y })).close();
    await expect(open({ ...config, bootstrapToken: x })).rejects.toThrow(/WAYGATE_BOOTSTRAP_TOKEN.*revoked/);
    const current = await open({ ...config, bootstrapToken: y });
    expect((await current.services.tokens.authenticate(y))?.role).toBe('owner');
    expect(await current.services.tokens.authenticate(x)).toBeNull();
    await current.close();
  });

  it('a context opened with skipBootstrapToken (CLI commands) neither creates nor rotates the bootstrap token', async () => {
    const x = `wgt_${randomBase32(43)}`;
    const config = await freshConfig(backend, { WAYGATE_BOOTSTRAP_TOKEN: x });
    await (await open(config)).close();
    const stale = await createContext({ ...config, bootstrapToken: `wgt_${randomBase32(43)}` }, { logger: silent, skipBootstrapToken: true });
    expect(stale.bootstrap.bootstrapTokenCreated).toBe(false);
    expect((await stale.services.tokens.authenticate(x))?.role).toBe('owner');
    expect(await counts(stale)).toMatchObject({ tokens: 1 });
    await stale.close();
  });
});
