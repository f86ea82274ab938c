import path from 'node:path';
import { normalEmail } from './platform/text.js';

/** Deliberately loose (`admin@localhost` is a real address here); the one email rule of the project. */
export const EMAIL_PATTERN = '^[^\\s@]+@[^\\s@]+$';
/** The longest email address (RFC 5321's path limit less its angle brackets), counted once normalised. */
export const MAX_EMAIL_LENGTH = 254;
/** A password's length: the login takes no more, and a shorter one is refused everywhere. */
export const PASSWORD_LENGTH = { min: 8, max: 256 } as const;

/** Whether a password is of an allowed length (PASSWORD_LENGTH). */
export function hasPasswordLength(password: string): boolean {
  return password.length >= PASSWORD_LENGTH.min && password.length <= PASSWORD_LENGTH.max;
}

/** The longest name of a project, token, model and so on, in characters as JSON Schema counts them. */
export const MAX_NAME_LENGTH = 200;

/** Where the data lives: an embedded SQLite file or a PostgreSQL server. */
export type DatabaseTarget = { kind: 'sqlite'; file: string } | { kind: 'postgres'; url: string; poolSize: number };

export interface Config {
  port: number;
  host: string;
  database: DatabaseTarget;
  dataDir: string;
  redisUrl: string | undefined;
  secretKey: string | undefined;
  sessionSecret: string | undefined;
  adminEmail: string;
  adminPassword: string | undefined;
  bootstrapToken: string | undefined;
  license: string | undefined;
  licensePublicKey: string | undefined;
  healthEndpointEnabled: boolean;
  bodyLimitBytes: number;
  logLevel: string;
  /** Failed logins allowed per email+address in `loginWindowSeconds` before 429. */
  loginMaxAttempts: number;
  /** Login attempts (any email) per client address in the window: stops one password sprayed across accounts. */
  loginMaxAttemptsPerAddress: number;
  loginWindowSeconds: number;
  sessionTtlSeconds: number;
  /** Seconds between readiness turning "down" and the listener closing, for load balancers to drain. */
  shutdownDelaySeconds: number;
  /** Behind a load balancer: trust X-Forwarded-For (true) or that many proxy hops, for client addresses. */
  trustProxy: boolean | number;
  /** Microseconds the event loop keeps polling after a request or an upstream answer before it sleeps (0: never). */
  busyPollUs: number;
  /** Offer the built-in `local-chat` and `local-embed` models in every project. */
  localModels: boolean;
  upstream: {
    connectTimeoutMs: number;
    /** Silence allowed waiting for an upstream's headers or its next body chunk. */
    readTimeoutMs: number;
    /** Extra attempts after a 429, 5xx, timeout or refused connection, before the first byte. */
    retries: number;
  };
  files: {
    /** Where new document-store objects are written: `disk` (the data directory) or `database`. */
    storage: 'disk' | 'database';
    maxObjectBytes: number;
  };
  batches: {
    /** Most request lines one batch may have. */
    maxLines: number;
    /** Items this instance runs at once, across every batch. */
    concurrency: number;
    /** How long a claimed item stays with its worker without a heartbeat before another worker takes it. */
    leaseMs: number;
    /** Run batch items on this instance (false: serve the API only). */
    worker: boolean;
    /** Wait before an item's second attempt after a transient failure; the third waits five times as long. */
    retryDelayMs: number;
  };
  agents: {
    /** Let connected agents be reached at loopback, private and link-local addresses (default: public only). */
    allowPrivateUrls: boolean;
  };
}

/** A bad environment variable: the message is one line that names it. */
export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`Invalid configuration: ${variable} ${problem}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** A raw value quoted for an error message, kept on one line and short. */
function quoted(raw: string): string {
  return JSON.stringify(raw.length > 60 ? `${raw.slice(0, 60)}...` : raw);
}

function text(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got ${quoted(raw)}`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = text(env, name)?.toLowerCase();
  if (raw === undefined) return fallback;
  if (['true', '1', 'yes', 'on'].includes(raw)) return true;
  if (['false', '0', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(name, `must be true or false, got ${quoted(raw)}`);
}

function trustProxy(env: Env): boolean | number {
  const raw = text(env, 'WAYGATE_TRUST_PROXY')?.toLowerCase();
  if (raw === undefined || raw === 'false') return false;
  if (raw === 'true') return true;
  if (/^\d{1,2}$/.test(raw)) return Number(raw);
  throw new ConfigError('WAYGATE_TRUST_PROXY', `must be true, false or a number of proxy hops, got ${quoted(raw)}`);
}

function filesStorage(env: Env, database: DatabaseTarget): 'disk' | 'database' {
  const raw = text(env, 'WAYGATE_FILES_STORAGE')?.toLowerCase();
  // Instances sharing a PostgreSQL database cannot read each other's data directories.
  if (raw === undefined) return database.kind === 'postgres' ? 'database' : 'disk';
  if (raw === 'disk' || raw === 'database') return raw;
  throw new ConfigError('WAYGATE_FILES_STORAGE', `must be disk or database, got ${quoted(raw)}`);
}

/** An address or host name to listen on: refused here rather than by a DNS failure after the database is set up. */
function hostOf(raw: string | undefined): string {
  if (raw === undefined) return '127.0.0.1';
  if (!/^[\w.:%-]+$/.test(raw)) {
    throw new ConfigError('HOST', `must be an IP address or a host name (such as 0.0.0.0 or ::), got ${quoted(raw)}`);
  }
  return raw;
}

function databaseTarget(raw: string | undefined, dataDir: string, poolSize: number): DatabaseTarget {
  if (raw === undefined) return { kind: 'sqlite', file: path.join(dataDir, 'waygate.db') };
  if (raw.startsWith('postgres://') || raw.startsWith('postgresql://')) {
    try {
      new URL(raw);
    } catch {
      throw new ConfigError('DATABASE_URL', 'is not a valid postgres:// URL');
    }
    return { kind: 'postgres', url: raw, poolSize };
  }
  if (raw.startsWith('sqlite:')) {
    // In sqlite://data/w.db "data" is a URL host, which the path used to lose: refuse it rather than guess.
    if (/^sqlite:\/\/(?!\/)/.test(raw)) {
      throw new ConfigError('DATABASE_URL', 'needs a third slash after sqlite://; write sqlite:relative/path or sqlite:///absolute/path');
    }
    const file = raw.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (file === '') throw new ConfigError('DATABASE_URL', 'names no SQLite file (use sqlite:./data/waygate.db)');
    return { kind: 'sqlite', file: file === ':memory:' ? file : path.resolve(file) };
  }
  throw new ConfigError('DATABASE_URL', 'must start with sqlite: or postgres://');
}

/** The messages never repeat the URL: it may carry a password. */
function checkRedisUrl(raw: string): void {
  if (!/^rediss?:\/\//.test(raw)) throw new ConfigError('REDIS_URL', 'must start with redis:// or rediss://');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('REDIS_URL', 'is not a valid URL (expected redis://[:password@]host[:port][/db], port 1-65535)');
  }
  if (url.hostname === '') throw new ConfigError('REDIS_URL', 'names no host (expected redis://[:password@]host[:port][/db])');
  // new URL() already refuses a port that is not a number up to 65535.
  if (url.port === '0') throw new ConfigError('REDIS_URL', 'has port 0; use a port between 1 and 65535');
  // The client sends SELECT with whatever the path holds: "/abc" crashed the start with a raw Redis error, and a
  // number the server lacks left the client on database 0 without a word.
  if (!/^(?:\/(?:[0-9]|1[0-5])?)?$/.test(url.pathname)) {
    throw new ConfigError('REDIS_URL', `has database "${url.pathname.slice(1, 20)}"; use a number from 0 to 15 (Redis's default databases), or none for 0`);
  }
}

/** Reads the environment once into a typed, validated config; throws ConfigError naming the bad variable. */
export function loadConfig(env: Env = process.env): Config {
  const dataDir = path.resolve(text(env, 'WAYGATE_DATA_DIR') ?? './data');
  const bootstrapToken = text(env, 'WAYGATE_BOOTSTRAP_TOKEN');
  if (bootstrapToken !== undefined && !/^wgt_[A-Za-z0-9_-]{16,}$/.test(bootstrapToken)) {
    throw new ConfigError('WAYGATE_BOOTSTRAP_TOKEN', 'must start with wgt_ followed by at least 16 base64url characters');
  }
  const adminEmail = normalEmail(text(env, 'WAYGATE_ADMIN_EMAIL') ?? 'admin@localhost');
  if (!new RegExp(EMAIL_PATTERN).test(adminEmail)) throw new ConfigError('WAYGATE_ADMIN_EMAIL', 'is not an email address');
  // The login's limits: an admin made with a value outside them could never log in.
  if (adminEmail.length > MAX_EMAIL_LENGTH) throw new ConfigError('WAYGATE_ADMIN_EMAIL', `is longer than ${MAX_EMAIL_LENGTH} characters (once lower-cased)`);
  // Not trimmed: spaces are part of a password, and the login compares it as typed.
  const adminPassword = env.WAYGATE_ADMIN_PASSWORD === '' ? undefined : env.WAYGATE_ADMIN_PASSWORD;
  if (adminPassword !== undefined && !hasPasswordLength(adminPassword)) {
    throw new ConfigError('WAYGATE_ADMIN_PASSWORD', `must be ${PASSWORD_LENGTH.min} to ${PASSWORD_LENGTH.max} characters`);
  }
  const redisUrl = text(env, 'REDIS_URL');
  if (redisUrl !== undefined) checkRedisUrl(redisUrl);
  const secretKey = text(env, 'WAYGATE_SECRET_KEY');
  if (secretKey !== undefined && secretKey.length < 32) {
    throw new ConfigError('WAYGATE_SECRET_KEY', 'must be at least 32 characters');
  }
  const sessionSecret = text(env, 'WAYGATE_SESSION_SECRET');
  if (sessionSecret !== undefined && sessionSecret.length < 32) {
    throw new ConfigError('WAYGATE_SESSION_SECRET', 'must be at least 32 characters');
  }
  const logLevel = text(env, 'LOG_LEVEL') ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', `must be one of fatal, error, warn, info, debug, trace, silent, got ${quoted(logLevel)}`);
  }
  const database = databaseTarget(text(env, 'DATABASE_URL'), dataDir, integer(env, 'WAYGATE_DATABASE_POOL_SIZE', 10, 1, 1000));
  return {
    port: integer(env, 'PORT', 8080, 0, 65535),
    host: hostOf(text(env, 'HOST')),
    database,
    dataDir,
    redisUrl,
    secretKey,
    sessionSecret,
    adminEmail,
    adminPassword,
    bootstrapToken,
    license: text(env, 'WAYGATE_LICENSE'),
    licensePublicKey: text(env, 'WAYGATE_LICENSE_PUBLIC_KEY'),
    healthEndpointEnabled: boolean(env, 'HEALTH_ENDPOINT_ENABLED', true),
    bodyLimitBytes: integer(env, 'WAYGATE_BODY_LIMIT_BYTES', 10 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    logLevel,
    loginMaxAttempts: integer(env, 'WAYGATE_LOGIN_MAX_ATTEMPTS', 10, 1, 1_000_000),
    loginMaxAttemptsPerAddress: integer(env, 'WAYGATE_LOGIN_MAX_ATTEMPTS_PER_ADDRESS', 300, 1, 1_000_000_000),
    loginWindowSeconds: integer(env, 'WAYGATE_LOGIN_WINDOW_SECONDS', 900, 1, 86_400),
    sessionTtlSeconds: integer(env, 'WAYGATE_SESSION_TTL_SECONDS', 43_200, 60, 2_592_000),
    trustProxy: trustProxy(env),
    shutdownDelaySeconds: integer(env, 'WAYGATE_SHUTDOWN_DELAY_SECONDS', 0, 0, 300),
    busyPollUs: integer(env, 'WAYGATE_BUSY_POLL_US', 200, 0, 10_000),
    localModels: boolean(env, 'WAYGATE_LOCAL_MODELS', true),
    upstream: {
      connectTimeoutMs: integer(env, 'WAYGATE_UPSTREAM_CONNECT_TIMEOUT_MS', 10_000, 100, 600_000),
      readTimeoutMs: integer(env, 'WAYGATE_UPSTREAM_TIMEOUT_MS', 300_000, 100, 3_600_000),
      retries: integer(env, 'WAYGATE_UPSTREAM_RETRIES', 2, 0, 10),
    },
    files: {
      storage: filesStorage(env, database),
      maxObjectBytes: integer(env, 'WAYGATE_FILES_MAX_BYTES', 100 * 1024 * 1024, 1, 1024 ** 4),
    },
    batches: {
      maxLines: integer(env, 'WAYGATE_BATCH_MAX_LINES', 10_000, 1, 1_000_000),
      concurrency: integer(env, 'WAYGATE_BATCH_CONCURRENCY', 32, 1, 10_000),
      leaseMs: integer(env, 'WAYGATE_BATCH_LEASE_SECONDS', 30, 1, 3600) * 1000,
      worker: boolean(env, 'WAYGATE_BATCH_WORKER', true),
      retryDelayMs: integer(env, 'WAYGATE_BATCH_RETRY_DELAY_MS', 1000, 0, 3_600_000),
    },
    agents: {
      allowPrivateUrls: boolean(env, 'WAYGATE_AGENT_ALLOW_PRIVATE_URLS', false),
    },
  };
}
