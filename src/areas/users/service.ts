import { isUniqueViolation } from '../../db/errors.js';
import { ERRORS } from '../../http/errors.js';
import type { Principal } from '../../http/principal.js';
import { roleAtLeast, type Role } from '../../http/rbac.js';
import { newId } from '../../platform/ids.js';
import { hashPassword } from '../../platform/passwords.js';
import type { UserRecord, UserStore } from './store.js';

export interface CreateUserInput {
  email: string;
  password: string;
  role: Role;
  name?: string;
  isInstanceAdmin?: boolean;
}

export class UserService {
  constructor(private readonly store: UserStore) {}

  list(tenantId: string): Promise<UserRecord[]> {
    return this.store.list(tenantId);
  }

  findByEmail(email: string): Promise<UserRecord | null> {
    return this.store.findByEmail(email.toLowerCase());
  }

  findById(tenantId: string, id: string): Promise<UserRecord | null> {
    return this.store.findById(tenantId, id);
  }

  /** Adds a user to the actor's tenant; nobody grants a role above their own. */
  async addToTenant(actor: Extract<Principal, { kind: 'user' }>, input: CreateUserInput): Promise<UserRecord> {
    if (!roleAtLeast(actor.role, input.role)) throw ERRORS.forbidden(`A ${actor.role} cannot add a user with role ${input.role}`);
    return this.create(actor.tenantId, { ...input, isInstanceAdmin: false });
  }

  async create(tenantId: string, input: CreateUserInput): Promise<UserRecord> {
    const user = await this.prepare(tenantId, input);
    await this.insertNew(user);
    return user;
  }

  /** Hashes the password (slow by design) outside any transaction. */
  async prepare(tenantId: string, input: CreateUserInput): Promise<UserRecord> {
    return {
      id: newId('usr'),
      tenantId,
      email: input.email.toLowerCase(),
      name: input.name ?? null,
      passwordHash: await hashPassword(input.password),
      role: input.role,
      isInstanceAdmin: input.isInstanceAdmin ?? false,
      createdAt: Date.now(),
    };
  }

  /** Inserts a prepared user; `store` may be bound to a transaction. */
  async insertNew(user: UserRecord, store = this.store): Promise<void> {
    const conflict = () => ERRORS.conflict(`A user with email ${user.email} already exists`);
    if (await store.findByEmail(user.email)) throw conflict();
    try {
      await store.insert(user);
    } catch (err) {
      // A concurrent request inserted the same email between the check and the insert.
      throw isUniqueViolation(err) ? conflict() : err;
    }
  }
}

/** The public view of a user: never the password hash. */
export function userView(user: UserRecord) {
  return {
    id: user.id,
    email: user.email,
    name: user.name,
    role: user.role,
    isInstanceAdmin: user.isInstanceAdmin,
    createdAt: new Date(user.createdAt).toISOString(),
  };
}
