import { createHash } from 'node:crypto';
import { SignJWT, jwtVerify } from 'jose';
import { ERRORS, type AppError } from '../../http/errors.js';
import type { Principal } from '../../http/principal.js';
import type { Cache } from '../../platform/cache.js';
import { DUMMY_PASSWORD_HASH, verifyPassword } from '../../platform/passwords.js';
import type { ProjectService } from '../projects/service.js';
import { normalEmail } from '../../platform/text.js';
import type { UserService } from '../users/service.js';
import type { UserRecord } from '../users/store.js';

export const SESSION_COOKIE = 'waygate_session';
const ISSUER = 'waygate';

export interface AuthSettings {
  sessionSecret: string;
  sessionTtlSeconds: number;
  loginMaxAttempts: number;
  loginMaxAttemptsPerAddress: number;
  loginWindowSeconds: number;
}

/** A failed login still names the account it targeted (when it exists) so the audit event lands in its tenant. */
export type LoginResult =
  | { ok: true; token: string; user: UserRecord; expiresAt: number }
  | { ok: false; error: AppError; actor: { tenantId: string; userId: string } | null };

export type UserPrincipal = Extract<Principal, { kind: 'user' }>;

export class AuthService {
  private readonly key: Uint8Array;

  constructor(
    private readonly settings: AuthSettings,
    private readonly users: UserService,
    private readonly projects: ProjectService,
    private readonly cache: Cache,
  ) {
    this.key = new TextEncoder().encode(settings.sessionSecret);
  }

  /**
   * Checks the password in constant time (an unknown email still costs one scrypt). Every attempt is counted
   * before the password is checked, so parallel guesses cannot slip past the limit: per email and client
   * address, and per client address alone (one password tried across many accounts). Returns a session JWT.
   */
  async login(email: string, password: string, ipAddress: string): Promise<LoginResult> {
    const windowMs = this.settings.loginWindowSeconds * 1000;
    const attemptsKey = `login-attempts:${createHash('sha256').update(`${normalEmail(email)}|${ipAddress}`).digest('hex')}`;
    const addressKey = `login-attempts-address:${createHash('sha256').update(ipAddress).digest('hex')}`;
    const [account, address] = await Promise.all([this.cache.incr(attemptsKey, windowMs), this.cache.incr(addressKey, windowMs)]);
    const user = await this.users.findByEmail(email);
    const actor = user ? { tenantId: user.tenantId, userId: user.id } : null;
    const accountBlocked = account.count > this.settings.loginMaxAttempts;
    const addressBlocked = address.count > this.settings.loginMaxAttemptsPerAddress;
    if (accountBlocked || addressBlocked) {
      const ttlMs = Math.max(accountBlocked ? account.ttlMs : 0, addressBlocked ? address.ttlMs : 0);
      return { ok: false, error: ERRORS.tooManyLogins(Math.ceil(ttlMs / 1000)), actor };
    }
    const valid = await verifyPassword(password, user?.passwordHash ?? DUMMY_PASSWORD_HASH);
    if (!user || !valid) return { ok: false, error: ERRORS.badCredentials(), actor };
    // Only failures count against the account and the address: many people may log in from one address.
    await Promise.all([this.cache.del(attemptsKey), this.cache.decr(addressKey)]);
    const expiresAt = Date.now() + this.settings.sessionTtlSeconds * 1000;
    const token = await new SignJWT({ tid: user.tenantId, sv: user.sessionVersion })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(user.id)
      .setIssuer(ISSUER)
      .setIssuedAt()
      .setExpirationTime(Math.floor(expiresAt / 1000))
      .sign(this.key);
    return { ok: true, token, user, expiresAt };
  }

  /**
   * The user behind a session JWT, read fresh so that a removed user or a changed role takes effect at once.
   * `projectIdOrKey` (the X-Waygate-Project header) picks the project; the tenant's first project otherwise.
   */
  async authenticate(jwt: string, projectIdOrKey: string | undefined): Promise<UserPrincipal | null> {
    let subject: string | undefined;
    let tenantId: unknown;
    let sessionVersion: unknown;
    try {
      const { payload } = await jwtVerify(jwt, this.key, { issuer: ISSUER, algorithms: ['HS256'] });
      subject = payload.sub;
      tenantId = payload.tid;
      sessionVersion = payload.sv;
    } catch {
      return null;
    }
    if (!subject || typeof tenantId !== 'string') return null;
    const user = await this.users.findById(tenantId, subject);
    // A logout or password reset since this session was issued ends it.
    if (!user || sessionVersion !== user.sessionVersion) return null;
    const project = projectIdOrKey
      ? await this.projects.require(user.tenantId, projectIdOrKey)
      : await this.projects.defaultFor(user.tenantId);
    return {
      kind: 'user',
      tenantId: user.tenantId,
      projectId: project?.id ?? null,
      userId: user.id,
      email: user.email,
      role: user.role,
      isInstanceAdmin: user.isInstanceAdmin,
    };
  }
}
