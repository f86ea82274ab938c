import { hash, randomBytes } from 'node:crypto';
import { ERRORS } from '../../http/errors.js';
import type { Principal } from '../../http/principal.js';
import { roleAtLeast, type PermissionMap, type Role } from '../../http/rbac.js';
import { ConfigError } from '../../config.js';
import { isUniqueViolation } from '../../db/errors.js';
import type { Bus } from '../../platform/bus.js';
import { newId } from '../../platform/ids.js';
import { parseTime } from '../../platform/time.js';
import type { ProjectService } from '../projects/service.js';
import { checkLimits, type Budget, type RateLimit } from '../limits/service.js';
import type { TokenRecord, TokenStore } from './store.js';

export const TOKEN_PREFIX = 'wgt_';
/** Characters of a token value after its prefix that listings show (not secret: too few to guess the rest). */
export const SHOWN_VALUE_CHARS = 8;
/**
 * Authenticated tokens are remembered this long. A revocation clears the entry at once on every instance
 * through the bus; the expiry bounds staleness should a notice be lost.
 */
const CACHE_TTL_MS = 30_000;
/**
 * Unknown values are remembered too, so a flood of made-up tokens does not reach the database on every request.
 * Safe because values are 256 random bits; a chosen value (bootstrap, CLI) clears its entry when created here.
 */
const UNKNOWN_TTL_MS = 60_000;
const REVOKED_TOPIC = 'tokens.revoked';
const CREATED_TOPIC = 'tokens.created';
const CACHE_MAX_ENTRIES = 10_000;

export interface CreateTokenInput {
  name: string;
  /** Project id or key; null for a project-less token. */
  projectId: string | null;
  role: Role;
  permissions?: PermissionMap;
  grants?: string[];
  expiresAt?: string;
  budget?: Budget;
  rateLimit?: RateLimit;
}

/** A refused token that exists names its tenant, project and id (for the audit log). */
export interface TokenCheck {
  principal: Principal | null;
  refused: { tenantId: string; projectId: string | null; tokenId: string } | null;
}

/** Who creates a token: a dashboard user, or the system (bootstrap, CLI). */
export type TokenCreator = { kind: 'system'; tenantId: string } | Extract<Principal, { kind: 'user' }>;

/** SHA-256 hex of a token value; the one-shot crypto.hash skips the Hash object (this runs on every request). */
export function hashToken(value: string): string {
  return hash('sha256', value, 'hex');
}

export function generateTokenValue(): string {
  return TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

interface CachedToken {
  record: TokenRecord;
  until: number;
}

export class TokenService {
  private readonly cache = new Map<string, CachedToken>();
  private readonly unknown = new Map<string, number>();
  /** Hashes revoked here or announced on the bus, until any cached copy of them has expired. */
  private readonly revoked = new Map<string, number>();

  constructor(private readonly store: TokenStore, private readonly projects: ProjectService, private readonly bus: Bus) {}

  /** Starts listening for revocations made on other instances. */
  async start(): Promise<void> {
    await this.bus.subscribe(REVOKED_TOPIC, (hash) => this.forget(hash));
    await this.bus.subscribe(CREATED_TOPIC, (hash) => this.unknown.delete(hash));
  }

  /** Creates a token and returns its value; the value is never stored or shown again. */
  async create(creator: TokenCreator, input: CreateTokenInput, value = generateTokenValue()): Promise<{ token: TokenRecord; value: string }> {
    if (creator.kind === 'user') {
      if (!roleAtLeast(creator.role, input.role)) throw ERRORS.forbidden(`A ${creator.role} cannot create a token with role ${input.role}`);
      if ((input.grants?.length ?? 0) > 0 && !roleAtLeast(creator.role, 'admin')) {
        throw ERRORS.forbidden('Only owners and admins can give a token grants');
      }
    }
    checkLimits(input.budget, input.rateLimit);
    // The project may be named by id or key; the token stores the id.
    const project = input.projectId === null ? null : await this.projects.require(creator.tenantId, input.projectId);
    // parseTime refuses what could not be shown back as a date-time (after 9999-12-31T23:59:59.999Z in UTC).
    const expiresAt = input.expiresAt === undefined ? null : parseTime(input.expiresAt, 'from');
    if (expiresAt === undefined || (expiresAt !== null && expiresAt <= Date.now())) {
      throw ERRORS.validation('expiresAt must be an ISO 8601 date-time in the future, before the year 10000 in UTC');
    }
    const token: TokenRecord = {
      id: newId('tok'),
      tenantId: creator.tenantId,
      projectId: project?.id ?? null,
      name: input.name,
      role: input.role,
      permissions: input.permissions ?? null,
      grants: [...new Set(input.grants ?? [])],
      displayPrefix: value.slice(0, TOKEN_PREFIX.length + SHOWN_VALUE_CHARS),
      expiresAt,
      revokedAt: null,
      budget: input.budget ?? null,
      rateLimit: input.rateLimit ?? null,
      createdByUserId: creator.kind === 'user' ? creator.userId : null,
      createdAt: Date.now(),
    };
    const tokenHash = hashToken(value);
    await this.store.insert({ ...token, tokenHash });
    this.unknown.delete(tokenHash);
    return { token, value };
  }

  /**
   * The token with exactly this value, created when missing (bootstrap token). Safe when instances start
   * together: whoever inserts second finds the first one's row. A value whose token was revoked or has expired
   * is refused rather than silently accepted: it would authenticate nobody.
   */
  async ensure(tenantId: string, input: CreateTokenInput, value: string): Promise<{ token: TokenRecord; created: boolean }> {
    const tokenHash = hashToken(value);
    let found = await this.store.findByHash(tokenHash);
    let created = false;
    if (!found) {
      try {
        found = (await this.create({ kind: 'system', tenantId }, input, value)).token;
        created = true;
      } catch (err) {
        found = isUniqueViolation(err) ? await this.store.findByHash(tokenHash) : null;
        if (!found) throw err;
      }
      // Instances that saw this value before it existed drop it from their unknown-value cache.
      await this.bus.publish(CREATED_TOPIC, tokenHash).catch(() => undefined);
    }
    if (found.revokedAt !== null || (found.expiresAt !== null && found.expiresAt <= Date.now())) {
      throw new ConfigError('WAYGATE_BOOTSTRAP_TOKEN', 'names a token that was revoked or has expired; choose a new value');
    }
    return { token: found, created };
  }

  /** The principal for a presented token value, or null when it is unknown, revoked or expired. */
  async authenticate(value: string): Promise<Principal | null> {
    return (await this.check(value)).principal;
  }

  /**
   * Authentication with the reason for a refusal: a known but revoked or expired token still names its tenant,
   * so the refusal lands in that tenant's audit log.
   */
  async check(value: string): Promise<TokenCheck> {
    if (!value.startsWith(TOKEN_PREFIX)) return { principal: null, refused: null };
    const hash = hashToken(value);
    const now = Date.now();
    const held = this.fromMemory(hash, now);
    if (held) return held;
    const record = await this.store.findByHash(hash);
    if (!record) {
      boundedSet(this.unknown, hash, now + UNKNOWN_TTL_MS);
      return { principal: null, refused: null };
    }
    this.remember(hash, record, now);
    return this.verdict(hash, record, now);
  }

  /**
   * The check as far as memory answers it (a cached token, a value known to be unknown, no token at all), without an
   * await; undefined when the database must be asked (`check` does). The request path asks this first.
   */
  checkHeld(value: string): TokenCheck | undefined {
    if (!value.startsWith(TOKEN_PREFIX)) return { principal: null, refused: null };
    return this.fromMemory(hashToken(value), Date.now());
  }

  /** The check for a token hash from the cached tokens and unknown values; undefined when neither holds it. */
  private fromMemory(hash: string, now: number): TokenCheck | undefined {
    const record = this.fromCache(hash, now);
    if (record) return this.verdict(hash, record, now);
    return (this.unknown.get(hash) ?? 0) > now ? { principal: null, refused: null } : undefined;
  }

  private verdict(hash: string, record: TokenRecord, now: number): TokenCheck {
    // The marker also covers a look-up that was in flight when the revocation happened and cached the old row.
    const revoked = record.revokedAt !== null || (this.revoked.get(hash) ?? 0) > now;
    if (revoked || (record.expiresAt !== null && record.expiresAt <= now)) {
      return { principal: null, refused: { tenantId: record.tenantId, projectId: record.projectId, tokenId: record.id } };
    }
    return {
      principal: {
        kind: 'api_token',
        tenantId: record.tenantId,
        projectId: record.projectId,
        tokenId: record.id,
        role: record.role,
        permissions: record.permissions,
        grants: record.grants,
        userId: record.createdByUserId,
        budget: record.budget,
        rateLimit: record.rateLimit,
      },
      refused: null,
    };
  }

  /** A token by id, revoked and expired ones included (work a token submitted checks it is still in force). */
  async find(tenantId: string, id: string): Promise<TokenRecord | null> {
    return (await this.store.findById(tenantId, id))?.token ?? null;
  }

  async list(actor: Extract<Principal, { kind: 'user' }>): Promise<TokenRecord[]> {
    // Owners and admins manage every token of the tenant; others see the tokens they created.
    return this.store.list(actor.tenantId, roleAtLeast(actor.role, 'admin') ? undefined : actor.userId);
  }

  async listAll(tenantId: string): Promise<TokenRecord[]> {
    return this.store.list(tenantId);
  }

  async revoke(actor: TokenCreator, id: string): Promise<TokenRecord> {
    const found = await this.store.findById(actor.tenantId, id);
    const token = found?.token;
    const visible = token && (actor.kind === 'system' || roleAtLeast(actor.role, 'admin') || token.createdByUserId === actor.userId);
    if (!found || !token || !visible) throw ERRORS.notFound('Token', id);
    // A revoke racing this one may have stored its time first: answer with what is stored.
    if (token.revokedAt === null) token.revokedAt = await this.store.revoke(actor.tenantId, id, Date.now());
    this.forget(found.tokenHash);
    // Best effort: without the notice other instances still drop the token when their cached copy expires.
    await this.bus.publish(REVOKED_TOPIC, found.tokenHash).catch(() => undefined);
    return token;
  }

  private forget(hash: string): void {
    this.cache.delete(hash);
    boundedSet(this.revoked, hash, Date.now() + CACHE_TTL_MS);
  }

  private fromCache(hash: string, now: number): TokenRecord | null {
    const hit = this.cache.get(hash);
    if (!hit) return null;
    if (hit.until <= now) {
      this.cache.delete(hash);
      return null;
    }
    return hit.record;
  }

  private remember(hash: string, record: TokenRecord, now: number): void {
    boundedSet(this.cache, hash, { record, until: now + CACHE_TTL_MS });
  }
}

/** Map insertion with the oldest entry evicted at the bound, so a cache cannot grow without limit. */
function boundedSet<V>(map: Map<string, V>, key: string, value: V): void {
  if (!map.has(key) && map.size >= CACHE_MAX_ENTRIES) map.delete(map.keys().next().value!);
  map.set(key, value);
}

/** The public view of a token: never the value or its hash. */
export function tokenView(token: TokenRecord) {
  return {
    id: token.id,
    name: token.name,
    projectId: token.projectId,
    role: token.role,
    permissions: token.permissions,
    grants: token.grants,
    prefix: token.displayPrefix,
    expiresAt: token.expiresAt === null ? null : new Date(token.expiresAt).toISOString(),
    revokedAt: token.revokedAt === null ? null : new Date(token.revokedAt).toISOString(),
    budget: token.budget,
    rateLimit: token.rateLimit,
    createdByUserId: token.createdByUserId,
    createdAt: new Date(token.createdAt).toISOString(),
  };
}
