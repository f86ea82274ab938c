import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadOrCreateSecret, SecretBox } from '../../src/platform/secrets.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-secrets-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Flips one character of a base64url text so it decodes to different bytes. */
function flip(text: string, index = 0): string {
  const c = text[index]!;
  return text.slice(0, index) + (c === 'A' ? 'B' : 'A') + text.slice(index + 1);
}

describe('SecretBox', () => {
  const box = new SecretBox('x'.repeat(32));

  it.each(['sk-provider-key-123', '', 'üñíçødé ✓ 🔑', 'a'.repeat(10_000)])('round-trips %j', (plaintext) => {
    const sealed = box.encrypt(plaintext);
    expect(sealed.startsWith('v1.')).toBe(true);
    expect(sealed.split('.')).toHaveLength(4);
    if (plaintext !== '') expect(sealed).not.toContain(plaintext);
    expect(box.decrypt(sealed)).toBe(plaintext);
  });

  it('uses a fresh IV: the same plaintext seals differently each time', () => {
    const a = box.encrypt('same');
    const b = box.encrypt('same');
    expect(a).not.toBe(b);
    expect(box.decrypt(a)).toBe('same');
    expect(box.decrypt(b)).toBe('same');
  });

  it('decrypts with a box built from the same secret (restart)', () => {
    expect(new SecretBox('x'.repeat(32)).decrypt(box.encrypt('persisted'))).toBe('persisted');
  });

  it('throws for a box with another key', () => {
    expect(() => new SecretBox('y'.repeat(32)).decrypt(box.encrypt('secret'))).toThrow();
  });

  it('throws when the ciphertext, tag or iv is tampered with', () => {
    const [version, iv, tag, data] = box.encrypt('do not touch').split('.') as [string, string, string, string];
    expect(() => box.decrypt([version, iv, tag, flip(data)].join('.'))).toThrow();
    expect(() => box.decrypt([version, iv, flip(tag), data].join('.'))).toThrow();
    expect(() => box.decrypt([version, flip(iv), tag, data].join('.'))).toThrow();
    // A tag cut short (GCM would check only its first bytes) is refused too.
    const short = Buffer.from(tag, 'base64url').subarray(0, 4).toString('base64url');
    expect(() => box.decrypt([version, iv, short, data].join('.'))).toThrow();
  });

  it('openJson: {} for nothing sealed, the object for its own key, null for another key or a damaged seal', () => {
    expect(box.openJson(null)).toEqual({});
    expect(box.openJson(box.encrypt(JSON.stringify({ apiKey: 'k' })))).toEqual({ apiKey: 'k' });
    expect(new SecretBox('another secret').openJson(box.encrypt('{}'))).toBeNull();
    expect(box.openJson('v1.broken')).toBeNull();
  });

  it('throws for unrecognised formats', () => {
    expect(() => box.decrypt('plaintext')).toThrow(/Unrecognised/);
    expect(() => box.decrypt('v2.a.b.c')).toThrow(/Unrecognised/);
    expect(() => box.decrypt('v1..tag.data')).toThrow(/Unrecognised/);
  });
});

describe('loadOrCreateSecret', () => {
  it('returns the environment value as is and writes no file', () => {
    const dir = path.join(tmp, 'env');
    expect(loadOrCreateSecret('from-env-value', dir, 'secret.key')).toBe('from-env-value');
    expect(fs.existsSync(path.join(dir, 'secret.key'))).toBe(false);
  });

  it('creates a 0600 file once (and its directory) and reuses it afterwards', () => {
    const dir = path.join(tmp, 'nested', 'data');
    const first = loadOrCreateSecret(undefined, dir, 'secret.key');
    const file = path.join(dir, 'secret.key');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(first.length).toBeGreaterThanOrEqual(43);
    expect(fs.readFileSync(file, 'utf8').trim()).toBe(first);
    const mtime = fs.statSync(file).mtimeMs;
    expect(loadOrCreateSecret(undefined, dir, 'secret.key')).toBe(first);
    expect(fs.statSync(file).mtimeMs).toBe(mtime);
  });

  it('keeps separate secrets per file name and per data directory', () => {
    const dir = path.join(tmp, 'separate');
    const a = loadOrCreateSecret(undefined, dir, 'secret.key');
    const b = loadOrCreateSecret(undefined, dir, 'session.key');
    const c = loadOrCreateSecret(undefined, path.join(tmp, 'separate-2'), 'secret.key');
    expect(new Set([a, b, c]).size).toBe(3);
  });

  it('reads an existing file, trimming the trailing newline', () => {
    const dir = path.join(tmp, 'existing');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'secret.key'), 'operator-provided-secret-of-32-chars\n');
    expect(loadOrCreateSecret(undefined, dir, 'secret.key')).toBe('operator-provided-secret-of-32-chars');
  });

  it('refuses a key file shorter than 32 characters, as it refuses such environment values', () => {
    const dir = path.join(tmp, 'short');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'secret.key'), 'too-short\n');
    expect(() => loadOrCreateSecret(undefined, dir, 'secret.key')).toThrow(/shorter than 32/);
  });

  it('processes racing to create the file all end up with the same complete secret', async () => {
    const dir = path.join(tmp, 'race');
    const { spawn } = await import('node:child_process');
    const script = `import('${path.resolve('src/platform/secrets.ts')}').then((m) => process.stdout.write(m.loadOrCreateSecret(undefined, ${JSON.stringify(dir)}, 'secret.key')))`;
    const runs = Array.from({ length: 4 }, () => new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.on('data', (chunk) => (out += chunk));
      child.once('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`exit ${code}`))));
    }));
    const secrets = await Promise.all(runs);
    expect(new Set(secrets).size).toBe(1);
    expect(secrets[0]!.length).toBeGreaterThanOrEqual(32);
    expect(fs.readdirSync(dir)).toEqual(['secret.key']);
  });
});
