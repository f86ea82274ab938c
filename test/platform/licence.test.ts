import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerErrorHandling } from '../../src/http/error-handler.js';
import { requireFeature } from '../../src/http/guards.js';
import { BUILT_IN_LICENSE_PUBLIC_KEY, licenceCovers, readPublicKeyPem, verifyLicence, type Licence } from '../../src/platform/licence.js';
import { BACKENDS, createTestApp } from '../helpers/app.js';
import { licenceKeys, signLicence } from '../helpers/licence.js';

const keys = licenceKeys();
const otherKeys = licenceKeys();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-licence-'));
const keyFile = path.join(tmp, 'licence-public.pem');
fs.writeFileSync(keyFile, keys.publicKeyPem);
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

describe('verifyLicence / licenceCovers', () => {
  it('a valid licence covering aegis: state valid, claims read, aegis covered, other features not', async () => {
    const token = await signLicence(keys.privateKeyPem, { tier: 'enterprise', features: ['aegis', 'browser'], sub: 'Acme Corp' });
    const licence = await verifyLicence(token, keys.publicKeyPem);
    expect(licence.state).toBe('valid');
    expect(licence.error).toBeNull();
    expect(licence.claims).toMatchObject({ tier: 'enterprise', features: ['aegis', 'browser'], sub: 'Acme Corp' });
    expect(licence.claims!.exp).toBeGreaterThan(Date.now() / 1000);
    expect(licenceCovers(licence, 'aegis')).toBe(true);
    expect(licenceCovers(licence, 'browser')).toBe(true);
    expect(licenceCovers(licence, 'analysis')).toBe(false);
    expect(licenceCovers(licence, 'Aegis')).toBe(false);
  });

  it('an expired licence reports expired and covers nothing', async () => {
    const licence = await verifyLicence(await signLicence(keys.privateKeyPem, { expiresInSeconds: -60 }), keys.publicKeyPem);
    expect(licence.state).toBe('expired');
    expect(licence.claims?.features).toEqual(['aegis']);
    expect(licenceCovers(licence, 'aegis')).toBe(false);
  });

  it('a licence that expires while running stops covering at exp', async () => {
    const licence = await verifyLicence(await signLicence(keys.privateKeyPem, { expiresInSeconds: 3600 }), keys.publicKeyPem);
    const expMs = licence.claims!.exp! * 1000;
    expect(licenceCovers(licence, 'aegis', expMs - 1)).toBe(true);
    expect(licenceCovers(licence, 'aegis', expMs)).toBe(false);
    expect(licenceCovers(licence, 'aegis', expMs + 60_000)).toBe(false);
  });

  it('a licence signed by another key is invalid and covers nothing', async () => {
    const licence = await verifyLicence(await signLicence(otherKeys.privateKeyPem, {}), keys.publicKeyPem);
    expect(licence.state).toBe('invalid');
    expect(licence.error).toEqual(expect.any(String));
    expect(licenceCovers(licence, 'aegis')).toBe(false);
  });

  it('our test licence does not verify against the built-in key', async () => {
    const licence = await verifyLicence(await signLicence(keys.privateKeyPem, {}), readPublicKeyPem(undefined));
    expect(licence.state).toBe('invalid');
  });

  it('garbage is invalid with no claims', async () => {
    for (const garbage of ['garbage', 'a.b.c', '']) {
      const licence = await verifyLicence(garbage, keys.publicKeyPem);
      expect(licence.state).toBe('invalid');
      expect(licence.claims).toBeNull();
      expect(licenceCovers(licence, 'aegis')).toBe(false);
    }
  });

  it('an unsigned (alg none) licence and a tampered payload are invalid', async () => {
    const claims = { tier: 'enterprise', features: ['aegis'], sub: 'Mallory', exp: Math.floor(Date.now() / 1000) + 3600 };
    const unsigned = `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`;
    expect((await verifyLicence(unsigned, keys.publicKeyPem)).state).toBe('invalid');
    const [header, , signature] = (await signLicence(keys.privateKeyPem, { features: ['browser'] })).split('.');
    const tampered = await verifyLicence(`${header}.${b64(claims)}.${signature}`, keys.publicKeyPem);
    expect(tampered.state).toBe('invalid');
    expect(licenceCovers(tampered, 'aegis')).toBe(false);
  });

  it('no licence is state none', async () => {
    const licence = await verifyLicence(undefined, keys.publicKeyPem);
    expect(licence).toEqual({ state: 'none', claims: null, error: null });
    expect(licenceCovers(licence, 'aegis')).toBe(false);
  });
});

describe('readPublicKeyPem (WAYGATE_LICENSE_PUBLIC_KEY)', () => {
  it('falls back to the built-in key', () => {
    expect(readPublicKeyPem(undefined)).toBe(BUILT_IN_LICENSE_PUBLIC_KEY);
  });

  it('accepts the PEM text itself, also with escaped \\n as env files carry it', async () => {
    const token = await signLicence(keys.privateKeyPem, {});
    expect((await verifyLicence(token, readPublicKeyPem(keys.publicKeyPem))).state).toBe('valid');
    const oneLine = keys.publicKeyPem.trim().replace(/\n/g, '\\n');
    expect((await verifyLicence(token, readPublicKeyPem(oneLine))).state).toBe('valid');
  });

  it('accepts a path to a PEM file', async () => {
    expect(readPublicKeyPem(keyFile)).toBe(keys.publicKeyPem);
    const token = await signLicence(keys.privateKeyPem, {});
    expect((await verifyLicence(token, readPublicKeyPem(keyFile))).state).toBe('valid');
  });
});

describe('requireFeature guard', () => {
  async function gatedApp(licence: Licence): Promise<FastifyInstance> {
    const app = Fastify();
    registerErrorHandling(app, 1024 * 1024);
    await app.register(async (scope) => {
      requireFeature(scope, licence, 'aegis');
      scope.get('/gated', async () => ({ ok: true }));
    });
    app.get('/open', async () => ({ open: true }));
    await app.ready();
    return app;
  }

  async function expectDenied(licence: Licence): Promise<void> {
    const app = await gatedApp(licence);
    try {
      const res = await app.inject({ method: 'GET', url: '/gated' });
      expect(res.statusCode).toBe(403);
      const body = res.json();
      expect(Object.keys(body)).toEqual(['error']);
      expect(body.error).toMatchObject({ type: 'permission_error', code: 'feature_not_licensed' });
      expect(body.error.message).toContain('aegis');
      const open = await app.inject({ method: 'GET', url: '/open' });
      expect(open.statusCode).toBe(200);
    } finally {
      await app.close();
    }
  }

  it('200 when the licence covers the feature', async () => {
    const licence = await verifyLicence(await signLicence(keys.privateKeyPem, { features: ['aegis'] }), keys.publicKeyPem);
    const app = await gatedApp(licence);
    try {
      const res = await app.inject({ method: 'GET', url: '/gated' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ ok: true });
    } finally {
      await app.close();
    }
  });

  it('403 feature_not_licensed without a licence', async () => {
    await expectDenied(await verifyLicence(undefined, keys.publicKeyPem));
  });

  it('403 when the licence lists other features only', async () => {
    await expectDenied(await verifyLicence(await signLicence(keys.privateKeyPem, { features: ['browser'] }), keys.publicKeyPem));
  });

  it('403 for an expired licence', async () => {
    await expectDenied(await verifyLicence(await signLicence(keys.privateKeyPem, { expiresInSeconds: -1 }), keys.publicKeyPem));
  });

  it('403 for a licence signed by another key', async () => {
    await expectDenied(await verifyLicence(await signLicence(otherKeys.privateKeyPem, {}), keys.publicKeyPem));
  });

  it('403 once a licence verified as valid at start has passed its exp (checked per request)', async () => {
    const exp = Math.floor(Date.now() / 1000) - 1;
    await expectDenied({ state: 'valid', claims: { tier: 'enterprise', features: ['aegis'], sub: 'Acme', exp, nbf: null }, error: null });
  });
});

describe.each(BACKENDS)('licence from the environment on %s', (backend) => {
  let token: string;
  beforeAll(async () => {
    token = await signLicence(keys.privateKeyPem, { tier: 'enterprise', features: ['aegis'], sub: 'Env Corp' });
  });

  it.each([
    ['PEM text', () => keys.publicKeyPem],
    ['file path', () => keyFile],
  ])('WAYGATE_LICENSE + WAYGATE_LICENSE_PUBLIC_KEY as %s gives a valid context licence', async (_label, publicKey) => {
    const t = await createTestApp({ backend, env: { WAYGATE_LICENSE: token, WAYGATE_LICENSE_PUBLIC_KEY: publicKey() } });
    try {
      expect(t.ctx.licence.state).toBe('valid');
      expect(t.ctx.licence.claims?.sub).toBe('Env Corp');
      expect(licenceCovers(t.ctx.licence, 'aegis')).toBe(true);
    } finally {
      await t.close();
    }
  });

  it('a licence that does not verify still starts the service, with state invalid', async () => {
    const t = await createTestApp({ backend, env: { WAYGATE_LICENSE: token } });
    try {
      expect(t.ctx.licence.state).toBe('invalid');
      expect(licenceCovers(t.ctx.licence, 'aegis')).toBe(false);
      expect((await t.app.inject({ method: 'GET', url: '/api/health/ready' })).statusCode).toBe(200);
    } finally {
      await t.close();
    }
  });
});
