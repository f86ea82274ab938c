import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * Reads a secret from the environment value, or from `<dataDir>/<fileName>`, creating that file
 * (mode 0600) with 32 random bytes on first use so a restart keeps sessions and encrypted data valid.
 */
export function loadOrCreateSecret(envValue: string | undefined, dataDir: string, fileName: string): string {
  if (envValue !== undefined) return envValue;
  const file = path.join(dataDir, fileName);
  const existing = readSecretFile(file);
  if (existing !== null) return existing;
  fs.mkdirSync(dataDir, { recursive: true });
  // Written whole to a temporary file, then linked into place: a process starting at the same moment either
  // finds no file or a complete one, and whoever links first wins.
  const temp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  fs.writeFileSync(temp, randomBytes(32).toString('base64url') + '\n', { mode: 0o600 });
  try {
    fs.linkSync(temp, file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Filesystems without hard links: exclusive create instead (a concurrent reader may then see a partial file).
    if (code === 'EPERM' || code === 'ENOTSUP' || code === 'EXDEV') writeExclusive(file);
    else if (code !== 'EEXIST') throw err;
  } finally {
    fs.rmSync(temp, { force: true });
  }
  return readSecretFile(file)!;
}

function writeExclusive(file: string): void {
  try {
    fs.writeFileSync(file, randomBytes(32).toString('base64url') + '\n', { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
}

function readSecretFile(file: string): string | null {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  if (text.length < 32) throw new Error(`${file} holds a secret shorter than 32 characters; remove it to have a new one generated`);
  return text;
}

/** AES-256-GCM for secrets at rest (provider keys, connected-agent keys): `v1.<iv>.<tag>.<ciphertext>`. */
export class SecretBox {
  private readonly key: Buffer;

  constructor(secret: string) {
    this.key = createHash('sha256').update(secret).digest();
  }

  encrypt(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), data.toString('base64url')].join('.');
  }

  decrypt(sealed: string): string {
    const [version, iv, tag, data] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || data === undefined) throw new Error('Unrecognised encrypted secret format');
    // The full 16-byte tag only: Node otherwise accepts a tag cut to 4 bytes, which is far easier to forge.
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'), { authTagLength: 16 });
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
  }

  /**
   * A sealed JSON object opened: `{}` when nothing is sealed, null when it cannot be opened (sealed with another
   * secret key, or damaged), so that the caller can say which thing must be set again.
   */
  openJson<T extends object>(sealed: string | null): T | null {
    if (!sealed) return {} as T;
    try {
      return JSON.parse(this.decrypt(sealed)) as T;
    } catch {
      return null;
    }
  }
}
