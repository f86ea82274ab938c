import { randomBytes } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

/** CSPRNG bytes are drawn in blocks: one system call per block instead of one per id (ids are made per request). */
const POOL_SIZE = 4096;
let pool = randomBytes(POOL_SIZE);
let offset = 0;

/** Random base32 text of `length` characters (5 bits each, from the CSPRNG). */
export function randomBase32(length: number): string {
  if (length > POOL_SIZE) return encode(randomBytes(length), 0, length);
  if (offset + length > POOL_SIZE) {
    pool = randomBytes(POOL_SIZE);
    offset = 0;
  }
  const out = encode(pool, offset, length);
  offset += length;
  return out;
}

function encode(bytes: Buffer, start: number, length: number): string {
  let out = '';
  for (let i = start; i < start + length; i++) out += ALPHABET[bytes[i]! & 31];
  return out;
}

/** A resource id: a type prefix and 24 random base32 characters (120 bits), e.g. `tok_...`. */
export function newId(prefix: string): string {
  return `${prefix}_${randomBase32(24)}`;
}

/**
 * A resource id whose text sorts by creation time: 9 base-36 characters of the millisecond clock (ASCII order is
 * numeric order until the year 5188), then 15 random base32 characters (75 bits). For rows written thousands of
 * times a second: new keys land at the end of the primary-key index instead of on random pages, which makes
 * inserts about twice as cheap.
 */
export function timeOrderedId(prefix: string, now = Date.now()): string {
  return `${prefix}_${clockText(now)}${randomBase32(15)}`;
}

/** The last millisecond's base-36 text: ids are made several times a millisecond, and a double's toString(36) is slow. */
let lastClock = { ms: -1, text: '' };

function clockText(ms: number): string {
  if (ms !== lastClock.ms) lastClock = { ms, text: ms.toString(36).padStart(9, '0') };
  return lastClock.text;
}

/** Lower-case URL-friendly key from a display name; empty names give an empty string. */
export function slugify(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 48)
    .replace(/-+$/, '');
}
