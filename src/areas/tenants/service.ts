import type { Config } from '../../config.js';
import type { Db } from '../../db/types.js';
import { ERRORS } from '../../http/errors.js';
import type { Principal } from '../../http/principal.js';
import { newId } from '../../platform/ids.js';
import { generatePassword } from '../../platform/passwords.js';
import { ProjectStore, type ProjectRecord } from '../projects/store.js';
import type { ProjectService } from '../projects/service.js';
import { hashToken, type TokenService } from '../tokens/service.js';
import type { TokenStore } from '../tokens/store.js';
import { UserStore, type UserRecord } from '../users/store.js';
import type { UserService } from '../users/service.js';
import { TenantStore, type TenantRecord } from './store.js';

const BOOTSTRAP_KEY = 'bootstrap';

export interface BootstrapResult {
  /** False on every start after the first. */
  created: boolean;
  tenantId: string;
  projectId: string;
  adminEmail: string;
  /** Only when the password was generated on this start; printed once, never stored in clear. */
  generatedAdminPassword: string | null;
  bootstrapTokenCreated: boolean;
}

export class TenantService {
  constructor(
    private readonly db: Db,
    private readonly store: TenantStore,
    private readonly projects: ProjectService,
    private readonly users: UserService,
    private readonly tokens: TokenService,
    private readonly tokenStore: TokenStore,
  ) {}

  /** Instance admins create tenants; the tenant, its first project and its owner are written together or not at all. */
  async create(
    actor: Extract<Principal, { kind: 'user' }>,
    input: { name: string; ownerEmail: string; ownerPassword: string },
  ): Promise<{ tenant: TenantRecord; project: ProjectRecord; user: UserRecord }> {
    if (!actor.isInstanceAdmin) throw ERRORS.forbidden('Only the instance admin can create tenants');
    const tenant: TenantRecord = { id: newId('ten'), name: input.name, createdAt: Date.now() };
    const owner = await this.users.prepare(tenant.id, { email: input.ownerEmail, password: input.ownerPassword, role: 'owner' });
    return this.db.transaction().execute(async (trx) => {
      await new TenantStore(trx).insert(tenant);
      const project = await this.projects.create(tenant.id, { name: 'Default', key: 'default' }, new ProjectStore(trx));
      await this.users.insertNew(owner, new UserStore(trx));
      return { tenant, project, user: owner };
    });
  }

  /**
   * First start: tenant `default`, project `default`, the instance admin and (when configured) the bootstrap
   * token. Later starts change nothing, except creating a newly configured bootstrap token.
   */
  async bootstrap(config: Config): Promise<BootstrapResult> {
    const existing = await this.store.getMeta(BOOTSTRAP_KEY);
    let result: BootstrapResult;
    if (existing) {
      result = { ...(JSON.parse(existing) as BootstrapResult), created: false, generatedAdminPassword: null, bootstrapTokenCreated: false };
    } else {
      result = await this.createDefaults(config);
    }
    if (config.bootstrapToken && !(await this.tokenStore.findByHash(hashToken(config.bootstrapToken)))) {
      await this.tokens.create(
        { kind: 'system', tenantId: result.tenantId },
        { name: 'bootstrap', projectId: result.projectId, role: 'owner' },
        config.bootstrapToken,
      );
      result.bootstrapTokenCreated = true;
    }
    return result;
  }

  private async createDefaults(config: Config): Promise<BootstrapResult> {
    const password = config.adminPassword ?? generatePassword();
    const tenant: TenantRecord = { id: newId('ten'), name: 'default', createdAt: Date.now() };
    const admin = await this.users.prepare(tenant.id, {
      email: config.adminEmail,
      password,
      role: 'owner',
      name: 'Instance admin',
      isInstanceAdmin: true,
    });
    try {
      return await this.db.transaction().execute(async (trx) => {
        const store = new TenantStore(trx);
        await store.insertMeta(BOOTSTRAP_KEY, JSON.stringify({ tenantId: tenant.id, pending: true }));
        await store.insert(tenant);
        const project = await this.projects.create(tenant.id, { name: 'default', key: 'default' }, new ProjectStore(trx));
        await this.users.insertNew(admin, new UserStore(trx));
        const result: BootstrapResult = {
          created: true,
          tenantId: tenant.id,
          projectId: project.id,
          adminEmail: admin.email,
          generatedAdminPassword: config.adminPassword ? null : password,
          bootstrapTokenCreated: false,
        };
        await store.updateMeta(BOOTSTRAP_KEY, JSON.stringify({ ...result, generatedAdminPassword: null }));
        return result;
      });
    } catch (err) {
      // Another instance bootstrapped at the same moment: use what it wrote.
      const written = await this.store.getMeta(BOOTSTRAP_KEY);
      if (!written) throw err;
      return { ...(JSON.parse(written) as BootstrapResult), created: false, generatedAdminPassword: null, bootstrapTokenCreated: false };
    }
  }
}
