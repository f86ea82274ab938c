import fs from 'node:fs';
import { errors, importSPKI, jwtVerify, type JWTPayload } from 'jose';
import { ConfigError } from '../config.js';

/**
 * The public half of the Waygate licensing key. The private half never lives in this repository;
 * deployments with their own licensing authority pass WAYGATE_LICENSE_PUBLIC_KEY instead.
 */
export const BUILT_IN_LICENSE_PUBLIC_KEY = `-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEASdC6y3K90+AmgBFtfnID+skE3Mmlhqf8Rb6TgjXgzWc=
-----END PUBLIC KEY-----`;

/** Clock skew forgiven on nbf (a licence issued "early" by a fast clock); expiry is exact. */
const NBF_TOLERANCE_SECONDS = 60;

export interface LicenceClaims {
  tier: string;
  features: string[];
  sub: string | null;
  /** Unix seconds, or null for a licence that never expires. */
  exp: number | null;
  /** Unix seconds before which the licence does not apply yet, or null. */
  nbf: number | null;
}

export interface Licence {
  /**
   * As of start-up: `none` without a licence, `invalid` when it fails verification (then `claims` is null),
   * `not_yet_valid` before its nbf. Coverage is judged again on every use (`licenceCovers`).
   */
  state: 'valid' | 'expired' | 'not_yet_valid' | 'invalid' | 'none';
  claims: LicenceClaims | null;
  error: string | null;
}

/** The key is PEM text itself or a path to a PEM file; an unreadable path is a configuration error. */
export function readPublicKeyPem(value: string | undefined): string {
  if (value === undefined) return BUILT_IN_LICENSE_PUBLIC_KEY;
  if (value.includes('-----BEGIN')) return value.replace(/\\n/g, '\n');
  try {
    return fs.readFileSync(value, 'utf8');
  } catch (err) {
    throw new ConfigError('WAYGATE_LICENSE_PUBLIC_KEY', `names a file that cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

/** The licence's own claims, or a reason why they are not a licence: `tier`, `features` and `exp` are required. */
function claimsOf(payload: JWTPayload): LicenceClaims | string {
  if (typeof payload.tier !== 'string' || payload.tier === '') return 'licence has no tier claim';
  if (!Array.isArray(payload.features) || !payload.features.every((f) => typeof f === 'string')) {
    return 'licence features claim must be an array of strings';
  }
  if (typeof payload.exp !== 'number') return 'licence has no exp claim';
  return {
    tier: payload.tier,
    features: payload.features as string[],
    sub: typeof payload.sub === 'string' ? payload.sub : null,
    exp: payload.exp,
    nbf: typeof payload.nbf === 'number' ? payload.nbf : null,
  };
}

/**
 * Verifies an EdDSA-signed licence JWT against the real clock (exp and nbf); expiry is judged again on every use.
 * `publicKey` is WAYGATE_LICENSE_PUBLIC_KEY (PEM text or a path; the built-in key when undefined), read only when
 * there is a licence to verify.
 */
export async function verifyLicence(token: string | undefined, publicKey: string | undefined): Promise<Licence> {
  if (token === undefined) return { state: 'none', claims: null, error: null };
  const publicKeyPem = readPublicKeyPem(publicKey);
  try {
    const key = await importSPKI(publicKeyPem, 'EdDSA');
    const { payload } = await jwtVerify(token, key, { algorithms: ['EdDSA'] });
    const claims = claimsOf(payload);
    return typeof claims === 'string' ? { state: 'invalid', claims: null, error: claims } : { state: 'valid', claims, error: null };
  } catch (err) {
    // jose checks the signature before the time claims, so these licences' claims are authentic.
    if (err instanceof errors.JWTExpired) {
      const claims = claimsOf(err.payload);
      if (typeof claims !== 'string') return { state: 'expired', claims, error: 'licence has expired' };
    }
    if (err instanceof errors.JWTClaimValidationFailed && err.claim === 'nbf') {
      const claims = claimsOf(err.payload);
      if (typeof claims !== 'string') return { state: 'not_yet_valid', claims, error: 'licence is not valid yet' };
    }
    return { state: 'invalid', claims: null, error: err instanceof Error ? err.message : String(err) };
  }
}

/** True when a verified licence in force at `now` (between nbf and exp) lists the feature. */
export function licenceCovers(licence: Licence, feature: string, now = Date.now()): boolean {
  if (licence.state === 'invalid' || licence.state === 'none' || !licence.claims) return false;
  const { exp, nbf, features } = licence.claims;
  if (exp !== null && exp * 1000 <= now) return false;
  if (nbf !== null && nbf * 1000 - NBF_TOLERANCE_SECONDS * 1000 > now) return false;
  return features.includes(feature);
}
