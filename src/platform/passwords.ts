import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

const KEY_LENGTH = 64;
const SALT_LENGTH = 16;
const MAXMEM = 64 * 1024 * 1024;
const PARAMS = { N: 16384, r: 8, p: 1 } as const;

function derive(password: string, salt: Buffer, params: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFKC'), salt, KEY_LENGTH, { ...params, maxmem: MAXMEM }, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

/** `scrypt$N$r$p$salt$hash`, base64url parts, so parameters can change later without breaking old hashes. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_LENGTH);
  const key = await derive(password, salt, PARAMS);
  return ['scrypt', PARAMS.N, PARAMS.r, PARAMS.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** Cost parameters of a stored hash, or null when they are not sane (bounded so a bad row cannot exhaust memory). */
function parseParams(n: string | undefined, r: string | undefined, p: string | undefined): ScryptOptions | null {
  const [N, R, P] = [n, r, p].map((v) => (v !== undefined && /^\d{1,7}$/.test(v) ? Number(v) : NaN)) as [number, number, number];
  const powerOfTwo = N >= 2 && (N & (N - 1)) === 0;
  if (!powerOfTwo || N > 1 << 20 || R < 1 || R > 32 || P < 1 || P > 16) return null;
  return { N, r: R, p: P };
}

/** Compares in constant time; any malformed stored hash fails rather than throws or passes. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, saltText, keyText, ...rest] = stored.split('$');
  const params = parseParams(n, r, p);
  if (scheme !== 'scrypt' || rest.length > 0 || !params || !saltText || !keyText) return false;
  const expected = Buffer.from(keyText, 'base64url');
  const salt = Buffer.from(saltText, 'base64url');
  if (expected.length !== KEY_LENGTH || salt.length === 0) return false;
  try {
    return timingSafeEqual(await derive(password, salt, params), expected);
  } catch {
    return false;
  }
}

/** A hash of a random password, verified against when the email is unknown so timing reveals nothing. */
export const DUMMY_PASSWORD_HASH = await hashPassword(randomBytes(16).toString('hex'));

export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}
