import { describe, expect, it } from 'vitest';
import { DUMMY_PASSWORD_HASH, generatePassword, hashPassword, verifyPassword } from '../../src/platform/passwords.js';

describe('password hashing (scrypt)', () => {
  it('hashes to scrypt$N$r$p$salt$hash and verifies the right password', async () => {
    const stored = await hashPassword('correct horse battery staple');
    const parts = stored.split('$');
    expect(parts).toHaveLength(6);
    expect(parts.slice(0, 4)).toEqual(['scrypt', '16384', '8', '1']);
    expect(Buffer.from(parts[4]!, 'base64url')).toHaveLength(16);
    expect(Buffer.from(parts[5]!, 'base64url')).toHaveLength(64);
    expect(stored).not.toContain('correct horse');
    expect(await verifyPassword('correct horse battery staple', stored)).toBe(true);
  });

  it('rejects a wrong password, including near misses', async () => {
    const stored = await hashPassword('s3cret-password');
    expect(await verifyPassword('s3cret-passworD', stored)).toBe(false);
    expect(await verifyPassword('s3cret-password ', stored)).toBe(false);
    expect(await verifyPassword('', stored)).toBe(false);
  });

  it('salts: the same password hashes differently, and both verify', async () => {
    const a = await hashPassword('same-password');
    const b = await hashPassword('same-password');
    expect(a).not.toBe(b);
    expect(await verifyPassword('same-password', a)).toBe(true);
    expect(await verifyPassword('same-password', b)).toBe(true);
  });

  it('normalises Unicode (NFKC) so equivalent spellings verify', async () => {
    const stored = await hashPassword('\uFB01sh-and-chips'); // "ﬁ" ligature
    expect(await verifyPassword('fish-and-chips', stored)).toBe(true);
  });

  it('the dummy hash used for unknown emails matches no ordinary password', async () => {
    expect(DUMMY_PASSWORD_HASH.startsWith('scrypt$')).toBe(true);
    expect(await verifyPassword('', DUMMY_PASSWORD_HASH)).toBe(false);
    expect(await verifyPassword('password', DUMMY_PASSWORD_HASH)).toBe(false);
  });

  it('generatePassword gives distinct, long random passwords', () => {
    const a = generatePassword();
    expect(a).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(generatePassword()).not.toBe(a);
  });
});

describe('verifyPassword with a malformed stored hash answers false (never true, never throws)', () => {
  it.each([
    ['empty', ''],
    ['other scheme', 'bcrypt$2b$10$abcdefghijklmnopqrstuv'],
    ['too few parts', 'scrypt$16384$8$1'],
    ['empty salt and key', 'scrypt$16384$8$1$$'],
    ['empty key', 'scrypt$16384$8$1$c2FsdHNhbHRzYWx0c2FsdA$'],
  ])('%s', async (_label, stored) => {
    expect(await verifyPassword('anything', stored)).toBe(false);
  });

  it('a key part that decodes to zero bytes does not accept every password', async () => {
    // "!!!!" is not base64url: it decodes to an empty buffer.
    await expect(verifyPassword('anything', 'scrypt$16384$8$1$c2FsdHNhbHRzYWx0c2FsdA$!!!!')).resolves.toBe(false);
  });

  it.each([
    ['non-numeric N', 'scrypt$abc$8$1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaA'],
    ['N not a power of two', 'scrypt$3$8$1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaA'],
    ['N beyond the memory limit', 'scrypt$1073741824$8$1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaA'],
  ])('bad parameters (%s) give false instead of throwing', async (_label, stored) => {
    await expect(verifyPassword('anything', stored)).resolves.toBe(false);
  });
});
