import fs from 'node:fs';
import { decodeJwt, importSPKI, jwtVerify } from 'jose';

/**
 * The public half of the Waygate licensing key. The private half never lives in this repository;
 * deployments with their own licensing authority pass WAYGATE_LICENSE_PUBLIC_KEY instead.
 */
export const BUILT_IN_LICENSE_PUBLIC_KEY = `-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEASdC6y3K90+AmgBFtfnID+skE3Mmlhqf8Rb6TgjXgzWc=
-----END PUBLIC KEY-----`;

export interface LicenceClaims {
  tier: string;
  features: string[];
  sub: string | null;
  /** Unix seconds, or null for a licence that never expires. */
  exp: number | null;
}

export interface Licence {
  /** `none` when no licence is configured, `invalid` when it fails verification. */
  state: 'valid' | 'expired' | 'invalid' | 'none';
  claims: LicenceClaims | null;
  error: string | null;
}

/** The key is PEM text itself or a path to a PEM file. */
export function readPublicKeyPem(value: string | undefined): string {
  if (value === undefined) return BUILT_IN_LICENSE_PUBLIC_KEY;
  if (value.includes('-----BEGIN')) return value.replace(/\\n/g, '\n');
  return fs.readFileSync(value, 'utf8');
}

function claimsOf(payload: Record<string, unknown>): LicenceClaims {
  const features = Array.isArray(payload.features) ? payload.features.filter((f): f is string => typeof f === 'string') : [];
  return {
    tier: typeof payload.tier === 'string' ? payload.tier : 'community',
    features,
    sub: typeof payload.sub === 'string' ? payload.sub : null,
    exp: typeof payload.exp === 'number' ? payload.exp : null,
  };
}

/** Verifies an EdDSA-signed licence JWT. Expiry is judged again on every use, see `licenceCovers`. */
export async function verifyLicence(token: string | undefined, publicKeyPem: string): Promise<Licence> {
  if (token === undefined) return { state: 'none', claims: null, error: null };
  try {
    const key = await importSPKI(publicKeyPem, 'EdDSA');
    // Expiry is checked by licenceCovers so an expired licence is reported as such rather than as invalid.
    const { payload } = await jwtVerify(token, key, { algorithms: ['EdDSA'], currentDate: new Date(0) });
    const claims = claimsOf(payload);
    const expired = claims.exp !== null && claims.exp * 1000 <= Date.now();
    return { state: expired ? 'expired' : 'valid', claims, error: expired ? 'licence has expired' : null };
  } catch (err) {
    let claims: LicenceClaims | null = null;
    try {
      claims = claimsOf(decodeJwt(token));
    } catch {
      // not even a JWT
    }
    return { state: 'invalid', claims, error: err instanceof Error ? err.message : String(err) };
  }
}

/** True when a verified, unexpired licence lists the feature. */
export function licenceCovers(licence: Licence, feature: string, now = Date.now()): boolean {
  if (licence.state !== 'valid' && licence.state !== 'expired') return false;
  const claims = licence.claims!;
  if (claims.exp !== null && claims.exp * 1000 <= now) return false;
  return claims.features.includes(feature);
}
