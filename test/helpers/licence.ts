import { generateKeyPairSync } from 'node:crypto';
import { SignJWT, importPKCS8 } from 'jose';

/** A licensing key pair of the test's own: the public PEM goes to WAYGATE_LICENSE_PUBLIC_KEY. */
export function licenceKeys(): { publicKeyPem: string; privateKeyPem: string } {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return {
    publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

export async function signLicence(
  privateKeyPem: string,
  claims: { tier?: string; features?: string[]; sub?: string; expiresInSeconds?: number },
): Promise<string> {
  const key = await importPKCS8(privateKeyPem, 'EdDSA');
  const jwt = new SignJWT({ tier: claims.tier ?? 'enterprise', features: claims.features ?? ['aegis'] })
    .setProtectedHeader({ alg: 'EdDSA' })
    .setSubject(claims.sub ?? 'Acme Corp')
    .setIssuedAt();
  jwt.setExpirationTime(Math.floor(Date.now() / 1000) + (claims.expiresInSeconds ?? 3600));
  return jwt.sign(key);
}
