import { createHash } from 'node:crypto';
import { SignJWT, jwtVerify } from 'jose';
import { ERRORS, type AppError } from '../../http/errors.js';
import type { Principal } from '../../http/principal.js';
import type { Cache } from '../../platform/cache.js';
import { DUMMY_PASSWORD_HASH, verifyPassword } from '../../platform/passwords.js';
import type { ProjectService } from '../projects/service.js';
import type { UserService } from '../users/service.js';
import type { UserRecord } from '../users/store.js';

export const SESSION_COOKIE = 'waygate_session';
const ISSUER = 'waygate';

export interface AuthSettings {
  sessionSecret: string;
  sessionTtlSeconds: number;
  loginMaxAttempts: number;
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
   * Checks the password in constant time (an unknown email still costs one scrypt) and limits failed
   * attempts per email and client address. Returns a session JWT.
   */
  async login(email: string, password: string, ipAddress: string): Promise<LoginResult> {
    const attemptsKey = `login-failures:${createHash('sha256').update(`${email.toLowerCase()}|${ipAddress}`).digest('hex')}`;
    const failures = Number((await this.cache.get(attemptsKey)) ?? 0);
    const user = await this.users.findByEmail(email);
    const actor = user ? { tenantId: user.tenantId, userId: user.id } : null;
    if (failures >= this.settings.loginMaxAttempts) {
      // Counting the blocked attempt too tells how long the window has left (the expiry is not extended).
      const { ttlMs } = await this.cache.incr(attemptsKey, this.settings.loginWindowSeconds * 1000);
      return { ok: false, error: ERRORS.tooManyLogins(Math.ceil(ttlMs / 1000)), actor };
    }
    const valid = await verifyPassword(password, user?.passwordHash ?? DUMMY_PASSWORD_HASH);
    if (!user || !valid) {
      const { count, ttlMs } = await this.cache.incr(attemptsKey, this.settings.loginWindowSeconds * 1000);
      const error = count > this.settings.loginMaxAttempts ? ERRORS.tooManyLogins(Math.ceil(ttlMs / 1000)) : ERRORS.badCredentials();
      return { ok: false, error, actor };
    }
    await this.cache.del(attemptsKey);
    const expiresAt = Date.now() + this.settings.sessionTtlSeconds * 1000;
    const token = await new SignJWT({ tid: user.tenantId })
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
    try {
      const { payload } = await jwtVerify(jwt, this.key, { issuer: ISSUER, algorithms: ['HS256'] });
      subject = payload.sub;
      tenantId = payload.tid;
    } catch {
      return null;
    }
    if (!subject || typeof tenantId !== 'string') return null;
    const user = await this.users.findById(tenantId, subject);
    if (!user) return null;
    const project = projectIdOrKey
      ? await this.projects.require(user.tenantId, projectIdOrKey)
      : (await this.projects.list(user.tenantId))[0];
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
