import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';

const VALID_TOKEN = 'wgt_abcdefghijklmnopqrstuvwxyz012345';
const SECRET_32 = 's'.repeat(32);

function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw new Error(`expected ConfigError, got ${String(err)}`);
  }
  throw new Error(`expected ConfigError for ${JSON.stringify(env)}, but the config loaded`);
}

describe('loadConfig defaults', () => {
  it('gives the documented defaults for an empty environment', () => {
    const config = loadConfig({});
    expect(config.port).toBe(8080);
    expect(config.host).toBe('127.0.0.1');
    expect(config.dataDir).toBe(path.resolve('./data'));
    expect(config.database).toEqual({ kind: 'sqlite', file: path.resolve('./data/waygate.db') });
    expect(config.healthEndpointEnabled).toBe(true);
    expect(config.bodyLimitBytes).toBe(10 * 1024 * 1024);
    expect(config.adminEmail).toBe('admin@localhost');
    expect(config.logLevel).toBe('info');
    expect(config.redisUrl).toBeUndefined();
    expect(config.secretKey).toBeUndefined();
    expect(config.sessionSecret).toBeUndefined();
    expect(config.adminPassword).toBeUndefined();
    expect(config.bootstrapToken).toBeUndefined();
    expect(config.license).toBeUndefined();
    expect(config.licensePublicKey).toBeUndefined();
    expect(config.busyPollUs).toBe(200);
  });

  it('treats empty and blank values as unset', () => {
    const config = loadConfig({ PORT: '', HOST: '   ', DATABASE_URL: '', REDIS_URL: ' ', HEALTH_ENDPOINT_ENABLED: '' });
    expect(config.port).toBe(8080);
    expect(config.host).toBe('127.0.0.1');
    expect(config.database.kind).toBe('sqlite');
    expect(config.redisUrl).toBeUndefined();
    expect(config.healthEndpointEnabled).toBe(true);
  });

  it('puts the default SQLite file inside WAYGATE_DATA_DIR', () => {
    const config = loadConfig({ WAYGATE_DATA_DIR: '/tmp/waygate-config-test' });
    expect(config.dataDir).toBe('/tmp/waygate-config-test');
    expect(config.database).toEqual({ kind: 'sqlite', file: '/tmp/waygate-config-test/waygate.db' });
  });
});

describe('loadConfig parses every variable', () => {
  it('reads each documented variable into the typed config', () => {
    const config = loadConfig({
      PORT: '9090',
      HOST: '0.0.0.0',
      DATABASE_URL: 'postgres://user:pw@db.internal:5432/waygate',
      WAYGATE_DATA_DIR: '/var/lib/waygate',
      REDIS_URL: 'rediss://cache.internal:6380/1',
      WAYGATE_SECRET_KEY: SECRET_32,
      WAYGATE_SESSION_SECRET: 'q'.repeat(40),
      WAYGATE_ADMIN_EMAIL: 'Root@Example.COM',
      WAYGATE_ADMIN_PASSWORD: 'longenough',
      WAYGATE_BOOTSTRAP_TOKEN: VALID_TOKEN,
      WAYGATE_LICENSE: 'eyJ.licence.jwt',
      WAYGATE_LICENSE_PUBLIC_KEY: '/etc/waygate/licence.pem',
      HEALTH_ENDPOINT_ENABLED: 'false',
      WAYGATE_BODY_LIMIT_BYTES: '2048',
      LOG_LEVEL: 'debug',
      WAYGATE_LOGIN_MAX_ATTEMPTS: '3',
      WAYGATE_LOGIN_WINDOW_SECONDS: '60',
      WAYGATE_SESSION_TTL_SECONDS: '3600',
      WAYGATE_TRUST_PROXY: '2',
      WAYGATE_BUSY_POLL_US: '0',
    });
    expect(config).toMatchObject({
      port: 9090,
      host: '0.0.0.0',
      database: { kind: 'postgres', url: 'postgres://user:pw@db.internal:5432/waygate' },
      dataDir: '/var/lib/waygate',
      redisUrl: 'rediss://cache.internal:6380/1',
      secretKey: SECRET_32,
      sessionSecret: 'q'.repeat(40),
      adminEmail: 'root@example.com',
      adminPassword: 'longenough',
      bootstrapToken: VALID_TOKEN,
      license: 'eyJ.licence.jwt',
      licensePublicKey: '/etc/waygate/licence.pem',
      healthEndpointEnabled: false,
      bodyLimitBytes: 2048,
      logLevel: 'debug',
      loginMaxAttempts: 3,
      loginWindowSeconds: 60,
      sessionTtlSeconds: 3600,
      trustProxy: 2,
      busyPollUs: 0,
    });
  });

  it('accepts sqlite:/abs/path.db, sqlite:///abs/path.db, relative sqlite paths and postgresql://', () => {
    expect(loadConfig({ DATABASE_URL: 'sqlite:/abs/path.db' }).database).toEqual({ kind: 'sqlite', file: '/abs/path.db' });
    expect(loadConfig({ DATABASE_URL: 'sqlite:///abs/path.db' }).database).toEqual({ kind: 'sqlite', file: '/abs/path.db' });
    expect(loadConfig({ DATABASE_URL: 'sqlite:./here/w.db' }).database).toEqual({ kind: 'sqlite', file: path.resolve('./here/w.db') });
    expect(loadConfig({ DATABASE_URL: 'postgresql://localhost/w' }).database).toEqual({ kind: 'postgres', url: 'postgresql://localhost/w', poolSize: 10 });
    expect(loadConfig({ DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/test' }).database.kind).toBe('postgres');
  });

  it('refuses sqlite:// followed by a host, which would silently drop it, and names both accepted forms', () => {
    for (const url of ['sqlite://data/w.db', 'sqlite://./x.db', 'sqlite://']) {
      const error = configError({ DATABASE_URL: url });
      expect(error.message).toContain('DATABASE_URL');
      expect(error.message).toContain('sqlite:relative/path');
      expect(error.message).toContain('sqlite:///absolute/path');
    }
    expect(loadConfig({ DATABASE_URL: 'sqlite:data/w.db' }).database).toEqual({ kind: 'sqlite', file: path.resolve('data/w.db') });
    expect(loadConfig({ DATABASE_URL: 'sqlite::memory:' }).database).toEqual({ kind: 'sqlite', file: ':memory:' });
  });

  it('accepts REDIS_URL with a host, optional password, port and database number', () => {
    for (const url of ['redis://localhost', 'redis://:pw@cache:6379/2', 'rediss://user:p%40ss@[::1]:6380', 'redis://h:65535?family=6', 'redis://h/', 'redis://h/0', 'redis://h/15']) {
      expect(loadConfig({ REDIS_URL: url }).redisUrl).toBe(url);
    }
  });

  it.each([
    ['redis://localhost:notaport', 'not a valid URL'],
    ['redis://localhost:70000', 'not a valid URL'],
    ['redis://:secretpw@', 'not a valid URL'],
    ['redis://', 'names no host'],
    ['redis:///0', 'names no host'],
    ['redis://localhost:0', 'port 0'],
    // Regressions: "/abc" crashed the start with a raw Redis error; "/99999" ran on database 0 without a word.
    ['redis://:secretpw@localhost/abc', 'database "abc"'],
    ['redis://localhost/99999', 'database "99999"'],
    ['redis://localhost/16', 'from 0 to 15'],
    ['redis://localhost/1/2', 'database'],
  ])('refuses REDIS_URL=%s at start-up, naming REDIS_URL and the problem (%s) without repeating a password', (url, problem) => {
    const error = configError({ REDIS_URL: url });
    expect(error.message).toContain('REDIS_URL');
    expect(error.message).toContain(problem);
    expect(error.message).not.toContain('secretpw');
  });

  it.each([
    ['true', true], ['1', true], ['yes', true], ['ON', true],
    ['false', false], ['0', false], ['no', false], ['Off', false],
  ])('HEALTH_ENDPOINT_ENABLED=%s -> %s', (value, expected) => {
    expect(loadConfig({ HEALTH_ENDPOINT_ENABLED: value }).healthEndpointEnabled).toBe(expected);
  });

  it('WAYGATE_TRUST_PROXY: false by default, true, or a number of hops', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ WAYGATE_TRUST_PROXY: 'true' }).trustProxy).toBe(true);
    expect(loadConfig({ WAYGATE_TRUST_PROXY: '1' }).trustProxy).toBe(1);
  });

  it('WAYGATE_AGENT_ALLOW_PRIVATE_URLS: connected agents reach public addresses only unless it is true', () => {
    expect(loadConfig({}).agents.allowPrivateUrls).toBe(false);
    expect(loadConfig({ WAYGATE_AGENT_ALLOW_PRIVATE_URLS: 'true' }).agents.allowPrivateUrls).toBe(true);
    expect(() => loadConfig({ WAYGATE_AGENT_ALLOW_PRIVATE_URLS: 'maybe' })).toThrow(/WAYGATE_AGENT_ALLOW_PRIVATE_URLS/);
  });

  it('accepts PORT 0 and 65535 (the bounds)', () => {
    expect(loadConfig({ PORT: '0' }).port).toBe(0);
    expect(loadConfig({ PORT: '65535' }).port).toBe(65535);
  });
});

describe('loadConfig rejects bad values with a one-line ConfigError naming the variable', () => {
  it.each([
    ['PORT', { PORT: 'abc' }],
    ['PORT', { PORT: '70000' }],
    ['PORT', { PORT: '-1' }],
    ['PORT', { PORT: '80.5' }],
    ['DATABASE_URL', { DATABASE_URL: 'mysql://x' }],
    ['DATABASE_URL', { DATABASE_URL: 'sqlite:' }],
    ['WAYGATE_BOOTSTRAP_TOKEN', { WAYGATE_BOOTSTRAP_TOKEN: 'abc' }],
    ['WAYGATE_BOOTSTRAP_TOKEN', { WAYGATE_BOOTSTRAP_TOKEN: 'wgt_short' }],
    ['HEALTH_ENDPOINT_ENABLED', { HEALTH_ENDPOINT_ENABLED: 'maybe' }],
    ['REDIS_URL', { REDIS_URL: 'http://x' }],
    // Regressions: accepted, and the start failed with a DNS error after the database was set up.
    ['HOST', { HOST: 'not a host' }],
    ['HOST', { HOST: 'http://x' }],
    ['WAYGATE_SECRET_KEY', { WAYGATE_SECRET_KEY: 'too-short' }],
    ['WAYGATE_SESSION_SECRET', { WAYGATE_SESSION_SECRET: 'too-short' }],
    ['LOG_LEVEL', { LOG_LEVEL: 'verbose' }],
    ['WAYGATE_ADMIN_EMAIL', { WAYGATE_ADMIN_EMAIL: 'not-an-email' }],
    ['WAYGATE_ADMIN_EMAIL', { WAYGATE_ADMIN_EMAIL: 'two words@x' }],
    ['WAYGATE_ADMIN_PASSWORD', { WAYGATE_ADMIN_PASSWORD: 'short' }],
    // Regressions: accepted, and the admin could then never log in (the login takes at most 256 and 254 characters).
    ['WAYGATE_ADMIN_PASSWORD', { WAYGATE_ADMIN_PASSWORD: 'p'.repeat(257) }],
    ['WAYGATE_ADMIN_EMAIL', { WAYGATE_ADMIN_EMAIL: `${'a'.repeat(250)}@x.io` }],
    ['WAYGATE_BODY_LIMIT_BYTES', { WAYGATE_BODY_LIMIT_BYTES: '10' }],
    ['WAYGATE_LOGIN_MAX_ATTEMPTS', { WAYGATE_LOGIN_MAX_ATTEMPTS: '0' }],
    ['WAYGATE_LOGIN_WINDOW_SECONDS', { WAYGATE_LOGIN_WINDOW_SECONDS: 'soon' }],
    ['WAYGATE_SESSION_TTL_SECONDS', { WAYGATE_SESSION_TTL_SECONDS: '5' }],
    ['WAYGATE_TRUST_PROXY', { WAYGATE_TRUST_PROXY: 'maybe' }],
    ['WAYGATE_BUSY_POLL_US', { WAYGATE_BUSY_POLL_US: '10001' }],
    ['WAYGATE_BUSY_POLL_US', { WAYGATE_BUSY_POLL_US: '0.5' }],
    ['WAYGATE_FILES_STORAGE', { WAYGATE_FILES_STORAGE: 's3' }],
    ['WAYGATE_FILES_MAX_BYTES', { WAYGATE_FILES_MAX_BYTES: '0' }],
    ['WAYGATE_FILES_MAX_BYTES', { WAYGATE_FILES_MAX_BYTES: '1e6' }],
  ])('%s in %j', (variable, env) => {
    const error = configError(env);
    expect(error.name).toBe('ConfigError');
    expect(error.message).toContain(variable);
    expect(error.message.split('\n')).toHaveLength(1);
  });

  it('takes HOST as an IPv4 or IPv6 address or a host name', () => {
    for (const host of ['0.0.0.0', '::', '::1', 'fe80::1%eth0', 'localhost', 'gateway.internal']) expect(loadConfig({ HOST: host }).host).toBe(host);
  });

  // Regression: the password was trimmed, so logging in with the value as set was refused.
  it('keeps the admin password as set, spaces included', () => {
    expect(loadConfig({ WAYGATE_ADMIN_PASSWORD: ' spaced password ' }).adminPassword).toBe(' spaced password ');
  });

  it('keeps the message to one line even when the bad value itself contains a line break', () => {
    const error = configError({ PORT: '80\n80' });
    expect(error.message).toContain('PORT');
    expect(error.message.split('\n')).toHaveLength(1);
  });

  it('does not repeat a secret value in the error message', () => {
    const error = configError({ WAYGATE_SECRET_KEY: 'hunter2-secret' });
    expect(error.message).not.toContain('hunter2-secret');
    expect(configError({ WAYGATE_ADMIN_PASSWORD: 'pw1234' }).message).not.toContain('pw1234');
  });
});

describe('document store configuration', () => {
  it('keeps files on disk with SQLite and in the database with PostgreSQL, unless told otherwise', () => {
    expect(loadConfig({}).files).toEqual({ storage: 'disk', maxObjectBytes: 100 * 1024 * 1024 });
    expect(loadConfig({ DATABASE_URL: 'postgres://localhost/waygate' }).files.storage).toBe('database');
    expect(loadConfig({ DATABASE_URL: 'postgres://localhost/waygate', WAYGATE_FILES_STORAGE: 'disk' }).files.storage).toBe('disk');
    expect(loadConfig({ WAYGATE_FILES_STORAGE: 'Database', WAYGATE_FILES_MAX_BYTES: '1024' }).files).toEqual({ storage: 'database', maxObjectBytes: 1024 });
  });
});
