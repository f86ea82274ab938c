import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { verifyPassword } from '../../src/platform/passwords.js';
import { licenceKeys, signLicence } from '../helpers/licence.js';
import { freePort } from '../helpers/net.js';

// The CLI runs (transpiled once per run by test/global-setup.ts) in real child processes; every process is
// stopped by its PID in a finally.
const ROOT = path.resolve(import.meta.dirname, '../..');
const CLI = [inject('cliEntry')];
const tempDirs: string[] = [];
afterAll(() => tempDirs.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })));

function dataDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-cli-'));
  tempDirs.push(dir);
  return dir;
}

/** A clean environment: nothing of the developer's WAYGATE_* or DATABASE_URL leaks in. */
function envFor(dir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, WAYGATE_DATA_DIR: dir, DATABASE_URL: `sqlite:${path.join(dir, 'waygate.db')}`, LOG_LEVEL: 'warn', ...extra };
}

function stop(child: ChildProcess): void {
  if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) process.kill(child.pid, 'SIGKILL');
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

async function run(args: string[], env: NodeJS.ProcessEnv): Promise<Run> {
  const child = spawn(process.execPath, [...CLI, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`waygate ${args.join(' ')} did not exit: ${stdout}${stderr}`)), 30_000);
      child.once('close', (c) => (clearTimeout(timer), resolve(c)));
    });
    return { code, stdout, stderr };
  } finally {
    stop(child);
  }
}

function json(result: Run): Record<string, unknown> & { token?: Record<string, unknown>; tokens?: Array<Record<string, unknown>> } {
  if (result.code !== 0) throw new Error(`exit ${result.code}: ${result.stderr}`);
  return JSON.parse(result.stdout);
}

describe('waygate --help', { timeout: 60_000 }, () => {
  it.each([
    [[], 'Usage: waygate <command>'],
    [['--help'], 'Usage: waygate <command>'],
    [['serve', '--help'], 'Usage: waygate serve'],
    [['init', '--help'], 'Usage: waygate init'],
    [['tokens', 'create', '--help'], 'Usage: waygate tokens'],
    [['license', 'inspect', '-h'], 'Usage: waygate license inspect'],
    [['help', 'tokens'], 'Usage: waygate tokens'],
  ])('%j exits 0 and prints usage', async (args, usage) => {
    const dir = dataDir();
    const result = await run(args, envFor(dir));
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(usage);
    // Asking for help touches nothing.
    expect(fs.existsSync(path.join(dir, 'waygate.db'))).toBe(false);
  });
});

describe('waygate errors', { timeout: 60_000 }, () => {
  it('an unknown command exits 2 and names it', async () => {
    const result = await run(['frobnicate'], envFor(dataDir()));
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('Unknown command "frobnicate"');
  });

  // Regressions: these exited 1 (parseArgs' own errors) or 0 with the argument ignored (serve --port 1 served on 8080).
  it.each([
    [['serve', '--port', '1'], 'takes no arguments'],
    [['init', '--bogus'], 'takes no arguments'],
    [['license', 'inspect', 'extra'], 'takes no arguments'],
    [['tokens', 'create', '--nmae', 'x'], "Unknown option '--nmae'"],
    [['tokens', 'create', '--name'], "'--name"],
    [['tokens', 'create', '--name', 'x', 'extra'], 'extra'],
    [['tokens', 'create', '--name', 'x', '--no-project', '--project', 'default'], 'exclude each other'],
    [['tokens', 'create', '--name', '   '], '--name must be 1 to 200'],
    [['users', 'reset-password', '--email', 'a@b.c', '--bogus'], "Unknown option '--bogus'"],
  ])('%j is a usage error: exit 2 naming the problem, nothing done', async (args, problem) => {
    const dir = dataDir();
    const result = await run(args, envFor(dir));
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain(problem);
    expect(result.stdout).toBe('');
    expect(fs.existsSync(path.join(dir, 'waygate.db'))).toBe(false);
  });

  it.each([['init'], ['serve']])('a bad variable (PORT=abc) makes %j exit 2 with one stderr line naming PORT', async (...args) => {
    const result = await run(args, envFor(dataDir(), { PORT: 'abc' }));
    expect(result.code).toBe(2);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('PORT');
    expect(result.stdout).toBe('');
  });
});

describe('waygate init', { timeout: 60_000 }, () => {
  it('bootstraps once: the first run prints a generated password, later runs change nothing', async () => {
    const dir = dataDir();
    const first = json(await run(['init'], envFor(dir)));
    expect(first).toMatchObject({ created: true, adminEmail: 'admin@localhost', database: 'sqlite', dataDir: dir, bootstrapTokenCreated: false });
    expect(first.tenantId).toMatch(/^ten_/);
    expect(first.projectId).toMatch(/^prj_/);
    const password = first.generatedAdminPassword as string;
    expect(password.length).toBeGreaterThanOrEqual(16);

    const db = new SQLite(path.join(dir, 'waygate.db'), { readonly: true });
    try {
      const admin = db.prepare('select password_hash, role, is_instance_admin from users where email = ?').get('admin@localhost') as { password_hash: string; role: string; is_instance_admin: number };
      expect(admin).toMatchObject({ role: 'owner', is_instance_admin: 1 });
      expect(admin.password_hash).not.toContain(password);
      expect(await verifyPassword(password, admin.password_hash)).toBe(true);
    } finally {
      db.close();
    }

    const second = json(await run(['init'], envFor(dir)));
    expect(second).toMatchObject({ created: false, generatedAdminPassword: null, tenantId: first.tenantId, projectId: first.projectId });
    expect(JSON.stringify(second)).not.toContain(password);
  });
});

describe('waygate tokens', { timeout: 60_000 }, () => {
  it('create prints the value once; list shows the token without it; revoke marks it revoked', async () => {
    const dir = dataDir();
    const env = envFor(dir, { WAYGATE_ADMIN_PASSWORD: 'cli-admin-password' });
    const created = json(await run(['tokens', 'create', '--name', 'x'], env));
    const value = created.value as string;
    expect(value).toMatch(/^wgt_[A-Za-z0-9_-]{43}$/);
    expect(created.token).toMatchObject({ name: 'x', role: 'member', revokedAt: null });
    const id = created.token!.id as string;
    expect(id).toMatch(/^tok_/);
    expect(value.startsWith(created.token!.prefix as string)).toBe(true);

    const listed = await run(['tokens', 'list'], env);
    expect(listed.stdout).not.toContain(value);
    const entry = json(listed).tokens!.find((tok) => tok.id === id);
    expect(entry).toMatchObject({ name: 'x', revokedAt: null });
    expect(Object.keys(entry!)).not.toContain('value');

    const revoked = json(await run(['tokens', 'revoke', '--id', id], env));
    expect(revoked.token).toMatchObject({ id, revokedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/) });
    const after = json(await run(['tokens', 'list'], env)).tokens!.find((tok) => tok.id === id);
    expect(after!.revokedAt).toEqual(revoked.token!.revokedAt);

    const db = new SQLite(path.join(dir, 'waygate.db'), { readonly: true });
    try {
      expect(JSON.stringify(db.prepare('select * from api_tokens').all())).not.toContain(value);
    } finally {
      db.close();
    }
  });

  it('create honours --no-project and --role; bad usage exits 2', async () => {
    const env = envFor(dataDir(), { WAYGATE_ADMIN_PASSWORD: 'cli-admin-password' });
    const created = json(await run(['tokens', 'create', '--name', 'ops', '--no-project', '--role', 'viewer'], env));
    expect(created.token).toMatchObject({ name: 'ops', projectId: null, role: 'viewer' });
    const [noName, badRole] = await Promise.all([
      run(['tokens', 'create'], env),
      run(['tokens', 'create', '--name', 'y', '--role', 'emperor'], env),
    ]);
    expect(noName.code).toBe(2);
    expect(noName.stderr).toContain('--name');
    expect(badRole.code).toBe(2);
    expect(badRole.stderr).toContain('--role');
  });

  it('create takes --expires as the API takes expiresAt: an RFC 3339 date-time (else exit 2 naming --expires) in the future', async () => {
    const env = envFor(dataDir(), { WAYGATE_ADMIN_PASSWORD: 'cli-admin-password' });
    const created = json(await run(['tokens', 'create', '--name', 'dated', '--expires', '2030-01-31T12:00:00+02:00'], env));
    expect(created.token).toMatchObject({ name: 'dated', expiresAt: '2030-01-31T10:00:00.000Z' });
    const bad = await Promise.all(['hello 2030', '2030-02-31T00:00:00Z', '2030-01-31', '2030-01-31T12:00:00'].map((expires) =>
      run(['tokens', 'create', '--name', 'bad', '--expires', expires], env)));
    for (const result of bad) {
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain('--expires');
      expect(result.stderr).toContain('RFC 3339');
      expect(result.stdout).toBe('');
    }
    // A well-formed date in the past is refused by the token service, as the API refuses it.
    const past = await run(['tokens', 'create', '--name', 'bad', '--expires', '2001-01-01T00:00:00Z'], env);
    expect(past.code).not.toBe(0);
    expect(past.stderr).toContain('in the future');
    expect(past.stdout).toBe('');
    expect(json(await run(['tokens', 'list'], env)).tokens!.map((tok) => tok.name)).not.toContain('bad');
  });

  it('revoking an unknown id fails with a message', async () => {
    const result = await run(['tokens', 'revoke', '--id', 'tok_doesnotexist'], envFor(dataDir(), { WAYGATE_ADMIN_PASSWORD: 'cli-admin-password' }));
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('tok_doesnotexist');
  });
});

describe('waygate license inspect', { timeout: 60_000 }, () => {
  const keys = licenceKeys();

  it('prints state none without a licence', async () => {
    const result = json(await run(['license', 'inspect'], envFor(dataDir())));
    expect(result).toMatchObject({ state: 'none', expiresAt: null });
  });

  it('prints the claims of a valid licence (key as PEM text and as a file path)', async () => {
    const dir = dataDir();
    const keyFile = path.join(dir, 'licence.pem');
    fs.writeFileSync(keyFile, keys.publicKeyPem);
    const licence = await signLicence(keys.privateKeyPem, { tier: 'enterprise', features: ['aegis'], sub: 'CLI Corp' });
    for (const publicKey of [keys.publicKeyPem, keyFile]) {
      const result = json(await run(['license', 'inspect'], envFor(dir, { WAYGATE_LICENSE: licence, WAYGATE_LICENSE_PUBLIC_KEY: publicKey })));
      expect(result).toMatchObject({ state: 'valid', error: null, tier: 'enterprise', features: ['aegis'], sub: 'CLI Corp' });
      expect(Date.parse(result.expiresAt as string)).toBeGreaterThan(Date.now());
    }
  });

  it('reports a licence signed by another key as invalid, and exits 1', async () => {
    const licence = await signLicence(licenceKeys().privateKeyPem, {});
    const result = await run(['license', 'inspect'], envFor(dataDir(), { WAYGATE_LICENSE: licence, WAYGATE_LICENSE_PUBLIC_KEY: keys.publicKeyPem }));
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout).state).toBe('invalid');
  });
});

describe('waygate serve', { timeout: 90_000 }, () => {
  async function serve(dir: string, port: number): Promise<{ child: ChildProcess; output: () => string; errors: () => string; exit: Promise<number | null> }> {
    const child = spawn(process.execPath, [...CLI, 'serve'], { cwd: ROOT, env: envFor(dir, { PORT: String(port), HOST: '127.0.0.1' }), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk) => (stdout += chunk));
    child.stderr!.on('data', (chunk) => (stderr += chunk));
    const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    for (let i = 0; i < 200; i++) {
      if (child.exitCode !== null) throw new Error(`serve exited early (${child.exitCode}): ${stderr}`);
      const res = await fetch(`http://127.0.0.1:${port}/api/health/ready`).catch(() => null);
      if (res?.status === 200 && stdout.includes('Waygate listening')) return { child, output: () => stdout, errors: () => stderr, exit };
      await new Promise((r) => setTimeout(r, 100));
    }
    stop(child);
    throw new Error(`serve did not become ready: ${stdout}${stderr}`);
  }

  async function terminate(child: ChildProcess, exit: Promise<number | null>): Promise<number | null> {
    process.kill(child.pid!, 'SIGTERM');
    return Promise.race([exit, new Promise<null>((_, reject) => setTimeout(() => reject(new Error('no exit after SIGTERM')), 15_000))]);
  }

  it('starts, prints the generated admin password once, serves, and exits 0 on SIGTERM; a restart prints no password', async () => {
    const dir = dataDir();
    const port = await freePort();
    const first = await serve(dir, port);
    try {
      expect(first.output()).toContain(`127.0.0.1:${port}`);
      const matches = [...first.output().matchAll(/password \(generated, shown only this once\): (\S+)/g)];
      expect(matches).toHaveLength(1);
      const password = matches[0]![1]!;
      expect(first.output().split(password)).toHaveLength(2);
      expect(first.errors()).not.toContain(password);
      const login = await fetch(`http://127.0.0.1:${port}/api/auth/login`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'admin@localhost', password }),
      });
      // The banner tells the user to log in with exactly this email; soft so the shutdown checks below still run.
      expect.soft(login.status, await login.text()).toBe(200);
      expect(await terminate(first.child, first.exit)).toBe(0);
    } finally {
      stop(first.child);
    }

    const second = await serve(dir, port);
    try {
      expect(second.output()).not.toContain("shown only this once");
      expect(await terminate(second.child, second.exit)).toBe(0);
    } finally {
      stop(second.child);
    }
  });
});

describe('recovering the admin account', { timeout: 60_000 }, () => {
  it('a first start that cannot listen still prints the generated password, which then works', async () => {
    const dir = dataDir();
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const { port } = blocker.address() as net.AddressInfo;
    try {
      const failed = await run(['serve'], envFor(dir, { PORT: String(port), HOST: '127.0.0.1' }));
      expect(failed.code).not.toBe(0);
      const password = /password \(generated, shown only this once\): (\S+)/.exec(failed.stdout)?.[1];
      expect(password).toBeDefined();
      const db = new SQLite(path.join(dir, 'waygate.db'), { readonly: true });
      const { password_hash: hash } = db.prepare('select password_hash from users').get() as { password_hash: string };
      db.close();
      expect(await verifyPassword(password!, hash)).toBe(true);
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });

  it('users reset-password sets a new password (generated or given) and exits 2 on bad usage', async () => {
    const dir = dataDir();
    const env = envFor(dir, { WAYGATE_ADMIN_EMAIL: 'ops@example.test' });
    json(await run(['init'], env));
    const generated = json(await run(['users', 'reset-password', '--email', 'ops@example.test'], env)) as { password: string; user: { email: string } };
    expect(generated.user.email).toBe('ops@example.test');
    expect(generated.password).toMatch(/^[\w-]{20,}$/);
    const chosen = json(await run(['users', 'reset-password', '--email', 'ops@example.test', '--password', 'chosen-password-9'], env)) as { password?: string };
    // A password given is not printed back.
    expect(chosen).not.toHaveProperty('password');
    const db = new SQLite(path.join(dir, 'waygate.db'), { readonly: true });
    const row = db.prepare('select password_hash, session_version from users').get() as { password_hash: string; session_version: number };
    db.close();
    expect(await verifyPassword('chosen-password-9', row.password_hash)).toBe(true);
    expect(row.session_version).toBe(2);
    expect((await run(['users', 'reset-password'], env)).code).toBe(2);
    expect((await run(['users', 'reset-password', '--email', 'ops@example.test', '--password', 'short'], env)).code).toBe(2);
    const unknown = await run(['users', 'reset-password', '--email', 'nobody@example.test'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('nobody@example.test');
  });
});
