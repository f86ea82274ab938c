import { randomBytes } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
const ALPHABET_CODES = Buffer.from(ALPHABET, 'latin1');

/**
 * CSPRNG bytes are drawn in blocks: one system call per block instead of one per id (ids are made per request).
 * Each block is turned into base32 characters as it is drawn, so that an id's random part is one slice of it.
 */
const POOL_SIZE = 4096;
let pool = base32Block(POOL_SIZE);
let offset = 0;

/** `length` CSPRNG bytes, each turned into the base32 character of its low 5 bits. */
function base32Block(length: number): Buffer {
  const bytes = randomBytes(length);
  for (let i = 0; i < length; i++) bytes[i] = ALPHABET_CODES[bytes[i]! & 31]!;
  return bytes;
}

/** Random base32 text of `length` characters (5 bits each, from the CSPRNG). */
export function randomBase32(length: number): string {
  if (length > POOL_SIZE) return base32Block(length).toString('latin1');
  if (offset + length > POOL_SIZE) {
    pool = base32Block(POOL_SIZE);
    offset = 0;
  }
  const out = pool.toString('latin1', offset, offset + length);
  offset += length;
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

const BASE36 = '0123456789abcdefghijklmnopqrstuvwxyz';
/** 36³ ms (about 47 s): the clock's last three base-36 digits are worked out per id, the six before them kept. */
const LOW_SPAN = 36 ** 3;
let highPart = -1;
let highText = '';

/** The clock in 9 base-36 digits: a double's toString(36) goes through V8's slow runtime path. */
function clockText(ms: number): string {
  const high = Math.floor(ms / LOW_SPAN);
  if (high !== highPart) {
    highPart = high;
    highText = high.toString(36).padStart(6, '0');
  }
  const low = ms - high * LOW_SPAN;
  return highText + BASE36[Math.floor(low / 36 ** 2)]! + BASE36[Math.floor(low / 36) % 36]! + BASE36[low % 36]!;
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
