import { isUniqueViolation } from '../../db/errors.js';
import type { Db } from '../../db/types.js';
import { MAX_EMAIL_LENGTH } from '../../config.js';
import { ERRORS } from '../../http/errors.js';
import type { Principal } from '../../http/principal.js';
import { roleAtLeast, type Role } from '../../http/rbac.js';
import { newId } from '../../platform/ids.js';
import { generatePassword, hashPassword } from '../../platform/passwords.js';
import { normalEmail } from '../../platform/text.js';
import { UserStore, type UserRecord } from './store.js';

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
    return this.store.findByEmail(normalEmail(email));
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
    const email = normalEmail(input.email);
    // Lower-casing can lengthen a string ("İ" becomes two code points).
    if (email.length > MAX_EMAIL_LENGTH) throw ERRORS.validation(`email is longer than ${MAX_EMAIL_LENGTH} characters once lower-cased`);
    return {
      id: newId('usr'),
      tenantId,
      email,
      name: input.name ?? null,
      passwordHash: await hashPassword(input.password),
      role: input.role,
      isInstanceAdmin: input.isInstanceAdmin ?? false,
      sessionVersion: 0,
      createdAt: Date.now(),
    };
  }

  /** Inserts a prepared user, inside the caller's transaction when given. */
  async insertNew(user: UserRecord, trx?: Db): Promise<void> {
    const store = trx ? new UserStore(trx) : this.store;
    const conflict = () => ERRORS.conflict(`A user with email ${user.email} already exists`);
    if (await store.findByEmail(user.email)) throw conflict();
    try {
      await store.insert(user);
    } catch (err) {
      // A concurrent request inserted the same email between the check and the insert.
      throw isUniqueViolation(err) ? conflict() : err;
    }
  }

  /** Ends every session of the user (logout). */
  endSessions(tenantId: string, userId: string): Promise<void> {
    return this.store.bumpSessionVersion(tenantId, userId);
  }

  /** Sets a new password (generated when omitted) and ends the user's sessions; for the operator's CLI. */
  async resetPassword(email: string, password = generatePassword()): Promise<{ user: UserRecord; password: string }> {
    const user = await this.findByEmail(email);
    if (!user) throw ERRORS.notFound('User', email);
    await this.store.setPasswordHash(user.id, await hashPassword(password));
    return { user, password };
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
