import { SignJWT, importPKCS8 } from 'jose';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { licenceCovers, verifyLicence } from '../../src/platform/licence.js';
import { licenceKeys } from '../helpers/licence.js';

const keys = licenceKeys();
const now = () => Math.floor(Date.now() / 1000);

async function sign(claims: Record<string, unknown>): Promise<string> {
  const key = await importPKCS8(keys.privateKeyPem, 'EdDSA');
  return new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA' }).sign(key);
}

describe('licence claims', () => {
  it('accepts a licence with a past not-before time and reports its claims', async () => {
    const licence = await verifyLicence(await sign({ tier: 'enterprise', features: ['aegis'], sub: 'Acme', exp: now() + 3600, nbf: now() - 60 }), keys.publicKeyPem);
    expect(licence).toMatchObject({ state: 'valid', claims: { tier: 'enterprise', features: ['aegis'], sub: 'Acme' } });
    expect(licenceCovers(licence, 'aegis')).toBe(true);
  });

  it('a licence that is not valid yet covers nothing until its nbf, then covers without a restart', async () => {
    const nbf = now() + 3600;
    const licence = await verifyLicence(await sign({ tier: 'enterprise', features: ['aegis'], exp: now() + 7200, nbf }), keys.publicKeyPem);
    expect(licence.state).toBe('not_yet_valid');
    expect(licenceCovers(licence, 'aegis')).toBe(false);
    expect(licenceCovers(licence, 'aegis', nbf * 1000 + 1)).toBe(true);
    expect(licenceCovers(licence, 'aegis', (nbf + 3601) * 1000)).toBe(false);
  });

  it.each([
    ['no exp', { tier: 'enterprise', features: ['aegis'] }, 'exp'],
    ['no tier', { features: ['aegis'], exp: 0 }, 'tier'],
    ['features not a list', { tier: 'enterprise', features: 'aegis', exp: 0 }, 'features'],
    ['a feature that is not text', { tier: 'enterprise', features: ['aegis', 7], exp: 0 }, 'features'],
  ])('refuses a licence with %s', async (_label, claims: Record<string, unknown>, named) => {
    const withExp = claims.exp === 0 ? { ...claims, exp: now() + 3600 } : claims;
    const licence = await verifyLicence(await sign(withExp), keys.publicKeyPem);
    expect(licence.state).toBe('invalid');
    expect(licence.claims).toBeNull();
    expect(licence.error).toContain(named);
  });

  it('reports an expired licence as expired, with its authentic claims, covering nothing', async () => {
    const licence = await verifyLicence(await sign({ tier: 'enterprise', features: ['aegis'], sub: 'Acme', exp: now() - 10 }), keys.publicKeyPem);
    expect(licence).toMatchObject({ state: 'expired', claims: { sub: 'Acme' } });
    expect(licenceCovers(licence, 'aegis')).toBe(false);
  });

  it('an unreadable key path is a configuration error naming the variable, but only when there is a licence', async () => {
    const token = await sign({ tier: 'enterprise', features: ['aegis'], exp: now() + 60 });
    await expect(verifyLicence(token, '/nonexistent/licence.pem')).rejects.toThrow(ConfigError);
    await expect(verifyLicence(token, '/nonexistent/licence.pem')).rejects.toThrow(/WAYGATE_LICENSE_PUBLIC_KEY/);
    expect((await verifyLicence(undefined, '/nonexistent/licence.pem')).state).toBe('none');
  });
});
