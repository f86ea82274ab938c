import type { Config } from '../../config.js';
import type { Transactor } from '../../db/index.js';
import { AppError, ERRORS } from '../../http/errors.js';
import type { Principal } from '../../http/principal.js';
import { newId } from '../../platform/ids.js';
import { generatePassword } from '../../platform/passwords.js';
import type { ProjectRecord } from '../projects/store.js';
import type { ProjectService } from '../projects/service.js';
import type { TokenService } from '../tokens/service.js';
import type { UserRecord } from '../users/store.js';
import type { UserService } from '../users/service.js';
import { TenantStore, type TenantRecord } from './store.js';

const BOOTSTRAP_KEY = 'bootstrap';
const BOOTSTRAP_TOKEN_KEY = 'bootstrap-token';

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

function ignoreNotFound(err: unknown): void {
  if (!(err instanceof AppError && err.statusCode === 404)) throw err;
}

export class TenantService {
  constructor(
    private readonly transaction: Transactor,
    private readonly store: TenantStore,
    private readonly projects: ProjectService,
    private readonly users: UserService,
    private readonly tokens: TokenService,
  ) {}

  /** Instance admins create tenants; the tenant, its first project and its owner are written together or not at all. */
  async create(
    actor: Extract<Principal, { kind: 'user' }>,
    input: { name: string; ownerEmail: string; ownerPassword: string },
  ): Promise<{ tenant: TenantRecord; project: ProjectRecord; user: UserRecord }> {
    if (!actor.isInstanceAdmin) throw ERRORS.forbidden('Only the instance admin can create tenants');
    const tenant: TenantRecord = { id: newId('ten'), name: input.name, createdAt: Date.now() };
    const owner = await this.users.prepare(tenant.id, { email: input.ownerEmail, password: input.ownerPassword, role: 'owner' });
    return this.transaction(async (trx) => {
      await new TenantStore(trx).insert(tenant);
      const project = await this.projects.create(tenant.id, { name: 'Default', key: 'default' }, trx);
      await this.users.insertNew(owner, trx);
      return { tenant, project, user: owner };
    });
  }

  /**
   * First start: tenant `default`, project `default`, the instance admin and (when configured) the bootstrap
   * token. Later starts change nothing, except that a changed WAYGATE_BOOTSTRAP_TOKEN replaces the previous one.
   */
  async bootstrap(config: Config): Promise<BootstrapResult> {
    const existing = await this.store.getMeta(BOOTSTRAP_KEY);
    const result = existing ? this.previous(existing) : await this.createDefaults(config);
    if (config.bootstrapToken) result.bootstrapTokenCreated = await this.ensureBootstrapToken(result, config.bootstrapToken);
    return result;
  }

  private previous(written: string): BootstrapResult {
    return { ...(JSON.parse(written) as BootstrapResult), created: false, generatedAdminPassword: null, bootstrapTokenCreated: false };
  }

  /** The configured value is an owner token of project default; the token of a previous value is revoked. */
  private async ensureBootstrapToken(defaults: BootstrapResult, value: string): Promise<boolean> {
    const { token, created } = await this.tokens.ensure(
      defaults.tenantId,
      { name: 'bootstrap', projectId: defaults.projectId, role: 'owner' },
      value,
    );
    const previousId = await this.store.getMeta(BOOTSTRAP_TOKEN_KEY);
    if (previousId !== token.id) {
      if (previousId) await this.tokens.revoke({ kind: 'system', tenantId: defaults.tenantId }, previousId).catch(ignoreNotFound);
      await this.store.upsertMeta(BOOTSTRAP_TOKEN_KEY, token.id);
    }
    return created;
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
      return await this.transaction(async (trx) => {
        const store = new TenantStore(trx);
        // Written first: a second instance bootstrapping at the same moment fails here and reads this row instead.
        await store.insertMeta(BOOTSTRAP_KEY, JSON.stringify({ tenantId: tenant.id, pending: true }));
        await store.insert(tenant);
        const project = await this.projects.create(tenant.id, { name: 'default', key: 'default' }, trx);
        await this.users.insertNew(admin, trx);
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
      const written = await this.store.getMeta(BOOTSTRAP_KEY);
      if (!written) throw err;
      return this.previous(written);
    }
  }
}
