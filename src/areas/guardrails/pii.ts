import { createHash } from 'node:crypto';
import type { Span } from './types.js';

/**
 * PII detection: 15 categories, pure functions over the normalised text (see normalize.ts; the caller normalises).
 *
 * Design, for speed and safety (scanning is linear in the text; see test/guardrails/pii-fuzz.test.ts):
 * - Regular expressions find candidates and code validates them (checksums, ranges, context). Every expression is
 *   linear: a lookbehind anchors it to the start of a run so it is not retried inside the run, repetitions are
 *   bounded or run over one class followed by a disjoint one, and no quantified group can match the same text two
 *   ways. Expressions over whole tokens are anchored; trimming is done in code.
 * - Where a literal marks the spot, code walks outwards from it instead of a regex: emails and handles from each '@',
 *   URLs from each '://' or 'www.', IPv6 from each ':', IBANs from a country code. Secrets and wallets come from runs
 *   of 20+ token characters found by probing every 20th character.
 * - Cheap pre-checks skip whole detectors (no '@': no email; no digit: no numeric detector; ...), and context words
 *   are only looked up in a short window before a candidate that needs them.
 * - One pass over the text's code units (indexText) finds the runs of digits, the words that may start a keyword or a
 *   street type, and runs of capitals. The number, keyword, SWIFT and street patterns are then tried (sticky) only
 *   where they can start, left to right without overlaps exactly as a global search would find them, instead of each
 *   scanning the whole text; the simplest (card, phone, IBAN start) are followed in code.
 * - Categories that are ambiguous without context only match near a keyword: passport numbers, dates of birth,
 *   all-letter SWIFT/BIC codes, AWS secret keys, bare (unformatted) phone numbers, and the national ids whose check
 *   digit alone is too weak (Dutch BSN, Polish PESEL, a bare Brazilian CPF, Indian Aadhaar).
 * - Overlaps: the longer span wins (an email inside a URL, digits inside an IBAN); on equal length the more specific
 *   category wins (checksum-validated first, generic high-entropy tokens last). `enabled` filters before overlaps are
 *   resolved, so a key inside a URL is still found when only api_key is on.
 */

export const PII_CATEGORIES = [
  'email',
  'phone',
  'credit_card',
  'iban',
  'swift_bic',
  'us_ssn',
  'national_id',
  'passport',
  'date_of_birth',
  'street_address',
  'ip_address',
  'url',
  'social_handle',
  'api_key',
  'crypto_wallet',
] as const;

export type PiiCategory = (typeof PII_CATEGORIES)[number];

/** Categories whose findings are confirmed by a checksum (Luhn, mod-97, national check digits, base58check/bech32/EIP-55). */
export const CHECKSUM_CATEGORIES = ['credit_card', 'iban', 'national_id', 'crypto_wallet'] as const satisfies readonly PiiCategory[];

const ALL_CATEGORIES: ReadonlySet<PiiCategory> = new Set(PII_CATEGORIES);

interface Candidate {
  category: PiiCategory;
  start: number;
  end: number;
  /** Tie-break on equal length: lower wins. */
  priority: number;
}

const PRIORITY: Record<PiiCategory, number> = {
  crypto_wallet: 0,
  credit_card: 1,
  iban: 2,
  national_id: 3,
  us_ssn: 4,
  api_key: 5,
  email: 6,
  social_handle: 7,
  url: 8,
  ip_address: 9,
  swift_bic: 10,
  passport: 11,
  date_of_birth: 12,
  phone: 13,
  street_address: 14,
};
/** Generic high-entropy tokens lose every tie. */
const GENERIC_TOKEN_PRIORITY = 20;

// ---------------------------------------------------------------------------------------------------------------
// Character helpers

const NON_ASCII_WORD = /[\p{L}\p{N}\p{M}]/u;

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

function isAsciiAlnum(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
}

/** A letter, digit or underscore, Unicode-aware (false outside the text). */
function isWordAt(text: string, i: number): boolean {
  if (i < 0 || i >= text.length) return false;
  const c = text.charCodeAt(i);
  if (c < 128) return isAsciiAlnum(c) || c === 95;
  return NON_ASCII_WORD.test(text.charAt(i));
}

function hasDigit(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (isDigit(text.charCodeAt(i))) return true;
  return false;
}

function digitsOf(s: string): string {
  // Whole runs of digits appended at once (a few concatenations rather than one per digit).
  let out = '';
  let run = -1;
  for (let i = 0; i <= s.length; i++) {
    if (i < s.length && isDigit(s.charCodeAt(i))) {
      if (run === -1) run = i;
    } else if (run !== -1) {
      out += run === 0 && i === s.length ? s : s.slice(run, i);
      run = -1;
    }
  }
  return out;
}

function allSameChar(s: string): boolean {
  for (let i = 1; i < s.length; i++) if (s.charCodeAt(i) !== s.charCodeAt(0)) return false;
  return true;
}

function isValidDate(year: number, month: number, day: number): boolean {
  if (month < 1 || month > 12 || day < 1) return false;
  const days = [31, year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  return day <= (days[month - 1] ?? 0);
}

// ---------------------------------------------------------------------------------------------------------------
// Checksums (exported for tests)

export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return false;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return digits.length > 0 && sum % 10 === 0;
}

/** Known issuer prefixes and the lengths each issues. */
function cardIssuerKnown(d: string): boolean {
  const n = d.length;
  const p2 = Number(d.slice(0, 2));
  const p3 = Number(d.slice(0, 3));
  const p4 = Number(d.slice(0, 4));
  if (d.startsWith('4')) return n === 13 || n === 16 || n === 19; // Visa
  if (p2 >= 51 && p2 <= 55) return n === 16; // Mastercard
  if (p4 >= 2221 && p4 <= 2720) return n === 16; // Mastercard 2-series
  if (p4 >= 2200 && p4 <= 2204) return n >= 16 && n <= 19; // Mir
  if (p2 === 34 || p2 === 37) return n === 15; // American Express
  if ((p3 >= 300 && p3 <= 305) || p2 === 36 || p2 === 38 || p2 === 39) return n >= 14 && n <= 19; // Diners
  if (p4 >= 3528 && p4 <= 3589) return n >= 16 && n <= 19; // JCB
  if (p4 === 6011 || (p3 >= 644 && p3 <= 649) || p2 === 65) return n >= 16 && n <= 19; // Discover
  if (p2 === 62) return n >= 16 && n <= 19; // UnionPay
  if (p2 === 50 || (p2 >= 56 && p2 <= 69)) return n >= 13 && n <= 19; // Maestro
  if (p3 === 508 || p2 === 60 || p2 === 81 || p2 === 82) return n === 16; // RuPay
  if (p4 === 9792) return n === 16; // Troy
  return false;
}

/** IBAN length per country (SWIFT IBAN registry). */
const IBAN_LENGTHS: Record<string, number> = {
  AD: 24, AE: 23, AL: 28, AT: 20, AZ: 28, BA: 20, BE: 16, BG: 22, BH: 22, BI: 27, BR: 29, BY: 28, CH: 21, CR: 22,
  CY: 28, CZ: 24, DE: 22, DJ: 27, DK: 18, DO: 28, EE: 20, EG: 29, ES: 24, FI: 18, FK: 18, FO: 18, FR: 27, GB: 22,
  GE: 22, GI: 23, GL: 18, GR: 27, GT: 28, HR: 21, HU: 28, IE: 22, IL: 23, IQ: 23, IS: 26, IT: 27, JO: 30, KW: 30,
  KZ: 20, LB: 28, LC: 32, LI: 21, LT: 20, LU: 20, LV: 21, LY: 25, MC: 27, MD: 24, ME: 22, MK: 19, MN: 20, MR: 27,
  MT: 31, MU: 30, NI: 28, NL: 18, NO: 15, OM: 23, PK: 24, PL: 28, PS: 29, PT: 25, QA: 29, RO: 24, RS: 22, RU: 33,
  SA: 24, SC: 31, SD: 18, SE: 24, SI: 19, SK: 24, SM: 27, SO: 23, ST: 25, SV: 28, TL: 23, TN: 24, TR: 26, UA: 29,
  VA: 22, VG: 24, XK: 20, YE: 30,
};

/** `iban` without spaces, upper-case. */
export function ibanValid(iban: string): boolean {
  if (IBAN_LENGTHS[iban.slice(0, 2)] !== iban.length) return false;
  const rearranged = iban.slice(4) + iban.slice(0, 4);
  let rem = 0;
  for (let i = 0; i < rearranged.length; i++) {
    const c = rearranged.charCodeAt(i);
    if (c >= 48 && c <= 57) rem = (rem * 10 + (c - 48)) % 97;
    else if (c >= 65 && c <= 90) rem = (rem * 100 + (c - 55)) % 97;
    else return false;
  }
  return rem === 1;
}

/** ISO 3166-1 alpha-2 (plus XK, which SWIFT uses for Kosovo). */
const ISO_COUNTRIES = new Set(
  ('AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ ' +
    'CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO ' +
    'FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE ' +
    'JM JO JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO ' +
    'MP MQ MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW ' +
    'PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM ' +
    'TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS XK YE YT ZA ZM ZW').split(' '),
);

function digitAt(s: string, i: number): number {
  return s.charCodeAt(i) - 48;
}

export function tcknValid(d: string): boolean {
  if (!/^[1-9]\d{10}$/.test(d)) return false;
  const odd = digitAt(d, 0) + digitAt(d, 2) + digitAt(d, 4) + digitAt(d, 6) + digitAt(d, 8);
  const even = digitAt(d, 1) + digitAt(d, 3) + digitAt(d, 5) + digitAt(d, 7);
  if ((((odd * 7 - even) % 10) + 10) % 10 !== digitAt(d, 9)) return false;
  return (odd + even + digitAt(d, 9)) % 10 === digitAt(d, 10);
}

export function cpfValid(d: string): boolean {
  if (!/^\d{11}$/.test(d) || allSameChar(d)) return false;
  for (let len = 9; len <= 10; len++) {
    let sum = 0;
    for (let i = 0; i < len; i++) sum += digitAt(d, i) * (len + 1 - i);
    if (((sum * 10) % 11) % 10 !== digitAt(d, len)) return false;
  }
  return true;
}

const DNI_LETTERS = 'TRWAGMYFPDXBNJZSQVHLCKE';

/** Spanish DNI (8 digits + letter) or NIE (X/Y/Z + 7 digits + letter), without separators. */
export function dniNieValid(id: string): boolean {
  const m = /^(?:(\d{8})|([XYZ])(\d{7}))([A-Z])$/.exec(id);
  if (!m) return false;
  const value = m[1] !== undefined ? Number(m[1]) : Number(`${'XYZ'.indexOf(m[2] ?? '')}${m[3] ?? ''}`);
  return DNI_LETTERS.charAt(value % 23) === m[4];
}

const CN_WEIGHTS = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];

/** Chinese resident identity card: 17 digits + check (ISO 7064 MOD 11-2), with a plausible birth date. */
export function chineseIdValid(id: string): boolean {
  if (!/^[1-9]\d{16}[\dX]$/.test(id)) return false;
  if (!isValidDate(Number(id.slice(6, 10)), Number(id.slice(10, 12)), Number(id.slice(12, 14)))) return false;
  const year = Number(id.slice(6, 10));
  if (year < 1900 || year > 2100) return false;
  let sum = 0;
  for (let i = 0; i < 17; i++) sum += (id.charCodeAt(i) - 48) * (CN_WEIGHTS[i] ?? 0);
  return '10X98765432'.charAt(sum % 11) === id.charAt(17);
}

const HETU_CHECK = '0123456789ABCDEFHJKLMNPRSTUVWXY';

/** Finnish henkilötunnus DDMMYYCNNNX. */
export function hetuValid(id: string): boolean {
  const m = /^(\d{2})(\d{2})(\d{2})([-+A-FU-Y])(\d{3})([0-9A-Y])$/.exec(id);
  if (!m) return false;
  const sign = m[4] ?? '';
  const century = sign === '+' ? 1800 : 'ABCDEF'.includes(sign) ? 2000 : 1900;
  if (!isValidDate(century + Number(m[3]), Number(m[2]), Number(m[1]))) return false;
  return HETU_CHECK.charAt(Number(`${m[1]}${m[2]}${m[3]}${m[5]}`) % 31) === m[6];
}

/** Swedish personnummer (YY)YYMMDD-NNNC: Luhn over the last 10 digits, with a plausible date (day + 60 allowed). */
export function personnummerValid(id: string): boolean {
  const d = digitsOf(id);
  const ten = d.length === 12 ? d.slice(2) : d;
  if (ten.length !== 10) return false;
  const month = Number(ten.slice(2, 4));
  let day = Number(ten.slice(4, 6));
  if (day > 60) day -= 60;
  if (!isValidDate(2000 + Number(ten.slice(0, 2)), month, day)) return false;
  return luhnValid(ten);
}

/** Dutch BSN 11-proof. */
export function bsnValid(d: string): boolean {
  if (!/^\d{9}$/.test(d) || allSameChar(d)) return false;
  let sum = 0;
  for (let i = 0; i < 8; i++) sum += (d.charCodeAt(i) - 48) * (9 - i);
  sum -= d.charCodeAt(8) - 48;
  return sum % 11 === 0;
}

/** Polish PESEL: weights 1,3,7,9 and a valid encoded birth date. */
export function peselValid(d: string): boolean {
  if (!/^\d{11}$/.test(d)) return false;
  const weights = [1, 3, 7, 9, 1, 3, 7, 9, 1, 3];
  let sum = 0;
  for (let i = 0; i < 10; i++) sum += (d.charCodeAt(i) - 48) * (weights[i] ?? 0);
  if ((10 - (sum % 10)) % 10 !== d.charCodeAt(10) - 48) return false;
  let month = Number(d.slice(2, 4));
  let century = 1900;
  if (month > 80) [century, month] = [1800, month - 80];
  else if (month > 60) [century, month] = [2200, month - 60];
  else if (month > 40) [century, month] = [2100, month - 40];
  else if (month > 20) [century, month] = [2000, month - 20];
  return isValidDate(century + Number(d.slice(0, 2)), month, Number(d.slice(4, 6)));
}

const VERHOEFF_D = [
  [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 0, 6, 7, 8, 9, 5], [2, 3, 4, 0, 1, 7, 8, 9, 5, 6],
  [3, 4, 0, 1, 2, 8, 9, 5, 6, 7], [4, 0, 1, 2, 3, 9, 5, 6, 7, 8], [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
  [6, 5, 9, 8, 7, 1, 0, 4, 3, 2], [7, 6, 5, 9, 8, 2, 1, 0, 4, 3], [8, 7, 6, 5, 9, 3, 2, 1, 0, 4],
  [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
];
const VERHOEFF_P = [
  [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 5, 7, 6, 2, 8, 3, 0, 9, 4], [5, 8, 0, 3, 7, 9, 6, 1, 4, 2],
  [8, 9, 1, 6, 0, 4, 3, 5, 2, 7], [9, 4, 5, 3, 1, 2, 7, 6, 0, 8], [4, 2, 8, 6, 5, 7, 3, 9, 0, 1],
  [2, 7, 9, 3, 8, 0, 6, 4, 1, 5], [7, 0, 4, 6, 9, 1, 3, 2, 5, 8],
];

/** Indian Aadhaar: 12 digits, first 2-9, Verhoeff check digit. */
export function aadhaarValid(d: string): boolean {
  if (!/^[2-9]\d{11}$/.test(d)) return false;
  let c = 0;
  for (let i = 0; i < d.length; i++) {
    const digit = d.charCodeAt(d.length - 1 - i) - 48;
    c = VERHOEFF_D[c]?.[VERHOEFF_P[i % 8]?.[digit] ?? 0] ?? 0;
  }
  return c === 0;
}

const CF_ODD: Record<string, number> = {
  '0': 1, '1': 0, '2': 5, '3': 7, '4': 9, '5': 13, '6': 15, '7': 17, '8': 19, '9': 21,
  A: 1, B: 0, C: 5, D: 7, E: 9, F: 13, G: 15, H: 17, I: 19, J: 21, K: 2, L: 4, M: 18, N: 20, O: 11, P: 3, Q: 6,
  R: 8, S: 12, T: 14, U: 16, V: 10, W: 22, X: 25, Y: 24, Z: 23,
};

/** Italian codice fiscale: 16 characters, the last a check letter. */
export function codiceFiscaleValid(cf: string): boolean {
  if (!/^[A-Z]{6}\d{2}[A-EHLMPR-T]\d{2}[A-Z]\d{3}[A-Z]$/.test(cf)) return false;
  let sum = 0;
  for (let i = 0; i < 15; i++) {
    const ch = cf.charAt(i);
    if (i % 2 === 0) sum += CF_ODD[ch] ?? 0;
    else sum += isDigit(ch.charCodeAt(0)) ? ch.charCodeAt(0) - 48 : ch.charCodeAt(0) - 65;
  }
  return String.fromCharCode(65 + (sum % 26)) === cf.charAt(15);
}

// Crypto wallets ---------------------------------------------------------------------------------------------------

const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const BASE58_INDEX = new Int8Array(128).fill(-1);
for (let i = 0; i < BASE58.length; i++) BASE58_INDEX[BASE58.charCodeAt(i)] = i;

function base58Decode(s: string): Uint8Array | undefined {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const code = s.charCodeAt(i);
    let carry = code < 128 ? (BASE58_INDEX[code] ?? -1) : -1;
    if (carry < 0) return undefined;
    for (let j = 0; j < bytes.length; j++) {
      carry += (bytes[j] ?? 0) * 58;
      bytes[j] = carry & 0xff;
      carry >>= 8;
    }
    while (carry > 0) {
      bytes.push(carry & 0xff);
      carry >>= 8;
    }
  }
  for (let i = 0; i < s.length && s.charCodeAt(i) === 49; i++) bytes.push(0);
  return Uint8Array.from(bytes.reverse());
}

/** Legacy Bitcoin address: base58check, 25 bytes, version 0x00 (P2PKH, "1...") or 0x05 (P2SH, "3..."). */
export function btcBase58Valid(address: string): boolean {
  if (!/^[13][1-9A-HJ-NP-Za-km-z]{25,34}$/.test(address)) return false;
  const bytes = base58Decode(address);
  if (!bytes || bytes.length !== 25) return false;
  const version = bytes[0];
  if ((version !== 0 || address[0] !== '1') && (version !== 5 || address[0] !== '3')) return false;
  const payload = bytes.subarray(0, 21);
  const check = createHash('sha256').update(createHash('sha256').update(payload).digest()).digest();
  for (let i = 0; i < 4; i++) if (check[i] !== bytes[21 + i]) return false;
  return true;
}

const BECH32_CHARSET = 'qpzry9x8gf2tvdw0s3jn54khce6mua7l';
const BECH32_GEN = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];

function bech32Polymod(values: number[]): number {
  let chk = 1;
  for (const v of values) {
    const top = chk >>> 25;
    chk = (((chk & 0x1ffffff) << 5) ^ v) >>> 0;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) chk = (chk ^ (BECH32_GEN[i] ?? 0)) >>> 0;
  }
  return chk;
}

/** Segwit address (BIP-173 bech32 for witness v0, BIP-350 bech32m for v1+), mainnet `bc1` or testnet `tb1`. */
export function bech32AddressValid(address: string): boolean {
  if (address !== address.toLowerCase() && address !== address.toUpperCase()) return false;
  const s = address.toLowerCase();
  if (s.length < 14 || s.length > 90) return false;
  const sep = s.lastIndexOf('1');
  const hrp = s.slice(0, sep);
  if (hrp !== 'bc' && hrp !== 'tb') return false;
  const data: number[] = [];
  for (let i = sep + 1; i < s.length; i++) {
    const v = BECH32_CHARSET.indexOf(s.charAt(i));
    if (v < 0) return false;
    data.push(v);
  }
  if (data.length < 7) return false;
  const expanded: number[] = [];
  for (let i = 0; i < hrp.length; i++) expanded.push(hrp.charCodeAt(i) >> 5);
  expanded.push(0);
  for (let i = 0; i < hrp.length; i++) expanded.push(hrp.charCodeAt(i) & 31);
  const constant = bech32Polymod([...expanded, ...data]);
  const version = data[0] ?? 99;
  if (version > 16) return false;
  const expected = version === 0 ? 1 : 0x2bc830a3;
  if (constant !== expected) return false;
  // Program length in bytes: 2..40, and exactly 20 or 32 for v0.
  const programBits = (data.length - 7) * 5;
  const programBytes = Math.floor(programBits / 8);
  if (programBytes < 2 || programBytes > 40) return false;
  return version !== 0 || programBytes === 20 || programBytes === 32;
}

// Keccak-256 (the pre-standard padding Ethereum uses; Node's sha3-256 pads differently), with each 64-bit lane held
// as two 32-bit halves: [lo, hi] at [2i, 2i + 1].
const KECCAK_RC = [
  0x00000001, 0x00000000, 0x00008082, 0x00000000, 0x0000808a, 0x80000000, 0x80008000, 0x80000000, 0x0000808b, 0x00000000,
  0x80000001, 0x00000000, 0x80008081, 0x80000000, 0x00008009, 0x80000000, 0x0000008a, 0x00000000, 0x00000088, 0x00000000,
  0x80008009, 0x00000000, 0x8000000a, 0x00000000, 0x8000808b, 0x00000000, 0x0000008b, 0x80000000, 0x00008089, 0x80000000,
  0x00008003, 0x80000000, 0x00008002, 0x80000000, 0x00000080, 0x80000000, 0x0000800a, 0x00000000, 0x8000000a, 0x80000000,
  0x80008081, 0x80000000, 0x00008080, 0x80000000, 0x80000001, 0x00000000, 0x80008008, 0x80000000,
];
/** Rotation offsets, indexed [x + 5 * y]. */
const KECCAK_ROT = [0, 1, 62, 28, 27, 36, 44, 6, 55, 20, 3, 10, 43, 25, 39, 41, 45, 15, 21, 8, 18, 2, 61, 56, 14];

/** Where rho+pi moves lane i, and the lanes chi combines with lane i (precomputed: no modulo in the rounds). */
const KECCAK_PI = Array.from({ length: 25 }, (_, i) => (i / 5 | 0) + 5 * ((2 * (i % 5) + 3 * (i / 5 | 0)) % 5));
const KECCAK_CHI1 = Array.from({ length: 25 }, (_, i) => ((i % 5) + 1) % 5 + 5 * (i / 5 | 0));
const KECCAK_CHI2 = Array.from({ length: 25 }, (_, i) => ((i % 5) + 2) % 5 + 5 * (i / 5 | 0));
const KECCAK_C = new Uint32Array(10);
const KECCAK_B = new Uint32Array(50);

function keccakF(s: Uint32Array): void {
  const c = KECCAK_C;
  const b = KECCAK_B;
  for (let round = 0; round < 24; round++) {
    for (let h = 0; h < 10; h++) c[h] = s[h]! ^ s[h + 10]! ^ s[h + 20]! ^ s[h + 30]! ^ s[h + 40]!;
    for (let x = 0; x < 5; x++) {
      const x1 = x === 4 ? 0 : 2 * x + 2;
      const x4 = x === 0 ? 8 : 2 * x - 2;
      const dLo = c[x4]! ^ ((c[x1]! << 1) | (c[x1 + 1]! >>> 31));
      const dHi = c[x4 + 1]! ^ ((c[x1 + 1]! << 1) | (c[x1]! >>> 31));
      for (let k = 2 * x; k < 50; k += 10) {
        s[k] = s[k]! ^ dLo;
        s[k + 1] = s[k + 1]! ^ dHi;
      }
    }
    for (let i = 0; i < 25; i++) {
      const j = 2 * KECCAK_PI[i]!;
      const lo = s[2 * i]!;
      const hi = s[2 * i + 1]!;
      const r = KECCAK_ROT[i]!;
      if (r === 0) {
        b[j] = lo;
        b[j + 1] = hi;
      } else if (r < 32) {
        b[j] = (lo << r) | (hi >>> (32 - r));
        b[j + 1] = (hi << r) | (lo >>> (32 - r));
      } else if (r === 32) {
        b[j] = hi;
        b[j + 1] = lo;
      } else {
        const q = r - 32;
        b[j] = (hi << q) | (lo >>> (32 - q));
        b[j + 1] = (lo << q) | (hi >>> (32 - q));
      }
    }
    for (let i = 0; i < 25; i++) {
      const i1 = 2 * KECCAK_CHI1[i]!;
      const i2 = 2 * KECCAK_CHI2[i]!;
      s[2 * i] = b[2 * i]! ^ (~b[i1]! & b[i2]!);
      s[2 * i + 1] = b[2 * i + 1]! ^ (~b[i1 + 1]! & b[i2 + 1]!);
    }
    s[0] = s[0]! ^ KECCAK_RC[2 * round]!;
    s[1] = s[1]! ^ KECCAK_RC[2 * round + 1]!;
  }
}

/** Keccak-256 of a short message (< 136 bytes, one block), or with `pad = 0x06` SHA3-256 (used to test the permutation). */
export function keccak256(message: Uint8Array, pad = 0x01): Uint8Array {
  const rate = 136;
  if (message.length >= rate) throw new RangeError('keccak256 here hashes single-block messages only');
  const block = new Uint8Array(200);
  block.set(message);
  block[message.length] = (block[message.length] ?? 0) ^ pad;
  block[rate - 1] = (block[rate - 1] ?? 0) ^ 0x80;
  const state = new Uint32Array(50);
  for (let i = 0; i < 50; i++) {
    state[i] = (block[4 * i] ?? 0) | ((block[4 * i + 1] ?? 0) << 8) | ((block[4 * i + 2] ?? 0) << 16) | ((block[4 * i + 3] ?? 0) << 24);
  }
  keccakF(state);
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = (state[i >> 2]! >>> (8 * (i & 3))) & 0xff;
  return out;
}

/** `0x` + 40 hex; when the hex mixes cases it must carry a valid EIP-55 checksum. */
export function ethAddressValid(address: string): boolean {
  if (!/^0x[0-9a-fA-F]{40}$/.test(address)) return false;
  const hex = address.slice(2);
  const lower = hex.toLowerCase();
  if (hex === lower || hex === hex.toUpperCase()) return !allSameChar(lower);
  const hash = keccak256(new TextEncoder().encode(lower));
  for (let i = 0; i < 40; i++) {
    const ch = hex.charAt(i);
    if (ch >= '0' && ch <= '9') continue;
    const nibble = ((hash[i >> 1] ?? 0) >> (i % 2 === 0 ? 4 : 0)) & 0xf;
    if ((nibble >= 8) !== (ch >= 'A' && ch <= 'F')) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// Scan state

/** Keyword kinds found by the one keyword pass (the words that anchor keyword-only categories). */
const KW_PASSPORT = 0;
/** Birth keywords that may also follow the date ("12.03.1985 doğumlu", "am 12.03.1985 geboren"). */
const KW_BIRTH_POSTFIX = 1;
const KW_BIRTH = 2;
const KW_AWS_SECRET = 3;
const KW_SSN = 4;
const KW_NATIONAL = 5;
const KW_KINDS = 6;

/**
 * Every anchoring keyword, case-insensitive, `\b` (ASCII) before it. Passport and birth words may take a suffix
 * ("Reisepassnummer", "doğum tarihim"); the others must end at a word boundary (checked in code). Longer words come
 * first in each group, and the postfix group ("doğumlu") before "doğum". Sticky: tried only at the starts of words
 * that begin like a keyword (KEYWORD_PREFIXES), left to right without overlaps as a global search would.
 */
const KEYWORD_RE = new RegExp(
  '\\b(?:' +
    '(passports?|pasaport|reisepass|passeport|pasaporte|passaporto|paspoort|paszport)' +
    '|(doğumlu|geboren)' +
    '|(date of birth|birth ?date|birthday|dob|d\\.o\\.b\\.?|born|birth|geburtsdatum|geb\\.|n[ée]e? le|n[ée]\\(e\\) le|' +
    'date de naissance|fecha de nacimiento|nacid[oa] el|nacid[oa]|data di nascita|nat[oa] il|geboortedatum|' +
    'doğum tarihi|d\\. ?tarihi|doğum|data de nascimento|nascid[oa] em|nascid[oa])' +
    '|(aws_secret_access_key|aws_secret_key|aws_secret|aws secret(?: access)?(?: key)?|secret access key|secretaccesskey)' +
    '|(ssn|social security(?: number| no\\.?)?|soc\\. ?sec\\.?)' +
    '|(bsn|burgerservicenummer|sofinummer|pesel|cpf|aadhaar|aadhar|uidai)' +
    ')',
  'iy',
);

/**
 * The first three characters of every word KEYWORD_RE matches, lower-case. Without the `u` flag, `i` matches ASCII
 * letters only to ASCII letters, and é/É, ğ/Ğ to each other.
 */
const KEYWORD_PREFIXES = [
  'aad', 'aws', 'bir', 'bor', 'bsn', 'bur', 'cpf', 'd. ', 'd.o', 'd.t', 'dat', 'dob', 'doğ', 'fec', 'geb', 'nac', 'nas',
  'nat', 'ne ', 'ne(', 'nee', 'né ', 'né(', 'née', 'pas', 'pes', 'rei', 'sec', 'soc', 'sof', 'ssn', 'uid',
];
/** Characters of the keyword prefixes, folded to 1-31 (letters to one case); 0 for any other. */
const KEYWORD_FOLD = new Uint8Array(0x120);
for (let c = 0; c < 26; c++) KEYWORD_FOLD[65 + c] = KEYWORD_FOLD[97 + c] = c + 1;
KEYWORD_FOLD[32] = 27; // ' '
KEYWORD_FOLD[46] = 28; // .
KEYWORD_FOLD[40] = 29; // (
KEYWORD_FOLD[0xc9] = KEYWORD_FOLD[0xe9] = 30; // É é
KEYWORD_FOLD[0x11e] = KEYWORD_FOLD[0x11f] = 31; // Ğ ğ
const KEYWORD_PREFIX_SET = new Uint8Array(32 * 32 * 32);
for (const w of KEYWORD_PREFIXES) {
  KEYWORD_PREFIX_SET[KEYWORD_FOLD[w.charCodeAt(0)]! * 1024 + KEYWORD_FOLD[w.charCodeAt(1)]! * 32 + KEYWORD_FOLD[w.charCodeAt(2)]!] = 1;
}

/** Whether a keyword may start at `i` (its first three characters are a KEYWORD_PREFIXES entry, in any case). */
function keywordPrefixAt(codes: Uint16Array, i: number): boolean {
  if (i + 2 >= codes.length) return false;
  const a = codes[i]!;
  const b = codes[i + 1]!;
  const c = codes[i + 2]!;
  if (a >= 0x120 || b >= 0x120 || c >= 0x120) return false;
  return KEYWORD_PREFIX_SET[KEYWORD_FOLD[a]! * 1024 + KEYWORD_FOLD[b]! * 32 + KEYWORD_FOLD[c]!] === 1;
}

/** Context words tested in a short window before a candidate (never a pass over the whole text). */
const PHONE_WORDS =
  /\b(?:phone|telephone|tel|tél|tlf|mobile|mob|cell|cellphone|call|whatsapp|fax|telefon|telefonnummer|téléphone|teléfono|telefono|handy|cep|gsm|portable|numara|sms|text me|reach me|contact|ring)(?![\w\u00C0-\u024F])/i;
const NOT_PHONE_WORDS =
  /\b(?:order|invoice|inv|ticket|tracking|ref|reference|isbn|issn|sku|serial|part|model|case|po|transaction|txn|receipt|batch|account|acct|build|version|ver|release|iban|item|product|shipment|booking|confirmation|id|no|nr)(?![\w\u00C0-\u024F])/i;
const SWIFT_WORDS = /\b(?:swift|bic|bank identifier code)(?![\w\u00C0-\u024F])/i;

function wordsBefore(text: string, pos: number, window: number, re: RegExp): boolean {
  return re.test(text.slice(Math.max(0, pos - window), pos));
}

interface Hits {
  starts: number[];
  ends: number[];
  /** The matched keyword, lower-cased (only kept where the detector needs to tell keywords apart). */
  words: string[];
}

/** Maximal runs of ASCII digits, [starts[k], ends[k]) in order of start. */
interface DigitRuns {
  starts: number[];
  ends: number[];
}

/** For the first character of a word: 1 when a keyword may start with it (either case), 2 when a street type may. */
const WORD_START_FLAGS = new Uint8Array(128);
for (const w of KEYWORD_PREFIXES) {
  WORD_START_FLAGS[w.charCodeAt(0)] = WORD_START_FLAGS[w.toUpperCase().charCodeAt(0)] = 1;
}
/** Street types written before the name (Spanish, Catalan, Italian, Portuguese): see STREET_TYPE_FIRST_RE. */
const STREET_TYPES = ['Calle', 'C/', 'Avenida', 'Avda.', 'Av.', 'Plaza', 'Paseo', 'Carrer', 'Camino', 'Ronda', 'Via', 'Viale', 'Piazza', 'Corso', 'Largo', 'Vicolo', 'Rua', 'Travessa', 'Praça', 'Alameda'];
/** STREET_TYPES by the code of their first character. */
const STREET_TYPES_BY_FIRST: Array<string[] | undefined> = [];
for (const w of STREET_TYPES) {
  const c = w.charCodeAt(0);
  WORD_START_FLAGS[c] = WORD_START_FLAGS[c]! | 2;
  (STREET_TYPES_BY_FIRST[c] ??= []).push(w);
}

function streetTypeAt(codes: Uint16Array, i: number): boolean {
  for (const w of STREET_TYPES_BY_FIRST[codes[i]!] ?? []) if (codesStartWith(codes, i, w)) return true;
  return false;
}

/** What one pass over the text finds for the detectors that start at digits, keywords or capitals. */
interface TextIndex extends DigitRuns {
  /** Starts of ASCII words that begin like a keyword (keywordPrefixAt). */
  keywords: number[];
  /** Starts of runs of 6+ ASCII capitals with no letter or digit before them (SWIFT/BIC candidates). */
  capitals: number[];
  /** Starts of ASCII words that begin with a street type (STREET_TYPES). */
  streetTypes: number[];
}

/** ASCII character classes for indexText (0: not a word character): 1 digit, 2 capital, 3 small letter, 4 underscore. */
const CHAR_CLASS = new Uint8Array(128);
for (let c = 48; c <= 57; c++) CHAR_CLASS[c] = 1;
for (let c = 65; c <= 90; c++) CHAR_CLASS[c] = 2;
for (let c = 97; c <= 122; c++) CHAR_CLASS[c] = 3;
CHAR_CLASS[95] = 4;

/**
 * One pass over the text (the only one most detectors need): walks the runs of ASCII word characters (`\w` without
 * the `u` flag), recording the runs of digits in them, the starts of those that begin like a keyword or a street type
 * (the start of such a run is a `\b`), and runs of 6+ capitals at the start of a run or after an underscore.
 */
function indexText(codes: Uint16Array): TextIndex {
  const starts: number[] = [];
  const ends: number[] = [];
  const keywords: number[] = [];
  const capitals: number[] = [];
  const streetTypes: number[] = [];
  const n = codes.length;
  let i = 0;
  while (i < n) {
    const first = codes[i]!;
    if (first >= 128 || CHAR_CLASS[first] === 0) {
      i++;
      continue;
    }
    // A run of ASCII word characters starts at i (a `\b` when it starts with a letter).
    const flags = WORD_START_FLAGS[first]!;
    if (flags !== 0) {
      if ((flags & 1) !== 0 && keywordPrefixAt(codes, i)) keywords.push(i);
      if ((flags & 2) !== 0 && streetTypeAt(codes, i)) streetTypes.push(i);
    }
    const wordStart = i;
    while (i < n) {
      const c = codes[i]!;
      if (c >= 97 && c <= 122) i++;
      else if (c >= 48 && c <= 57) {
        starts.push(i);
        i++;
        while (i < n && isDigit(codes[i]!)) i++;
        ends.push(i);
      } else if (c >= 65 && c <= 90) {
        if (i === wordStart || codes[i - 1] === 95) {
          const start = i;
          i++;
          while (i < n && isAsciiUpper(codes[i]!)) i++;
          if (i - start >= 6) capitals.push(start);
        } else i++;
      } else if (c === 95) i++;
      else break;
    }
  }
  return { starts, ends, keywords, capitals, streetTypes };
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
/** Texts up to this many characters are copied into one buffer, reused from scan to scan (scans are synchronous). */
const CODE_BUFFER_CHARS = 1 << 20;
let codeBuffer: Buffer | undefined;

/**
 * The UTF-16 code units of `text` as an array: loops that look at every character read it rather than charCodeAt(),
 * which is several times slower on sliced strings. Copied natively.
 */
function charCodes(text: string): Uint16Array {
  const n = text.length;
  let buffer: Buffer;
  if (n <= CODE_BUFFER_CHARS) {
    if (!codeBuffer || codeBuffer.length < 2 * n) codeBuffer = Buffer.allocUnsafeSlow(Math.max(2 * n, 1 << 15));
    buffer = codeBuffer;
  } else buffer = Buffer.allocUnsafeSlow(2 * n);
  if (LITTLE_ENDIAN && buffer.byteOffset % 2 === 0 && buffer.write(text, 0, 'utf16le') === 2 * n) {
    return new Uint16Array(buffer.buffer, buffer.byteOffset, n);
  }
  const codes = new Uint16Array(n);
  for (let i = 0; i < n; i++) codes[i] = text.charCodeAt(i);
  return codes;
}

class Scan {
  readonly candidates: Candidate[] = [];
  private hits: Hits[] | undefined;
  private urls: Array<[number, number]> | undefined;
  private indexed: TextIndex | undefined;
  /** The text's code units (valid during this scan only: the buffer is reused). */
  readonly codes: Uint16Array;

  constructor(
    readonly text: string,
    readonly enabled: ReadonlySet<PiiCategory>,
  ) {
    this.codes = charCodes(text);
  }

  on(category: PiiCategory): boolean {
    return this.enabled.has(category);
  }

  push(category: PiiCategory, start: number, end: number, priority = PRIORITY[category]): void {
    if (end > start && this.enabled.has(category)) this.candidates.push({ category, start, end, priority });
  }

  keywords(kind: number): Hits {
    if (!this.hits) {
      const hits: Hits[] = [];
      for (let k = 0; k < KW_KINDS; k++) hits.push({ starts: [], ends: [], words: [] });
      let from = 0;
      for (const start of this.index().keywords) {
        if (start < from) continue;
        KEYWORD_RE.lastIndex = start;
        const m = KEYWORD_RE.exec(this.text);
        if (!m) continue;
        const end = start + m[0].length;
        from = end;
        let k = 0;
        while (k < KW_KINDS && m[k + 1] === undefined) k++;
        // Passport and birth words take suffixes ("Reisepassnummer", "doğum tarihim"); the others are whole words.
        if (k > KW_BIRTH && isWordAt(this.text, end)) continue;
        const h = hits[k];
        if (!h) continue;
        h.starts.push(start);
        h.ends.push(end);
        h.words.push(k === KW_NATIONAL ? m[0].toLowerCase() : '');
      }
      this.hits = hits;
    }
    return this.hits[kind] ?? { starts: [], ends: [], words: [] };
  }

  /**
   * The runs of digits (computed once). Every number-shaped pattern starts at or just before the first digit of a run
   * (its lookbehind rules out a digit before it), so the detectors try their pattern (sticky) only at the runs whose
   * length and neighbours can fit, instead of running it over the whole text.
   */
  digitRuns(): DigitRuns {
    return this.index();
  }

  /** The digit runs, keyword and capital-run candidates (one pass over the text, computed once). */
  index(): TextIndex {
    if (!this.indexed) this.indexed = indexText(this.codes);
    return this.indexed;
  }

  /** URL spans (computed once, whether or not the url category is on: generic tokens inside URLs are skipped). */
  urlSpans(): Array<[number, number]> {
    if (!this.urls) this.urls = findUrls(this);
    return this.urls;
  }

  insideUrl(start: number, end: number): boolean {
    const spans = this.urlSpans();
    // Last span starting at or before `start` (spans are sorted and disjoint).
    let lo = 0;
    let hi = spans.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if ((spans[mid]?.[0] ?? 0) <= start) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    const span = spans[found];
    return span !== undefined && end <= span[1];
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Domains, emails, URLs, handles

/** File extensions that are not TLDs: `icon@2x.png`, `logo@3x.webp`. */
const FILE_EXTENSIONS = new Set([
  'png', 'jpg', 'jpeg', 'gif', 'svg', 'webp', 'bmp', 'ico', 'tif', 'tiff', 'js', 'mjs', 'cjs', 'ts', 'tsx', 'jsx',
  'css', 'scss', 'less', 'json', 'yaml', 'yml', 'xml', 'html', 'htm', 'txt', 'csv', 'pdf', 'exe', 'dll', 'java',
  'kt', 'php', 'lock', 'toml', 'ini', 'cfg', 'conf', 'wasm', 'mp3', 'mp4', 'wav', 'ogg', 'log', 'tmp', 'bak',
]);

const DOMAIN_LABEL = /^[\p{L}\p{N}](?:[\p{L}\p{N}-]{0,61}[\p{L}\p{N}])?$/u;
const TLD = /^\p{L}{2,24}$/u;

/** A dotted name of 2+ labels (letters, digits, inner hyphens; 1-63 each) ending in a 2-24 letter TLD or punycode. */
function domainValid(domain: string): boolean {
  const n = domain.length;
  if (n < 4 || n > 253) return false;
  let labelStart = 0;
  let lastLabel = 0;
  let labels = 0;
  let ascii = true;
  for (let i = 0; i <= n; i++) {
    const c = i < n ? domain.charCodeAt(i) : 46;
    if (c === 46) {
      const length = i - labelStart;
      if (length < 1 || length > 63 || domain.charCodeAt(labelStart) === 45 || domain.charCodeAt(i - 1) === 45) return false;
      labels++;
      lastLabel = labelStart;
      labelStart = i + 1;
    } else if (c >= 128) ascii = false;
    else if (!isAsciiAlnum(c) && c !== 45) return false;
  }
  if (labels < 2) return false;
  if (!ascii) for (const label of domain.split('.')) if (!DOMAIN_LABEL.test(label)) return false;
  const tld = domain.slice(lastLabel).toLowerCase();
  if (tld.startsWith('xn--')) return true;
  if (ascii) {
    // TLD (2-24 letters) without the Unicode regex.
    if (tld.length < 2 || tld.length > 24) return false;
    for (let i = 0; i < tld.length; i++) if (!isAsciiLetter(tld.charCodeAt(i))) return false;
    return !FILE_EXTENSIONS.has(tld);
  }
  return TLD.test(tld) && !FILE_EXTENSIONS.has(tld);
}

function isLocalPartChar(text: string, i: number): boolean {
  const c = text.charCodeAt(i);
  if (c < 128) return isAsciiAlnum(c) || c === 46 || c === 95 || c === 37 || c === 43 || c === 45; // . _ % + -
  return NON_ASCII_WORD.test(text.charAt(i));
}

function isDomainChar(text: string, i: number): boolean {
  const c = text.charCodeAt(i);
  if (c < 128) return isAsciiAlnum(c) || c === 46 || c === 45;
  return NON_ASCII_WORD.test(text.charAt(i));
}

/** The last label of `text[start, end)` is 2+ letters: a cheap first look at a domain before validating it. */
function endsWithLetterTld(text: string, start: number, end: number): boolean {
  let i = end;
  while (i > start && text.charCodeAt(i - 1) !== 46) {
    const c = text.charCodeAt(i - 1);
    if (c < 128 ? !isAsciiLetter(c) && c !== 45 : !NON_ASCII_WORD.test(text.charAt(i - 1))) return false;
    i--;
  }
  return i > start && end - i >= 2;
}

/** Emails: found from each '@' outwards in code (no regex to backtrack), local part <= 64, a real domain. */
function detectEmails(scan: Scan): void {
  const { text } = scan;
  const n = text.length;
  let floor = 0;
  let at = text.indexOf('@');
  while (at !== -1) {
    let s = at;
    while (s > floor && at - s < 64 && isLocalPartChar(text, s - 1)) s--;
    let next = at + 1;
    const tooLong = s > floor && isLocalPartChar(text, s - 1);
    while (s < at && text.charCodeAt(s) === 46) s++;
    if (!tooLong && s < at && text.charCodeAt(at - 1) !== 46 && !text.slice(s, at).includes('..')) {
      let e = at + 1;
      while (e < n && e - at <= 254 && isDomainChar(text, e)) e++;
      while (e > at + 1 && (text.charCodeAt(e - 1) === 46 || text.charCodeAt(e - 1) === 45)) e--;
      // `git@host:org/repo` (scp syntax) and `a@b@c` are not emails.
      const after = text.charCodeAt(e);
      const scp = after === 58 && e + 1 < n && !/\s/.test(text.charAt(e + 1));
      if (endsWithLetterTld(text, at + 1, e) && !scp && after !== 64 && !isWordAt(text, e) && domainValid(text.slice(at + 1, e))) {
        scan.push('email', s, e);
        floor = e;
        next = e;
      }
    }
    at = text.indexOf('@', next);
  }
}

const URL_SCHEMES = new Set(['http', 'https', 'ftp', 'ftps', 'sftp', 'ws', 'wss']);
const WWW_RE = /www\d{0,3}\./gi;
/** ASCII characters that end a URL: controls, space, and the ones RFC 3986 never allows unescaped. */
const URL_STOP = new Uint8Array(128);
for (let c = 0; c <= 32; c++) URL_STOP[c] = 1;
for (const ch of '<>"\'`{}|\\^\u007f') URL_STOP[ch.charCodeAt(0)] = 1;
const UNICODE_SPACE = /\s/;

/** End of the run of URL characters starting at `start`. */
function urlRunEnd(text: string, codes: Uint16Array, start: number): number {
  let e = start;
  while (e < codes.length) {
    const c = codes[e]!;
    if (c < 128 ? URL_STOP[c] === 1 : UNICODE_SPACE.test(text.charAt(e))) break;
    e++;
  }
  return e;
}

const IPV4_EXACT = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;

/** Trailing punctuation is prose, not URL; a closing bracket stays only when the URL opened one. */
function trimUrlEnd(codes: Uint16Array, start: number, end: number): number {
  let openParens = 0;
  let openBrackets = 0;
  let closeParens = 0;
  let closeBrackets = 0;
  for (let i = start; i < end; i++) {
    const c = codes[i]!;
    if (c === 40) openParens++;
    else if (c === 91) openBrackets++;
    else if (c === 41) closeParens++;
    else if (c === 93) closeBrackets++;
  }
  while (end > start) {
    const c = codes[end - 1]!;
    if (isUrlTrailingPunctuation(c)) end--;
    else if (c === 41 && closeParens > openParens) {
      closeParens--;
      end--;
    } else if (c === 93 && closeBrackets > openBrackets) {
      closeBrackets--;
      end--;
    } else break;
  }
  return end;
}

/** . , ; : ! ? * _ ~ */
function isUrlTrailingPunctuation(c: number): boolean {
  return c === 46 || c === 44 || c === 59 || c === 58 || c === 33 || c === 63 || c === 42 || c === 95 || c === 126;
}

interface UrlParts {
  host: string;
  path: string;
}

function splitUrl(url: string): UrlParts | undefined {
  const schemeEnd = url.indexOf('://');
  const rest = schemeEnd >= 0 && schemeEnd < 8 ? url.slice(schemeEnd + 3) : url;
  let authorityEnd = 0;
  while (authorityEnd < rest.length) {
    const c = rest.charCodeAt(authorityEnd);
    if (c === 47 || c === 63 || c === 35) break; // / ? #
    authorityEnd++;
  }
  const authority = rest.slice(0, authorityEnd);
  const at = authority.lastIndexOf('@');
  let hostPort = at >= 0 ? authority.slice(at + 1) : authority;
  if (hostPort.startsWith('[')) {
    const close = hostPort.indexOf(']');
    if (close < 0) return undefined;
    const after = hostPort.slice(close + 1);
    if (after !== '' && !/^:\d{1,5}$/.test(after)) return undefined;
    return { host: hostPort.slice(0, close + 1), path: rest.slice(authorityEnd) };
  }
  const colon = hostPort.lastIndexOf(':');
  if (colon >= 0) {
    if (!/^\d{1,5}$/.test(hostPort.slice(colon + 1))) return undefined;
    hostPort = hostPort.slice(0, colon);
  }
  return { host: hostPort, path: rest.slice(authorityEnd) };
}

function urlHostValid(host: string): boolean {
  if (host.startsWith('[')) return ipv6Valid(host.slice(1, -1));
  const h = host.toLowerCase();
  return h === 'localhost' || (isDigit(h.charCodeAt(0)) && IPV4_EXACT.test(h)) || domainValid(h);
}

const SOCIAL_HOSTS: Record<string, 'one' | 'at' | 'linkedin'> = {
  'twitter.com': 'one',
  'x.com': 'one',
  'instagram.com': 'one',
  'facebook.com': 'one',
  'fb.com': 'one',
  'github.com': 'one',
  'threads.net': 'at',
  'tiktok.com': 'at',
  'linkedin.com': 'linkedin',
};

/** First path segments of the social sites that are pages of the site, not people. */
const SOCIAL_RESERVED = new Set([
  'home', 'explore', 'search', 'i', 'intent', 'share', 'sharer', 'sharer.php', 'hashtag', 'settings', 'notifications',
  'messages', 'login', 'logout', 'signup', 'join', 'tos', 'privacy', 'about', 'help', 'p', 'reel', 'reels', 'stories',
  'accounts', 'direct', 'developer', 'developers', 'pages', 'groups', 'events', 'watch', 'marketplace', 'policies',
  'features', 'pricing', 'topics', 'collections', 'trending', 'sponsors', 'enterprise', 'security',
  'site', 'apps', 'new', 'orgs', 'organizations', 'codespaces', 'copilot', 'readme', 'customer-stories', 'team',
  'dashboard', 'issues', 'pulls', 'discover', 'legal', 'terms', 'jobs', 'careers', 'business', 'ads', 'gaming',
]);

function socialProfile(parts: UrlParts): boolean {
  const lower = parts.host.toLowerCase();
  // As `.replace(/^(?:www|m|mobile)\./, '')`.
  const host = lower.startsWith('www.') ? lower.slice(4) : lower.startsWith('m.') ? lower.slice(2) : lower.startsWith('mobile.') ? lower.slice(7) : lower;
  const kind = SOCIAL_HOSTS[host];
  if (!kind) return false;
  const path = parts.path.split(/[?#]/, 1)[0] ?? '';
  const segs = path.split('/').filter((s) => s !== '');
  const first = segs[0] ?? '';
  if (kind === 'linkedin') {
    return segs.length === 2 && ['in', 'company', 'school', 'pub'].includes(first.toLowerCase()) && /^[\p{L}\p{N}_.%-]{2,100}$/u.test(segs[1] ?? '');
  }
  if (segs.length !== 1) return false;
  if (kind === 'at') return /^@[A-Za-z0-9_.]{2,30}$/.test(first);
  if (first.toLowerCase() === 'profile.php') return /[?&]id=\d+/.test(parts.path);
  return /^[A-Za-z0-9_.-]{1,50}$/.test(first) && !SOCIAL_RESERVED.has(first.toLowerCase());
}

/** Longest authority (userinfo, host, port) considered: hostnames stop at 253 characters. */
const MAX_AUTHORITY = 300;
const MAX_URL = 2048;

/**
 * URLs (http, https, ftp, ws and www.); profile URLs of social sites are social handles. Returns all URL spans.
 * Linear even for "http://http://http://...": the run of URL characters is measured once for all the starts inside
 * it, the host is checked from the authority alone (at most 300 characters), and only a URL with a valid host pays
 * for trimming its end, after which the starts it covers are skipped.
 */
function findUrls(scan: Scan): Array<[number, number]> {
  const { text, codes } = scan;
  const spans: Array<[number, number]> = [];
  const starts: number[] = [];
  for (let i = text.indexOf('://'); i !== -1; i = text.indexOf('://', i + 3)) {
    let s = i;
    while (s > 0 && i - s < 5 && isAsciiLetter(text.charCodeAt(s - 1))) s--;
    if (URL_SCHEMES.has(text.slice(s, i).toLowerCase()) && !isWordAt(text, s - 1)) starts.push(s);
  }
  if (text.indexOf('ww') !== -1 || text.indexOf('WW') !== -1) {
    WWW_RE.lastIndex = 0;
    for (let m = WWW_RE.exec(text); m; m = WWW_RE.exec(text)) {
      const prev = text.charAt(m.index - 1);
      if (!isWordAt(text, m.index - 1) && !'/.@-'.includes(prev || 'x')) starts.push(m.index);
    }
    starts.sort((a, b) => a - b);
  }
  let covered = 0;
  let runEnd = -1;
  for (const start of starts) {
    if (start < covered) continue;
    if (start >= runEnd) {
      runEnd = urlRunEnd(text, codes, start);
    }
    const end = Math.min(runEnd, start + MAX_URL);
    const sep = text.indexOf('://', start);
    const schemeEnd = sep !== -1 && sep - start <= 5 ? sep + 3 : start;
    let authorityEnd = schemeEnd;
    let dots = 0;
    for (; authorityEnd < end && authorityEnd - schemeEnd <= MAX_AUTHORITY; authorityEnd++) {
      const c = codes[authorityEnd]!;
      if (c === 47 || c === 63 || c === 35) break; // / ? #
      if (c === 46) dots++;
    }
    if (authorityEnd - schemeEnd > MAX_AUTHORITY) continue;
    // A host is a dotted name or address, [IPv6] or localhost.
    if (dots === 0 && text.charCodeAt(schemeEnd) !== 91 && !/localhost|@/i.test(text.slice(schemeEnd, authorityEnd))) continue;
    let hostEnd = authorityEnd;
    while (hostEnd > schemeEnd && (isUrlTrailingPunctuation(codes[hostEnd - 1]!) || codes[hostEnd - 1] === 41 || codes[hostEnd - 1] === 93)) hostEnd--; // prose after a bare host
    const authority = splitUrl(text.slice(start, hostEnd));
    if (!authority || !urlHostValid(authority.host)) continue;
    const trimmed = trimUrlEnd(codes, start, end);
    const parts = splitUrl(text.slice(start, trimmed));
    if (!parts || (parts.host !== authority.host && !urlHostValid(parts.host))) continue;
    spans.push([start, trimmed]);
    covered = trimmed;
    scan.push(socialProfile(parts) ? 'social_handle' : 'url', start, trimmed);
  }
  return spans;
}

function isAsciiLetter(c: number): boolean {
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
}

const SOCIAL_SITE_BEFORE_DOT = /(?:^|[^\w.@/-])((?:(?:www|m|mobile)\.)?(?:twitter|x|instagram|facebook|fb|linkedin|tiktok|github|threads))$/i;

/** Profile URLs written without a scheme, found from each ".com/" or ".net/". */
function detectBareSocialUrls(scan: Scan): void {
  const { text } = scan;
  // Each ".com/" and ".net/", found from its '/' (rarer in prose than '.').
  for (let slash = text.indexOf('/', 4); slash !== -1; slash = text.indexOf('/', slash + 1)) {
    const i = slash - 4;
    if (text.charCodeAt(i) !== 46 || !(text.startsWith('com', i + 1) || text.startsWith('net', i + 1))) continue;
    const site = SOCIAL_SITE_BEFORE_DOT.exec(text.slice(Math.max(0, i - 20), i));
    if (!site) continue;
    const start = i - (site[1] ?? '').length;
    const runEnd = urlRunEnd(text, scan.codes, i);
    if (runEnd - start > 300) continue; // a profile URL is short
    const end = trimUrlEnd(scan.codes, start, runEnd);
    const parts = splitUrl(text.slice(start, end));
    if (parts && socialProfile(parts)) scan.push('social_handle', start, end);
  }
}

/** Characters that, right before '@', make it part of something else (an email, a path, a string, a template). */
const HANDLE_NOT_AFTER = new Set('@./\\:`\'"=$#&*-})]'.split(''));

function isHandleChar(c: number): boolean {
  return isAsciiAlnum(c) || c === 95 || c === 46;
}

/** `@word`s that are code (decorators, annotations, CSS at-rules, JSDoc tags) or chat mentions of a group. */
const HANDLE_RESERVED = new Set([
  'override', 'param', 'params', 'returns', 'return', 'throws', 'throw', 'deprecated', 'media', 'import', 'keyframes',
  'font', 'supports', 'charset', 'apply', 'tailwind', 'layer', 'container', 'page', 'namespace', 'echo', 'property',
  'dataclass', 'staticmethod', 'classmethod', 'abstractmethod', 'cached_property', 'component', 'injectable', 'input',
  'output', 'ngmodule', 'directive', 'pipe', 'hostlistener', 'viewchild', 'test', 'before', 'after', 'beforeeach',
  'aftereach', 'beforeall', 'afterall', 'autowired', 'entity', 'table', 'column', 'id', 'restcontroller',
  'controller', 'service', 'repository', 'getmapping', 'postmapping', 'putmapping', 'deletemapping',
  'requestmapping', 'springbootapplication', 'configuration', 'bean', 'value', 'functionalinterface',
  'suppresswarnings', 'nullable', 'nonnull', 'notnull', 'jsonproperty', 'transactional', 'valid', 'data', 'getter',
  'setter', 'builder', 'slf4j', 'here', 'channel', 'everyone', 'all', 'see', 'link', 'since', 'author', 'version',
  'type', 'typedef', 'example', 'todo', 'ts', 'jsx', 'flow', 'callback', 'class', 'constructor', 'enum', 'extends',
  'implements', 'interface', 'module', 'private', 'protected', 'public', 'readonly', 'static', 'template', 'this',
  'event', 'fires', 'listens', 'memberof', 'name', 'file', 'fileoverview', 'license', 'copyright', 'internal',
  'inheritdoc', 'async', 'end', 'if', 'else', 'foreach', 'include', 'extend', 'mixin', 'use', 'forward',
  'each', 'while', 'for', 'function', 'debug', 'warn', 'error', 'content', 'section', 'yield', 'csrf', 'method',
  'click', 'submit', 'change', 'types', 'latest', 'next', 'beta', 'alpha', 'canary', 'rc',
]);

/** A line whose first non-blank character is this '@' and which ends after the word (or opens '('): a decorator. */
function decoratorLine(text: string, at: number, end: number): boolean {
  let i = at - 1;
  while (i >= 0 && (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 9)) i--;
  const prev = i >= 0 ? text.charAt(i) : '\n';
  if (prev === '*') return true; // JSDoc
  if (prev !== '\n' && prev !== '\r') return false;
  let j = end;
  while (j < text.length && (text.charCodeAt(j) === 32 || text.charCodeAt(j) === 9)) j++;
  return j >= text.length || text.charAt(j) === '\n' || text.charAt(j) === '\r';
}

/** A dotted `@name.tld` is a domain, not an Instagram-style handle. */
const HANDLE_TLDS = new Set(
  ('com net org io co de uk fr tr es it nl eu ai dev app edu gov info biz me tv us ca au jp cn ru br in ch at be se no dk ' +
    'fi pl pt cz gr ie nz za mx ar cl kr tw hk sg xyz online site tech cloud test example local localhost invalid ' +
    'internal lan corp home').split(' '),
);

function detectHandles(scan: Scan): void {
  const { text } = scan;
  for (let at = text.indexOf('@'); at !== -1; at = text.indexOf('@', at + 1)) {
    if (isWordAt(text, at - 1) || HANDLE_NOT_AFTER.has(text.charAt(at - 1))) continue;
    const first = text.charCodeAt(at + 1);
    if (!isAsciiAlnum(first) && first !== 95) continue;
    let end = at + 2;
    while (end < text.length && end - at <= 30 && isHandleChar(text.charCodeAt(end))) end++;
    while (text.charCodeAt(end - 1) === 46) end--;
    const handle = text.slice(at + 1, end);
    if (handle.length < 2 || (isHandleChar(text.charCodeAt(end)) && text.charCodeAt(end) !== 46)) continue;
    const next = text.charAt(end);
    if (next === '(' || next === '/' || next === '@' || next === '-' || isWordAt(text, end)) continue;
    if (next === '.' && isWordAt(text, end + 1)) continue;
    if (/^\d+$/.test(handle) || /^\d{1,2}(?:[ap]m|h)?$/i.test(handle)) continue;
    const lower = handle.toLowerCase();
    if (HANDLE_RESERVED.has(lower) || /^[a-z]+[A-Z]/.test(handle)) continue; // @customerId: a SQL or code parameter
    const dot = lower.lastIndexOf('.');
    if (dot >= 0 && (HANDLE_TLDS.has(lower.slice(dot + 1)) || !/^[a-z0-9_]{2,}$/.test(lower.slice(dot + 1)))) continue;
    if (decoratorLine(text, at, end)) continue;
    scan.push('social_handle', at, end);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// IP addresses

/** Sticky: tried at runs of 1-3 digits followed by '.'. */
const IPV4_RE = /(?<![\w.])(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}(?!\w|\.\d)/y;
const VERSION_CONTEXT = /(?:\bv|\bversion|\bver\.?|\brelease|\bbuild|\bfirmware|\bsection|\bchapter|§|\bstep|\bclause|\brev\.?|\brevision|\bsdk|\bos)\s*:?\s*$/i;

/** Number of hex groups (an embedded IPv4 counts as two), or -1 when `s` is not an IPv6 address. Parsed in one pass. */
function ipv6Groups(s: string): number {
  const n = s.length;
  if (n < 2 || n > 45) return -1;
  let groups = 0;
  let compressed = false;
  let i = 0;
  if (s.charCodeAt(0) === 58) {
    if (s.charCodeAt(1) !== 58) return -1;
    compressed = true;
    i = 2;
  }
  while (i < n) {
    let j = i;
    while (j < n && j - i <= 4 && isHexCode(s.charCodeAt(j))) j++;
    if (j < n && s.charCodeAt(j) === 46) {
      if (!IPV4_EXACT.test(s.slice(i))) return -1; // an embedded IPv4 ends the address
      groups += 2;
      break;
    }
    if (j === i || j - i > 4) return -1;
    groups++;
    if (j === n) break;
    if (s.charCodeAt(j) !== 58) return -1;
    if (s.charCodeAt(j + 1) === 58) {
      if (compressed) return -1;
      compressed = true;
      i = j + 2;
    } else {
      i = j + 1;
      if (i === n) return -1; // a trailing single ':'
    }
  }
  if (!compressed) return groups === 8 ? 8 : -1;
  return groups <= 7 ? groups : -1;
}

function ipv6Valid(s: string): boolean {
  return ipv6Groups(s) >= 0;
}

function detectIps(scan: Scan): void {
  const { text } = scan;
  if (text.indexOf('.') !== -1 && hasDigit(text)) {
    const { codes } = scan;
    const { starts, ends } = scan.digitRuns();
    let from = 0;
    for (let k = 0; k < starts.length; k++) {
      const start = starts[k]!;
      if (start < from || ends[k]! - start > 3 || codes[ends[k]!] !== 46) continue;
      const before = codes[start - 1];
      if (before !== undefined && (isAsciiWordCode(before) || before === 46)) continue;
      IPV4_RE.lastIndex = start;
      const m = IPV4_RE.exec(text);
      if (!m) continue;
      const end = start + m[0].length;
      from = end;
      if (VERSION_CONTEXT.test(text.slice(Math.max(0, m.index - 16), m.index))) continue;
      if (text.charAt(end) === '-' && /[A-Za-z]/.test(text.charAt(end + 1))) continue; // 1.2.3.4-beta
      scan.push('ip_address', m.index, end);
    }
  }
  // IPv6: from each ':' (rare in prose) step back over at most 4 hex digits and forward over hex, ':' and '.'.
  let colon = text.indexOf(':');
  while (colon !== -1) {
    let start = colon;
    while (start > colon - 4 && start > 0 && isHexCode(text.charCodeAt(start - 1))) start--;
    const prev = text.charCodeAt(start - 1);
    let next = colon + 1;
    if (!isWordAt(text, start - 1) && prev !== 58 && prev !== 46 && (start < colon || text.charCodeAt(colon + 1) === 58)) {
      let end = colon;
      while (end < text.length && end - start < 45 && (isHexCode(text.charCodeAt(end)) || text.charCodeAt(end) === 58 || text.charCodeAt(end) === 46)) end++;
      const runEnd = end;
      let candidate = text.slice(start, end);
      while (candidate.endsWith('.')) candidate = candidate.slice(0, -1);
      if (candidate.endsWith(':') && !candidate.endsWith('::')) candidate = candidate.slice(0, -1);
      end = start + candidate.length;
      const glued = end === runEnd && isWordAt(text, end);
      const groups = glued ? -1 : ipv6Groups(candidate);
      if (groups >= 2 || (groups >= 0 && candidate === '::1')) {
        scan.push('ip_address', start, end);
        next = Math.max(next, end);
      } else next = Math.max(next, runEnd > colon + 1 ? colon + 1 : next);
    }
    colon = text.indexOf(':', next);
  }
}

function isHexCode(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);
}

// ---------------------------------------------------------------------------------------------------------------
// Numbers: cards, SSNs, national ids, IBANs, phones

/** ASCII word characters (`\w` without the `u` flag). */
function isAsciiWordCode(c: number): boolean {
  return isAsciiAlnum(c) || c === 95;
}

/** A separator between a card's digit groups: a space, a dash, an en dash or a dot. */
function isCardSeparator(c: number | undefined): boolean {
  return c === 32 || c === 45 || c === 0x2013 || c === 46;
}

/**
 * Cards are the matches of `(?<![\w.,/-])\d(?:[ \-–.]?\d){12,40}`: digit groups separated by single spaces, dashes,
 * en dashes or dots (the whole chain must be the card, checked in code). This is the end of its match at the start of run `k` (the lookbehind
 * checked by the caller), or -1: the pattern is greedy and each repetition takes one digit, so it matches the chain of
 * runs joined by single spaces or dashes, up to 41 digits, when that holds 13+.
 */
function cardMatchEnd(codes: Uint16Array, runs: DigitRuns, k: number): number {
  const { starts, ends } = runs;
  let count = 0;
  for (let j = k; ; j++) {
    const length = ends[j]! - starts[j]!;
    if (count + length >= 41) return starts[j]! + 41 - count;
    count += length;
    const end = ends[j]!;
    const c = codes[end];
    if (j + 1 >= starts.length || starts[j + 1] !== end + 1 || !isCardSeparator(c)) return count >= 13 ? end : -1;
  }
}

/** Whether the digit runs from run `k` on, each at most 2 characters after the one before, hold 7+ digits. */
function phoneChainAt(runs: DigitRuns, k: number): boolean {
  const { starts, ends } = runs;
  let count = ends[k]! - starts[k]!;
  for (let j = k; count < 7 && j + 1 < starts.length && starts[j + 1]! - ends[j]! <= 2; j++) count += ends[j + 1]! - starts[j + 1]!;
  return count >= 7;
}

/**
 * Whether the number starting at `start` continues a chain of digit groups before it ("1234 5678 ..."): then it is
 * the tail of a longer number. A group that follows a decimal point, dot or colon ("10.0.0.1 4111 ...") ends a
 * different token, so it does not count.
 */
function continuesDigitChain(text: string, start: number): boolean {
  if (!isNumericSep(text.charCodeAt(start - 1)) || !isDigit(text.charCodeAt(start - 2))) return false;
  let k = start - 2;
  while (k >= 0 && isDigit(text.charCodeAt(k))) k--;
  const before = text.charCodeAt(k);
  return before !== 46 && before !== 58 && before !== 44;
}

/**
 * `raw` (digits with single separators between them): one kind of separator, in groups of four (the last up to
 * four), or 4-6-5 / 4-6-4 (American Express, Diners).
 */
function cardGroupingOk(raw: string): boolean {
  let sep = 0;
  let groups = 0;
  let length = 0;
  let fours = true;
  let shape = 0; // the first three group lengths, 4 bits each; 0 once a fourth group appears
  for (let i = 0; i <= raw.length; i++) {
    const c = i < raw.length ? raw.charCodeAt(i) : -1;
    if (isDigit(c)) {
      length++;
      continue;
    }
    if (c !== -1) {
      if (!isCardSeparator(c)) return false;
      if (sep === 0) sep = c;
      else if (c !== sep) return false; // one kind of separator
    } else if (sep === 0) return true;
    if (length === 0) return false;
    if (c !== -1 ? length !== 4 : length > 4) fours = false;
    groups++;
    shape = groups <= 3 ? shape | (Math.min(length, 15) << (4 * (groups - 1))) : 0;
    length = 0;
  }
  if (fours) return true;
  return groups === 3 && (shape === (4 | (6 << 4) | (5 << 8)) || shape === (4 | (6 << 4) | (4 << 8)));
}

function detectCards(scan: Scan): void {
  const { text } = scan;
  const { codes } = scan;
  const runs = scan.digitRuns();
  const { starts } = runs;
  let from = 0;
  for (let k = 0; k < starts.length; k++) {
    const start = starts[k]!;
    if (start < from) continue;
    const prev = codes[start - 1]!;
    if (isAsciiWordCode(prev) || prev === 46 || prev === 44 || prev === 47 || prev === 45) continue;
    const after = cardMatchEnd(codes, runs, k);
    if (after === -1) continue;
    let raw = text.slice(start, after);
    from = after;
    if (continuesDigitChain(text, start) || (isNumericSep(text.charCodeAt(after)) && isDigit(text.charCodeAt(after + 1)) && text.charCodeAt(after) !== 46)) continue;
    // "4111 1111 1111 1111 192.168.1.10": the last group belongs to the token that follows.
    raw = raw.slice(0, lengthBeforeGluedTail(text, start, raw));
    const digits = digitsOf(raw);
    if (digits.length < 13 || digits.length > 19) continue;
    if (cardGroupingOk(raw) && !allSameChar(digits) && cardIssuerKnown(digits) && luhnValid(digits)) {
      scan.push('credit_card', start, start + raw.length);
    }
  }
}

/** Sticky: tried at runs of three digits followed by '-'. */
const SSN_RE = /(?<![\w-])(\d{3})-(\d{2})-(\d{4})(?![\w-])/y;

function ssnValid(area: string, group: string, serial: string): boolean {
  return area !== '000' && area !== '666' && !area.startsWith('9') && group !== '00' && serial !== '0000';
}

function detectSsns(scan: Scan): void {
  const { text } = scan;
  if (text.indexOf('-') === -1) return;
  const { codes } = scan;
  const { starts, ends } = scan.digitRuns();
  let from = 0;
  for (let k = 0; k < starts.length; k++) {
    const start = starts[k]!;
    if (start < from || ends[k]! - start !== 3 || codes[start + 3] !== 45) continue;
    const before = codes[start - 1];
    if (before !== undefined && (isAsciiWordCode(before) || before === 45)) continue;
    SSN_RE.lastIndex = start;
    const m = SSN_RE.exec(text);
    if (!m) continue;
    from = start + m[0].length;
    if (ssnValid(m[1] ?? '', m[2] ?? '', m[3] ?? '')) scan.push('us_ssn', start, from);
  }
}

/**
 * National ids with public check digits and a distinctive shape: Turkish TCKN (11 digits), Brazilian CPF
 * (ddd.ddd.ddd-dd), Chinese resident id (17 digits + check), Spanish DNI and NIE, Finnish HETU, Swedish personnummer,
 * Italian codice fiscale. (Dutch BSN, Polish PESEL, a bare CPF and Indian Aadhaar need a keyword: see detectByKeyword.)
 */
// Sticky, tried only at the runs of digits that can fit: a run of 11 (TCKN), 3 then '.' (CPF), 17 or 18 (China), 8 (DNI,
// personnummer), 6 (HETU, personnummer); the letter forms at 6 capitals before a run of 2 (codice fiscale), or a
// capital (and '-') before a run of 7 (NIE).
const NATIONAL_DIGITS_RE =
  /\d(?<![\w.,/+-]\d)(?:(\d{10})|(\d{2}\.\d{3}\.\d{3}-\d{2})|(\d{16}[\dXx])|(\d{7}-?[A-Z])|(\d{5}[-+A-FU-Y]\d{3}[0-9A-Y])|((?:\d{2})?\d{5}[-+]\d{4}))(?![\w-]|[.,]\d)/y;
const NATIONAL_LETTERS_RE = /[A-Z](?<![\w.,/+-][A-Z])(?:([A-Z]{5}\d{2}[A-EHLMPR-T]\d{2}[A-Z]\d{3}[A-Z])|(-?\d{7}-?[A-Z]))(?![\w-])/y;

function isAsciiUpper(c: number): boolean {
  return c >= 65 && c <= 90;
}

function isAsciiLower(c: number): boolean {
  return c >= 97 && c <= 122;
}

/** The national id patterns' lookbehind: not after `[\w.,/+-]` (`c` undefined before the text). */
function nationalIdMayFollow(c: number | undefined): boolean {
  return c === undefined || !(isAsciiWordCode(c) || c === 46 || c === 44 || c === 47 || c === 43 || c === 45);
}

function detectNationalIds(scan: Scan): void {
  const { text, codes } = scan;
  const { starts, ends } = scan.digitRuns();
  let from = 0;
  for (let k = 0; k < starts.length; k++) {
    const start = starts[k]!;
    const length = ends[k]! - start;
    if (start < from) continue;
    if (length === 3 ? codes[start + 3] !== 46 : length !== 6 && length !== 8 && length !== 11 && length !== 17 && length !== 18) continue;
    if (!nationalIdMayFollow(codes[start - 1])) continue;
    NATIONAL_DIGITS_RE.lastIndex = start;
    const m = NATIONAL_DIGITS_RE.exec(text);
    if (!m) continue;
    from = start + m[0].length;
    const v = m[0];
    const ok =
      m[1] !== undefined
        ? tcknValid(v)
        : m[2] !== undefined
          ? cpfValid(digitsOf(v))
          : m[3] !== undefined
            ? chineseIdValid(v.toUpperCase())
            : m[4] !== undefined
              ? dniNieValid(v.replace(/-/g, ''))
              : m[5] !== undefined
                ? hetuValid(v) || (/^\d{6}[-+]\d{4}$/.test(v) && personnummerValid(v))
                : personnummerValid(v);
    if (ok) scan.push('national_id', start, start + v.length);
  }
  from = 0;
  for (let k = 0; k < starts.length; k++) {
    const run = starts[k]!;
    const length = ends[k]! - run;
    let start: number;
    if (length === 2) {
      start = run - 6;
      if (start < 0) continue;
      let caps = true;
      for (let i = start; i < run && caps; i++) caps = isAsciiUpper(codes[i]!);
      if (!caps) continue;
    } else if (length === 7) {
      start = codes[run - 1] === 45 ? run - 2 : run - 1;
      if (!isAsciiUpper(codes[start]!)) continue;
    } else continue;
    if (start < from || !nationalIdMayFollow(codes[start - 1])) continue;
    NATIONAL_LETTERS_RE.lastIndex = start;
    const m = NATIONAL_LETTERS_RE.exec(text);
    if (!m) continue;
    from = start + m[0].length;
    const v = m[0];
    const ok = m[1] !== undefined ? codiceFiscaleValid(v) : dniNieValid(v.replace(/-/g, ''));
    if (ok) scan.push('national_id', start, start + v.length);
  }
}

/** A digit, or a letter of the IBAN's case (`lower`: all its letters are lower-case, as typed by some people). */
function isIbanChar(c: number, lower: boolean): boolean {
  return (c >= 48 && c <= 57) || (lower ? c >= 97 && c <= 122 : c >= 65 && c <= 90);
}

/** One character into the mod-97 remainder; letters count as 10 to 35 in either case. */
function mod97Step(rem: number, c: number): number {
  if (c <= 57) return (rem * 10 + (c - 48)) % 97;
  return (rem * 100 + ((c >= 97 ? c - 32 : c) - 55)) % 97;
}

/**
 * IBANs: country code, the country's length and mod-97 == 1, compact or in groups separated by single spaces. The
 * remainder is computed while walking (the BBAN first, then country and check digits), so no string is built.
 */
function detectIbans(scan: Scan): void {
  const { text, codes } = scan;
  const n = text.length;
  const { starts, ends } = scan.digitRuns();
  let from = 0;
  for (let k = 0; k < starts.length; k++) {
    const run = starts[k]!;
    if (run - 2 < from || ends[k]! - run < 2) continue;
    // The country code sets the case of every letter of the IBAN: all capitals, or (typed so) all lower-case.
    const lower = isAsciiLower(codes[run - 2]!);
    const letter = lower ? isAsciiLower : isAsciiUpper;
    if (!letter(codes[run - 2]!) || !letter(codes[run - 1]!)) continue;
    const before = codes[run - 3];
    if (before !== undefined && isAsciiAlnum(before)) continue;
    // An IBAN starts as `(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?= ?[A-Z0-9])` (or the same in lower case): at two letters
    // right before 2+ digits.
    const next = codes[run + 2];
    if (!(next !== undefined && (isIbanChar(next, lower) || (next === 32 && run + 3 < n && isIbanChar(codes[run + 3]!, lower))))) continue;
    const start = run - 2;
    from = run + 2;
    const length = IBAN_LENGTHS[text.slice(start, run).toUpperCase()];
    if (!length) continue;
    let i = start + 4;
    let count = 4;
    let rem = 0;
    while (count < length && i < n) {
      const c = codes[i]!;
      if (isIbanChar(c, lower)) {
        rem = mod97Step(rem, c);
        count++;
        i++;
      } else if (c === 32 && i + 1 < n && isIbanChar(codes[i + 1]!, lower) && codes[i - 1] !== 32) {
        i++;
      } else break;
    }
    if (count !== length || isWordAt(text, i)) continue;
    for (let c = 0; c < 4; c++) rem = mod97Step(rem, codes[start + c]!);
    if (rem === 1) {
      scan.push('iban', start, i);
      from = i;
    }
  }
}

/** Sticky: tried at the runs of 6+ capitals the index found. */
const SWIFT_RE = /(?<![A-Za-z0-9])[A-Z]{6}[A-Z0-9]{2}(?:[A-Z0-9]{3})?(?![A-Za-z0-9])/y;

/**
 * SWIFT/BIC: bank (4 letters), ISO country, location (2), optional branch (3). Near "SWIFT"/"BIC" any such code counts;
 * without the keyword only codes that cannot be words: a digit in the location or branch, or the XXX branch.
 */
function detectSwift(scan: Scan): void {
  const { text } = scan;
  let from = 0;
  for (const start of scan.index().capitals) {
    if (start < from) continue;
    SWIFT_RE.lastIndex = start;
    const m = SWIFT_RE.exec(text);
    if (!m) continue;
    const code = m[0];
    from = start + code.length;
    if (!ISO_COUNTRIES.has(code.slice(4, 6))) continue;
    const end = m.index + code.length;
    const keyword = wordsBefore(text, m.index, 40, SWIFT_WORDS) || SWIFT_WORDS.test(text.slice(end, end + 12));
    if (keyword || code.endsWith('XXX') || /\d/.test(code.slice(6))) scan.push('swift_bic', m.index, end);
  }
}

/*
 * PHONE_RE, `(?<![\w+(./-])(?:\+|\(\+?)?\d(?:\d|[ ./-]\(?\d|\(\d|\)[ ./-]?\d){6,24}`: each repetition takes one digit,
 * with at most one separator or parenthesis before it. Followed in code (phoneMatchEnd) from the runs of digits
 * (or a '+', '(' or '(+' right before one) that start a chain of 7+ digits.
 */
const PHONE_DATE = /(?<!\d)(?:\d{4}[./-]\d{1,2}[./-]\d{1,2}|\d{1,2}[./-]\d{1,2}[./-]\d{4})(?!\d)/;
const NANP = /^(?:1[ .-]?)?(?:\(\d{3}\) ?\d{3}[-. ]\d{4}|\d{3}([-. ])\d{3}\1\d{4})$/;

function nanpDigits(d: string): boolean {
  const ten = d.length === 11 && d.startsWith('1') ? d.slice(1) : d;
  return ten.length === 10 && ten.charAt(0) >= '2' && ten.charAt(3) >= '2';
}

/**
 * Whether a candidate reads as a phone number. Context words are looked up only when the shape needs them: a bare
 * digit string or an unusual grouping needs a phone word before it; an order/invoice/version word vetoes the shapes
 * that are not unmistakably phones.
 */
function phoneShapeOk(raw: string, text: string, start: number): boolean {
  // One pass: digit count, digit groups (shortest, longest, first), separators and parentheses.
  let d = 0;
  let groups = 0;
  let groupLength = 0;
  let firstGroup = 0;
  let shortest = 99;
  let longest = 0;
  let opens = 0;
  let closes = 0;
  let dot = false;
  let otherSep = false;
  let dateSeps = 0; // '.', '/' and '-': PHONE_DATE needs two
  for (let i = 0; i <= raw.length; i++) {
    const c = i < raw.length ? raw.charCodeAt(i) : 32;
    if (c >= 48 && c <= 57) {
      d++;
      groupLength++;
      continue;
    }
    if (groupLength > 0) {
      groups++;
      if (groups === 1) firstGroup = groupLength;
      shortest = Math.min(shortest, groupLength);
      longest = Math.max(longest, groupLength);
      groupLength = 0;
    }
    if (i === raw.length) break;
    if (c === 40) opens++;
    else if (c === 41) closes++;
    else if (c === 46) {
      dot = true;
      dateSeps++;
    } else if (c !== 43) {
      otherSep = true;
      if (c === 45 || c === 47) dateSeps++;
    }
  }
  if (d > 15) return false;
  const c0 = raw.charCodeAt(0);
  const plus = c0 === 43 || (c0 === 40 && raw.charCodeAt(1) === 43);
  const firstDigit = raw.charCodeAt(plus ? raw.indexOf('+') + 1 : c0 === 40 ? 1 : 0);
  const zero = firstDigit === 48;
  // Cheapest rejection first: without '+' or a trunk 0, only NANP (10-11 digits) or a phone word makes it a phone.
  if (!plus && !zero && d !== 10 && d !== 11 && dot) return false;
  if (opens > 1 || opens !== closes || (opens === 1 && !/\(\+?\d{1,5}\)/.test(raw))) return false;
  if (plus) {
    if (d < 8 || (dot && otherSep)) return false;
    return groups >= 2 || d >= 10 || phoneWordBefore(text, start);
  }
  if (dateSeps >= 2 && PHONE_DATE.test(raw)) return false;
  if (zero && raw.charCodeAt(raw.indexOf('0') + 1) === 48) {
    // 00-prefixed international
    return d >= 11 && (groups >= 3 || phoneWordBefore(text, start)) && (phoneWordBefore(text, start) || !notPhoneWordBefore(text, start));
  }
  const nanp = (d === 10 || d === 11) && NANP.test(raw) && nanpDigits(digitsOf(raw));
  const trunk = zero && firstGroup >= 2 && firstGroup <= 5 && d >= 9 && d <= 12 && groups >= 2 && shortest >= 2 && (longest > 2 ? !dot : d === 10);
  if (nanp || trunk) return phoneWordBefore(text, start) || !notPhoneWordBefore(text, start);
  // Shapes that are phones only after a phone word.
  const bare = groups === 1 && ((zero && d >= 10 && d <= 11) || ((d === 10 || d === 11) && nanpDigits(digitsOf(raw))));
  const grouped = groups > 1 && d >= 7 && d <= 12 && !dot && shortest >= 2;
  return (bare || grouped) && phoneWordBefore(text, start);
}

function phoneWordBefore(text: string, start: number): boolean {
  return wordsBefore(text, start, 30, PHONE_WORDS);
}

function notPhoneWordBefore(text: string, start: number): boolean {
  let before = start - 1;
  while (before >= 0 && text.charCodeAt(before) === 32) before--;
  return text.charAt(before) === '#' || text.charAt(before) === '№' || wordsBefore(text, start, 20, NOT_PHONE_WORDS);
}

function isNumericSep(c: number): boolean {
  return c === 32 || c === 45 || c === 46 || c === 47;
}

/**
 * "0532 123 45 67 192.168.1.10", "0532 123 45 67 221B Baker Street": when the last group of a candidate runs into
 * the next token (a dotted number, or letters), that group belongs to the next token; cut before it. Returns the
 * length to keep.
 */
function lengthBeforeGluedTail(text: string, start: number, raw: string): number {
  const dot = raw.indexOf('.');
  if (dot !== -1 && /[ /-]/.test(raw.slice(0, dot))) return Math.max(raw.lastIndexOf(' ', dot), raw.lastIndexOf('-', dot), raw.lastIndexOf('/', dot));
  const after = start + raw.length;
  const glued = isWordAt(text, after) || ((text.charCodeAt(after) === 46 || text.charCodeAt(after) === 44) && isDigit(text.charCodeAt(after + 1)));
  return glued ? Math.max(raw.lastIndexOf(' '), raw.lastIndexOf('-'), raw.lastIndexOf('/'), 0) : raw.length;
}

/** Phones: E.164 (+ and 8-15 digits), 00-prefixed international, US/NANP shapes, trunk-0 national formats. */
function detectPhones(scan: Scan): void {
  const { text, codes } = scan;
  const runs = scan.digitRuns();
  const { starts } = runs;
  let from = 0;
  for (let k = 0; k < starts.length; k++) {
    const first = starts[k]!;
    // The match starts at the digit, or at a '+', '(' or '(+' right before it: only the earliest of these can, since
    // the lookbehind rules out '+' and '(' before the start.
    const c1 = codes[first - 1];
    const start = c1 === 43 ? (codes[first - 2] === 40 ? first - 2 : first - 1) : c1 === 40 ? first - 1 : first;
    if (start < from || !phoneMayFollow(codes[start - 1]) || !phoneChainAt(runs, k)) continue;
    const end = phoneMatchEnd(codes, first);
    if (end === -1) continue;
    from = end;
    phoneMatch(scan, start, text.slice(start, end));
  }
}

function isPhoneSep(c: number | undefined): boolean {
  return c === 32 || c === 46 || c === 47 || c === 45; // [ ./-]
}

/**
 * End of PHONE_RE's match whose first digit is at `first` (the '+', '(' or '(+' before it, and the lookbehind, are the
 * caller's), or -1. Each repetition takes one digit, after at most a separator and parenthesis, in one way only, and
 * nothing follows them: the match is the longest run of up to 24 repetitions, when there are 6.
 */
function phoneMatchEnd(codes: Uint16Array, first: number): number {
  let i = first + 1;
  let reps = 0;
  for (; reps < 24; reps++) {
    const c = codes[i];
    if (isDigit(c!)) i += 1; // \d
    else if (isPhoneSep(c)) {
      // [ ./-]\(?\d
      if (codes[i + 1] === 40 && isDigit(codes[i + 2]!)) i += 3;
      else if (isDigit(codes[i + 1]!)) i += 2;
      else break;
    } else if (c === 40) {
      // \(\d
      if (isDigit(codes[i + 1]!)) i += 2;
      else break;
    } else if (c === 41) {
      // \)[ ./-]?\d
      if (isPhoneSep(codes[i + 1]) && isDigit(codes[i + 2]!)) i += 3;
      else if (isDigit(codes[i + 1]!)) i += 2;
      else break;
    } else break;
  }
  return reps >= 6 ? i : -1;
}

/** PHONE_RE's lookbehind: not after `[\w+(./-]` (`c` undefined before the text). */
function phoneMayFollow(c: number | undefined): boolean {
  return c === undefined || !(isAsciiWordCode(c) || c === 43 || c === 40 || c === 46 || c === 47 || c === 45);
}

/** `/(?:^|\s)[A-Z0-9]{4}$/` on the (up to) 5 characters before `end`. */
function fourCapitalsOrDigitsBefore(text: string, end: number): boolean {
  if (end < 4) return false;
  for (let i = end - 4; i < end; i++) {
    const c = text.charCodeAt(i);
    if (!(isDigit(c) || isAsciiUpper(c))) return false;
  }
  return end === 4 || UNICODE_SPACE.test(text.charAt(end - 5));
}

function phoneMatch(scan: Scan, start: number, match: string): void {
  const { text } = scan;
  const keep = lengthBeforeGluedTail(text, start, match);
  const raw = match.slice(0, keep);
  const end = start + raw.length;
  // Part of a longer chain of numbers ("1 2 3 4 ...", "12.5 13.0 ..."): not a phone.
  if (keep === match.length && isNumericSep(text.charCodeAt(end)) && isDigit(text.charCodeAt(end + 1))) return;
  if (isDigit(text.charCodeAt(start)) && continuesDigitChain(text, start)) return;
  if (text.charCodeAt(start - 1) === 32 && fourCapitalsOrDigitsBefore(text, start - 1)) return; // "NL00 BANK 0123 ..."
  if (raw.length > 0 && phoneShapeOk(raw, text, start)) {
    scan.push('phone', start, end);
    return;
  }
  // "+1 415 555 2671 536-22-8145": after a '+', drop trailing groups that belong to the next number.
  if (raw.charCodeAt(0) !== 43) return;
  let shorter = raw;
  for (let i = 0; i < 4; i++) {
    const cut = Math.max(shorter.lastIndexOf(' '), shorter.lastIndexOf('-'), shorter.lastIndexOf('.'), shorter.lastIndexOf('/'));
    if (cut <= 1) break;
    shorter = shorter.slice(0, cut);
    if (phoneShapeOk(shorter, text, start)) {
      scan.push('phone', start, start + shorter.length);
      break;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Secrets and wallets

/** Vendor key shapes (checked on a whole token). */
function knownSecretShape(t: string): boolean {
  switch (t.charCodeAt(0)) {
    case 115: // s
      if (t.startsWith('sk-ant-')) return /^sk-ant-(?:[a-z]{3,8}\d{2}-)?[A-Za-z0-9_-]{20,}$/.test(t) && mixesClasses(t.slice(7), 2);
      if (t.startsWith('sk-')) {
        const rest = t.slice((/^sk-(?:proj|svcacct|admin)-/.exec(t)?.[0] ?? 'sk-').length);
        return rest.length >= 20 && /^[A-Za-z0-9_-]+$/.test(rest) && /\d/.test(rest) && mixesClasses(rest, 2);
      }
      if (t.startsWith('sk_live_') || t.startsWith('sk_test_')) return /^sk_(?:live|test)_[A-Za-z0-9]{16,}$/.test(t);
      return false;
    case 114: // r
      return /^rk_(?:live|test)_[A-Za-z0-9]{16,}$/.test(t);
    case 65: // A
      return /^(?:AKIA|ASIA)[A-Z0-9]{16}$/.test(t) || /^AIza[0-9A-Za-z_-]{35}$/.test(t);
    case 103: // g
      return /^gh[pousr]_[A-Za-z0-9]{30,}$/.test(t) || /^github_pat_[A-Za-z0-9_]{40,}$/.test(t) || /^glpat-[A-Za-z0-9_-]{20,}$/.test(t);
    case 120: // x
      return /^xox[abpors]-[A-Za-z0-9-]{10,}$/.test(t) && /\d/.test(t);
    case 110: // n
      return /^npm_[A-Za-z0-9]{36}$/.test(t);
    case 104: // h
      return /^hf_[A-Za-z0-9]{30,}$/.test(t);
    case 119: // w
      return /^wgt_[A-Za-z0-9_-]{40,}$/.test(t);
    default:
      return false;
  }
}

function classCounts(t: string): { upper: number; lower: number; digit: number } {
  let upper = 0;
  let lower = 0;
  let digit = 0;
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i);
    if (c >= 65 && c <= 90) upper++;
    else if (c >= 97 && c <= 122) lower++;
    else if (c >= 48 && c <= 57) digit++;
  }
  return { upper, lower, digit };
}

function mixesClasses(t: string, min: number): boolean {
  const { upper, lower, digit } = classCounts(t);
  return (upper > 0 ? 1 : 0) + (lower > 0 ? 1 : 0) + (digit > 0 ? 1 : 0) >= min;
}

const ENTROPY_COUNTS = new Uint32Array(128);

/** Shannon entropy in bits per character. */
function shannonEntropy(t: string): number {
  const counts = ENTROPY_COUNTS;
  let other: Map<number, number> | undefined;
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i);
    if (c < 128) counts[c] = counts[c]! + 1;
    else (other ??= new Map()).set(c, (other.get(c) ?? 0) + 1);
  }
  let h = 0;
  const n = t.length;
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i);
    if (c >= 128 || counts[c] === 0) continue;
    const p = counts[c]! / n;
    h -= p * Math.log2(p);
    counts[c] = 0;
  }
  for (const k of other?.values() ?? []) h -= (k / n) * Math.log2(k / n);
  return h;
}

/** Character class: 1 digit, 2 upper, 3 lower, 0 anything else. */
function charClass(c: number): number {
  return c >= 48 && c <= 57 ? 1 : c >= 65 && c <= 90 ? 2 : c >= 97 && c <= 122 ? 3 : 0;
}

/** Kind of the run classRunEnd() measured last (set there, to avoid allocating a pair per run). */
let runKind = 0;

/** End of the run starting at i: digits, UPPER, lower, or a Capitalised word (kind 4); kind 0 is one other character. */
function classRunEnd(t: string, i: number): number {
  const k = charClass(t.charCodeAt(i));
  let j = i + 1;
  runKind = k;
  if (k === 0) return j;
  if (k === 2 && charClass(t.charCodeAt(j)) === 3) {
    while (charClass(t.charCodeAt(j)) === 3) j++;
    runKind = 4;
    return j;
  }
  while (j < t.length && charClass(t.charCodeAt(j)) === k) j++;
  return j;
}

/**
 * Share of the token made of word-like letter runs of 4+ (lower-case, Capitalised or UPPER). Identifiers, paths and
 * slugs are mostly words; a random key rarely has 4 letters of one case in a row.
 */
function wordShare(t: string): number {
  let inWords = 0;
  for (let i = 0; i < t.length; ) {
    const end = classRunEnd(t, i);
    if (runKind >= 2 && end - i >= 4) inWords += end - i;
    i = end;
  }
  return inWords / t.length;
}

/**
 * Two or more separator-delimited segments, each a number, at most 3 characters, or made of words of 2+ letters:
 * `order_ID_2024_00042_US_EAST`, `v2-Alpha-Build20240315-Win64` are names, not keys.
 */
function structuredName(t: string): boolean {
  let segments = 0;
  let segmentLength = 0;
  let oneLetterRun = false;
  for (let i = 0; i <= t.length; ) {
    const end = i < t.length ? classRunEnd(t, i) : i + 1;
    const kind = i < t.length ? runKind : 0;
    if (kind === 0) {
      if (segmentLength > 0) {
        segments++;
        if (oneLetterRun && segmentLength > 3) return false;
      }
      segmentLength = 0;
      oneLetterRun = false;
    } else {
      segmentLength += end - i;
      if (kind !== 1 && end - i < 2) oneLetterRun = true;
    }
    i = end;
  }
  return segments >= 2;
}

function vowelShare(t: string): number {
  let letters = 0;
  let vowels = 0;
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i) | 0x20; // lower-case ASCII letters
    if (c >= 97 && c <= 122) {
      letters++;
      if (c === 97 || c === 101 || c === 105 || c === 111 || c === 117 || c === 121) vowels++;
    }
  }
  return letters === 0 ? 0 : vowels / letters;
}

const HEXISH = /^(?:0x)?[0-9a-fA-F-]+$/;
/**
 * Random identifiers of API objects are not secrets: OpenAI/Anthropic/Stripe ids (`chatcmpl-...`, `msg_...`,
 * `call_...`, `cus_...`) and Waygate's own (`batch_...`, `agt_...`).
 */
const RESOURCE_ID =
  /^(?:chatcmpl|cmpl|msg|msgbatch|req|batch|file|asst|thread|run|step|call|toolu|resp|evt|ft|ftjob|vs|vsfb|org|user|cus|pi|pm|ch|in|sub|prod|price|txn|agt|sess|conv|span|trace|job|task|img|emb|mod|modr|upload|part|item)[-_]/;

function isTokenSeparator(c: number): boolean {
  return c === 45 || c === 95 || c === 43 || c === 47; // - _ + /
}

/** Share of adjacent pairs that ascend by one code point (`abcdefgh`, `0123456789`): alphabets, not keys. */
function sequentialShare(t: string): number {
  let seq = 0;
  for (let i = 1; i < t.length; i++) if (t.charCodeAt(i) === t.charCodeAt(i - 1) + 1) seq++;
  return seq / (t.length - 1);
}
const WALLET_SHAPED = /^(?:[13][1-9A-HJ-NP-Za-km-z]{25,34}|(?:bc|tb|BC|TB)1[02-9ac-hj-np-zAC-HJ-NP-Z]{8,87})$/;

/**
 * A generic secret: 20+ characters with digits and letters, high Shannon entropy for its length, and not made of
 * words; never hex (hashes, UUIDs), integrity hashes (`sha384-...`), structured names or wallet-shaped strings that
 * failed their checksum. Single-case tokens (base36) need 24+ characters, higher entropy and few vowels.
 */
export function looksLikeSecret(token: string): boolean {
  // Trim padding and separators in code: `[-_+/]+$` would rescan a long separator run from every position.
  let start = 0;
  let end = token.length;
  while (end > 0 && token.charCodeAt(end - 1) === 61) end--;
  while (end > 0 && isTokenSeparator(token.charCodeAt(end - 1))) end--;
  while (start < end && isTokenSeparator(token.charCodeAt(start))) start++;
  const t = token.slice(start, end);
  if (t.length < 20 || HEXISH.test(t) || WALLET_SHAPED.test(t) || /^sha(?:1|224|256|384|512)-/i.test(t)) return false;
  // `eyJ` is base64 of '{"': JSON (a JWT part on its own), not a key; whole JWTs are found by their own detector.
  if (RESOURCE_ID.test(t) || t.startsWith('eyJ') || sequentialShare(t) > 0.25) return false;
  const { upper, lower, digit } = classCounts(t);
  if (digit === 0 || (upper === 0 && lower === 0)) return false;
  const mixedCase = upper > 0 && lower > 0;
  if (!mixedCase && t.length < 24) return false;
  // Random base62 strings of length 20, 24, 32, 40 have a 5th-percentile entropy near 3.8, 4.0, 4.3, 4.6 bits.
  const threshold = mixedCase ? Math.min(4.6, 3.55 + 0.035 * (t.length - 20)) : Math.min(4.3, 3.7 + 0.03 * (t.length - 24));
  if (shannonEntropy(t) < threshold || structuredName(t)) return false;
  return mixedCase ? wordShare(t) <= 0.45 : vowelShare(t) < 0.3;
}

const JWT_RE = /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*/g;

function jwtHeaderOk(segment: string): boolean {
  if (segment.length > 2000) return false;
  try {
    const header: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
    return typeof header === 'object' && header !== null && typeof (header as { alg?: unknown }).alg === 'string';
  } catch {
    return false;
  }
}

const PEM_BEGIN_RE = /-----BEGIN (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY( BLOCK)?-----/g;
const PEM_END_RE = /-----END (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----/y;

/** Whether "-----BEGIN " occurs, found from each "BEGIN " (a plain search for a rare first character). */
function hasPemBegin(text: string): boolean {
  for (let i = text.indexOf('BEGIN ', 5); i !== -1; i = text.indexOf('BEGIN ', i + 6)) if (text.startsWith('-----', i - 5)) return true;
  return false;
}

function detectPem(scan: Scan): void {
  const { text } = scan;
  if (!hasPemBegin(text)) return;
  PEM_BEGIN_RE.lastIndex = 0;
  // The next "-----END " at or after a position, searched again only when a block passes it (linear overall).
  let endMarker = -2;
  for (let m = PEM_BEGIN_RE.exec(text); m; m = PEM_BEGIN_RE.exec(text)) {
    const bodyStart = m.index + m[0].length;
    if (endMarker !== -1 && endMarker < bodyStart) endMarker = text.indexOf('-----END ', bodyStart);
    let end = -1;
    if (endMarker !== -1 && endMarker - bodyStart <= 16_384) {
      PEM_END_RE.lastIndex = endMarker;
      const e = PEM_END_RE.exec(text);
      if (e) end = endMarker + e[0].length;
    }
    if (end === -1) {
      // A truncated block: the header and whatever base64 body follows (up to the next blank line or marker).
      end = bodyStart;
      while (end < text.length && end - bodyStart <= 16_384 && /[A-Za-z0-9+/=\s:,]/.test(text.charAt(end))) {
        if (text.charCodeAt(end) === 10 && text.charCodeAt(end + 1) === 10) break;
        end++;
      }
      while (end > bodyStart && /\s/.test(text.charAt(end - 1))) end--;
    }
    scan.push('api_key', m.index, end);
    PEM_BEGIN_RE.lastIndex = Math.max(end, PEM_BEGIN_RE.lastIndex);
  }
}

const TOKEN_CHAR = new Uint8Array(128);
for (const ch of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+/-') TOKEN_CHAR[ch.charCodeAt(0)] = 1;
const MIN_TOKEN = 20;

function isTokenCode(c: number): boolean {
  return c < 128 && TOKEN_CHAR[c] === 1;
}

/**
 * Runs of [A-Za-z0-9_+/-] of 20+ characters, found by probing every 20th character: a probe outside a run rules out
 * the 20 positions before it, so ordinary prose is read about three characters in twenty.
 */
function forEachLongToken(codes: Uint16Array, visit: (start: number, end: number) => void): void {
  const n = codes.length;
  let i = 0;
  while (i + MIN_TOKEN - 1 < n) {
    const probe = i + MIN_TOKEN - 1;
    if (!isTokenCode(codes[probe]!)) {
      i = probe + 1;
      continue;
    }
    let start = probe;
    while (start > 0 && isTokenCode(codes[start - 1]!)) start--;
    let end = probe + 1;
    while (end < n && isTokenCode(codes[end]!)) end++;
    if (end - start >= MIN_TOKEN) visit(start, end);
    i = end + 1;
  }
}

function detectTokens(scan: Scan): void {
  const { text } = scan;
  const wantKeys = scan.on('api_key');
  const wantWallets = scan.on('crypto_wallet');
  forEachLongToken(scan.codes, (start, runEnd) => {
    let end = runEnd;
    const token = text.slice(start, end);
    if (wantWallets) {
      const c0 = token.charCodeAt(0);
      const wallet =
        c0 === 48 // 0
          ? token.length === 42 && ethAddressValid(token)
          : c0 === 49 || c0 === 51 // 1, 3
            ? btcBase58Valid(token)
            : (c0 === 98 || c0 === 116 || c0 === 66 || c0 === 84) && bech32AddressValid(token); // b t B T
      if (wallet && !isWordAt(text, end)) {
        scan.push('crypto_wallet', start, end);
        return;
      }
    }
    if (!wantKeys || isWordAt(text, end)) return;
    if (knownSecretShape(token)) {
      scan.push('api_key', start, end);
      return;
    }
    let pad = 0;
    while (pad < 2 && text.charCodeAt(end) === 61) {
      end++;
      pad++;
    }
    if (isWordAt(text, end) || text.charCodeAt(start - 1) === 46) return; // part of a dotted name or longer word
    if (text.slice(Math.max(0, start - 7), start).toLowerCase() === 'base64,') return; // data: URI content
    if (looksLikeSecret(token) && !scan.insideUrl(start, end)) scan.push('api_key', start, end, GENERIC_TOKEN_PRIORITY);
  });
}

/** Whether "eyJ" occurs, found from each 'J' (rare in prose, while 'e' is everywhere). */
function hasEyJ(text: string): boolean {
  for (let j = text.indexOf('J', 2); j !== -1; j = text.indexOf('J', j + 1)) {
    if (text.charCodeAt(j - 1) === 121 && text.charCodeAt(j - 2) === 101) return true;
  }
  return false;
}

function detectJwts(scan: Scan): void {
  const { text } = scan;
  if (!hasEyJ(text)) return;
  JWT_RE.lastIndex = 0;
  for (let m = JWT_RE.exec(text); m; m = JWT_RE.exec(text)) {
    const header = m[0].slice(0, m[0].indexOf('.'));
    if (jwtHeaderOk(header)) scan.push('api_key', m.index, m.index + m[0].length);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Keyword-anchored: passports, dates of birth, AWS secrets, SSNs and national ids written without their usual shape

const MONTHS: Record<string, number> = {};
(
  [
    ['january jan januar janvier enero gennaio januari ocak janeiro jänner', 1],
    ['february feb februar février fevrier febrero febbraio februari şubat subat fevereiro', 2],
    ['march mar märz maerz mars marzo maart mart março marco', 3],
    ['april apr avril abril aprile nisan', 4],
    ['may mai mayo maggio mei mayıs mayis maio', 5],
    ['june jun juni juin junio giugno haziran junho', 6],
    ['july jul juli juillet julio luglio temmuz julho', 7],
    ['august aug august août aout agosto augustus ağustos agustos', 8],
    ['september sep sept septembre septiembre setiembre settembre eylül eylul setembro', 9],
    ['october oct oktober octobre octubre ottobre ekim outubro', 10],
    ['november nov novembre noviembre kasım kasim novembro', 11],
    ['december dec dezember décembre decembre diciembre dicembre aralık aralik dezembro', 12],
  ] as const
).forEach(([names, month]) => {
  for (const name of names.split(' ')) MONTHS[name] = month;
});
const MONTH_ALT = Object.keys(MONTHS)
  .sort((a, b) => b.length - a.length)
  .join('|');
const DATE_RE = new RegExp(
  '(?<![\\p{L}\\p{N}])(?:(\\d{4})[-./](\\d{1,2})[-./](\\d{1,2})|(\\d{1,2})[-./](\\d{1,2})[-./](\\d{4}|\\d{2})' +
    `|(\\d{1,2})(?:st|nd|rd|th|er)?\\.?[ \\t]{1,2}(?:of[ \\t]|de[ \\t])?(${MONTH_ALT})\\.?,?[ \\t]{1,2}(?:de[ \\t])?(\\d{4})` +
    `|(${MONTH_ALT})\\.?[ \\t]{1,2}(\\d{1,2})(?:st|nd|rd|th)?,?[ \\t]{1,2}(\\d{4}))(?![\\p{L}\\p{N}])`,
  'iu',
);

/** The current UTC year, looked up at most once an hour. */
let yearCache = { year: 0, until: 0 };

function currentYear(): number {
  const now = Date.now();
  if (now >= yearCache.until) yearCache = { year: new Date(now).getUTCFullYear(), until: now + 3_600_000 };
  return yearCache.year;
}

function birthYearOk(y: number): boolean {
  return y >= 1900 && y <= currentYear();
}

const DATE_ALL_RE = new RegExp(DATE_RE.source, 'giu');

function plausibleBirthDate(m: RegExpExecArray): boolean {
  if (m[1] !== undefined) return birthYearOk(Number(m[1])) && isValidDate(Number(m[1]), Number(m[2]), Number(m[3]));
  if (m[4] !== undefined) {
    let y = Number(m[6]);
    if ((m[6] ?? '').length === 2) y += y > currentYear() % 100 ? 1900 : 2000;
    const a = Number(m[4]);
    const b = Number(m[5]);
    return birthYearOk(y) && (isValidDate(y, b, a) || isValidDate(y, a, b));
  }
  if (m[7] !== undefined) {
    return birthYearOk(Number(m[9])) && isValidDate(Number(m[9]), MONTHS[(m[8] ?? '').toLowerCase()] ?? 0, Number(m[7]));
  }
  return birthYearOk(Number(m[12])) && isValidDate(Number(m[12]), MONTHS[(m[10] ?? '').toLowerCase()] ?? 0, Number(m[11]));
}

/** The first plausible date starting within `maxGap` characters of `from` (the gap holds no sentence end). */
function dateAfter(text: string, from: number, maxGap: number): [number, number] | undefined {
  const window = text.slice(from, from + maxGap + 32);
  const m = DATE_RE.exec(window);
  if (!m || m.index > maxGap) return undefined;
  const gap = window.slice(0, m.index);
  if (/[.!?]\s|\n\s*\n/.test(gap) || !plausibleBirthDate(m)) return undefined;
  return [from + m.index, from + m.index + m[0].length];
}

/** A plausible date ending within a few characters before `to`. */
function dateBefore(text: string, to: number): [number, number] | undefined {
  const from = Math.max(0, to - 40);
  const window = text.slice(from, to);
  const re = DATE_ALL_RE;
  re.lastIndex = 0;
  let last: [number, number] | undefined;
  for (let m = re.exec(window); m; m = re.exec(window)) {
    if (window.length - (m.index + m[0].length) <= 6 && plausibleBirthDate(m)) last = [from + m.index, from + m.index + m[0].length];
  }
  return last;
}

const PASSPORT_NUMBER_RE = /(?<![A-Za-z0-9])[A-Z0-9]{6,10}(?![A-Za-z0-9])/g;
/** Values looked for in the window after their keyword. */
const AWS_SECRET_VALUE_RE = /(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])/;
const SSN_LOOSE_RE = /(?<![\d-])(\d{3})[ -]?(\d{2})[ -]?(\d{4})(?![\d-])/;
const BSN_VALUE_RE = /(?<![\d.])(?:\d{4}\.\d{2}\.\d{3}|\d{9})(?!\d|\.\d)/;
const PESEL_VALUE_RE = /(?<!\d)\d{11}(?!\d)/;
const CPF_VALUE_RE = /(?<![\d.])\d{3}\.?\d{3}\.?\d{3}-?\d{2}(?!\d)/;
const AADHAAR_VALUE_RE = /(?<!\d)\d{4}[ -]?\d{4}[ -]?\d{4}(?!\d)/;

function windowMatch(text: string, from: number, length: number, re: RegExp): [number, number, RegExpExecArray] | undefined {
  const window = text.slice(from, from + length);
  const m = re.exec(window);
  return m ? [from + m.index, from + m.index + m[0].length, m] : undefined;
}

function detectByKeyword(scan: Scan): void {
  const { text } = scan;
  if (scan.on('passport')) {
    const { ends } = scan.keywords(KW_PASSPORT);
    for (const kwEnd of ends) {
      const window = text.slice(kwEnd, kwEnd + 48);
      PASSPORT_NUMBER_RE.lastIndex = 0;
      for (let m = PASSPORT_NUMBER_RE.exec(window); m; m = PASSPORT_NUMBER_RE.exec(window)) {
        if (window.slice(0, m.index).includes('\n')) break;
        const digits = digitsOf(m[0]).length;
        if (digits >= 2 && !/^(?:19|20)\d{6}$/.test(m[0])) {
          scan.push('passport', kwEnd + m.index, kwEnd + m.index + m[0].length);
          break;
        }
      }
    }
  }
  if (scan.on('date_of_birth')) {
    for (const kwEnd of scan.keywords(KW_BIRTH).ends) {
      const span = dateAfter(text, kwEnd, 36);
      if (span) scan.push('date_of_birth', span[0], span[1]);
    }
    const postfix = scan.keywords(KW_BIRTH_POSTFIX);
    postfix.ends.forEach((kwEnd, i) => {
      const span = dateAfter(text, kwEnd, 16) ?? dateBefore(text, postfix.starts[i] ?? 0);
      if (span) scan.push('date_of_birth', span[0], span[1]);
    });
  }
  if (scan.on('api_key')) {
    for (const kwEnd of scan.keywords(KW_AWS_SECRET).ends) {
      const found = windowMatch(text, kwEnd, 64, AWS_SECRET_VALUE_RE);
      if (found) scan.push('api_key', found[0], found[1]);
    }
  }
  if (scan.on('us_ssn')) {
    for (const kwEnd of scan.keywords(KW_SSN).ends) {
      const found = windowMatch(text, kwEnd, 32, SSN_LOOSE_RE);
      if (found && ssnValid(found[2][1] ?? '', found[2][2] ?? '', found[2][3] ?? '')) scan.push('us_ssn', found[0], found[1]);
    }
  }
  if (scan.on('national_id')) {
    const hits = scan.keywords(KW_NATIONAL);
    hits.ends.forEach((kwEnd, i) => {
      const word = hits.words[i] ?? '';
      let found: [number, number, RegExpExecArray] | undefined;
      let ok = false;
      if (word === 'bsn' || word === 'burgerservicenummer' || word === 'sofinummer') {
        found = windowMatch(text, kwEnd, 32, BSN_VALUE_RE);
        ok = found !== undefined && bsnValid(digitsOf(found[2][0]));
      } else if (word === 'pesel') {
        found = windowMatch(text, kwEnd, 32, PESEL_VALUE_RE);
        ok = found !== undefined && peselValid(found[2][0]);
      } else if (word === 'cpf') {
        found = windowMatch(text, kwEnd, 32, CPF_VALUE_RE);
        ok = found !== undefined && cpfValid(digitsOf(found[2][0]));
      } else {
        found = windowMatch(text, kwEnd, 32, AADHAAR_VALUE_RE);
        ok = found !== undefined && aadhaarValid(digitsOf(found[2][0]));
      }
      if (found && ok) scan.push('national_id', found[0], found[1]);
    });
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Street addresses

// Latin-script letters as explicit ranges, so these patterns run without the (slower) Unicode flag. Latin Extended-A
// interleaves cases, so the whole block counts as a possible capital.
const L = 'A-Za-z\\u00C0-\\u00D6\\u00D8-\\u00F6\\u00F8-\\u024F';
const LU = '[A-Z\\u00C0-\\u00D6\\u00D8-\\u00DE\\u0100-\\u024F]';
/** Not preceded / followed by a letter or digit. */
const NOT_AFTER_WORD = `(?<![${L}0-9_])`;
const NOT_BEFORE_WORD = `(?![${L}0-9])`;
const NAME = `${LU}[${L}'’.-]{0,24}`;
const TITLE_WORDS = '(?!(?:The|A|An|Of|And|In|On|At|For|To|By|With|My|Our|Your|His|Her|Their|This|That|These|Those|We|I)[ \\t])';
const EN_SUFFIX =
  'Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Way|Court|Ct|Place|Pl|Terrace|Parkway|Pkwy|' +
  'Highway|Hwy|Square|Sq|Circle|Cir|Crescent|Close|Trail|Alley|Plaza|Row|Mews|Grove|Gardens|' +
  'STREET|ST|AVENUE|AVE|ROAD|RD|BOULEVARD|BLVD|LANE|LN|DRIVE|DR|WAY|COURT|CT|PLACE|PL';
const UNIT = '(?:,?[ \\t]{1,3}(?:Apt|Apartment|Suite|Ste|Unit|Floor|Fl|Room|Rm|Flat|#)\\.?[ \\t]{0,2}#?[A-Za-z0-9-]{1,6})?';
const CITY_WORD = `${LU}[${L}'’.-]{0,24}${NOT_BEFORE_WORD}`;
const CITY_TAIL =
  `(?:,[ \\t]{1,3}${CITY_WORD}(?:[ \\t]${CITY_WORD}){0,2}` +
  `(?:,?[ \\t]{1,3}(?:\\d{5}(?:-\\d{4})?|[A-Z]{1,2}\\d[A-Z\\d]?[ ]?\\d[A-Z]{2}|[A-Z]{2}${NOT_BEFORE_WORD}(?:[ \\t]{1,3}\\d{5}(?:-\\d{4})?)?))?)?`;
const POSTCODE_CITY = `(?:,?[ \\t]{1,3}\\d{4,5}(?:[ \\t]?[A-Z]{2})?[ \\t]{1,3}${NAME}(?:[ \\t]${NAME})?)?`;

const NUMBER_FIRST = `\\d(?<![${L}0-9_.,/-]\\d)\\d{0,4}`;
const FR_TYPES = '[Rr]ue|[Aa]venue|[Bb]oulevard|[Bb]d|[Pp]lace|[Aa]llée|[Cc]hemin|[Ii]mpasse|[Qq]uai|[Cc]ours';
const DE_SUFFIX = 'straße|strasse|str\\.|weg|gasse|allee|platz|damm|ufer|chaussee|straat|laan|gracht|plein|kade|singel|dijk|steeg';
const DE_WORD = 'Straße|Strasse|Str\\.|Weg|Allee|Platz|Gasse|Damm|Ufer';
const TR_TYPES = 'Caddesi|Cad\\.|Cd\\.|Sokak|Sokağı|Sk\\.|Sok\\.|Bulvarı|Blv\\.|Bulv\\.';
const TR_NUMBER = '(?:(?:No|NO|no|Nr)\\.?[ \\t]{0,2}:?[ \\t]{0,2})?';

/**
 * Number first: 221B Baker Street, London NW1 6XE; 350 5th Ave, Suite 3400; 12 rue de la Paix, 75002 Paris. Sticky:
 * tried only at the runs of digits numberFirstCandidate() lets through.
 */
const STREET_NUMBER_FIRST_RE = new RegExp(
  `${NUMBER_FIRST}[A-Za-z]?(?:[-/]\\d{1,5}[A-Za-z]?)?(?:[ \\t]?(?:bis|ter))?,?[ \\t]{1,3}(?:` +
    `(?:${FR_TYPES})[ \\t]{1,3}(?:(?:de|du|des|la|le|les|l'|l’|d'|d’|Saint|Sainte)[ \\t]{0,3}){0,3}${NAME}(?:[ \\t]{1,3}(?:(?:de|du|des|la|le)[ \\t]{1,3})?${NAME}){0,3}${POSTCODE_CITY}` +
    `|(?:${TITLE_WORDS}(?:${NAME}|\\d{1,3}(?:st|nd|rd|th))[ \\t]{1,3}){1,4}(?:${EN_SUFFIX})\\.?(?:[ \\t](?:N|S|E|W|NE|NW|SE|SW)${NOT_BEFORE_WORD})?${NOT_BEFORE_WORD}${UNIT}${CITY_TAIL})`,
  'y',
);

/**
 * Name first, number after (German, Dutch, Turkish): found from the street word, then matched in a small window. The
 * street words are found from the digits instead of by trying every position: the word must end right before
 * `[ \t,]{0,3}` + TR_NUMBER + a digit, so each run of digits looks back over at most 11 such characters for one.
 * No word is a prefix of another, so at most one starts at a position; found left to right without overlaps, as the
 * global regex `(?:words)(?=[ \t,]{0,3}TR_NUMBER\d)` would.
 */
const STREET_ANCHOR_WORDS = `${DE_SUFFIX}|${DE_WORD}|${TR_TYPES}`.split('|').map((w) => w.replace(/\\\./g, '.'));
/**
 * The street words by their last two characters (codes below U+0132 each): STREET_ANCHOR_LAST numbers the last
 * characters (1-based), STREET_ANCHOR_PAIR marks [last number * 0x132 + the character before], and
 * STREET_ANCHOR_BY_END lists the words of each pair.
 */
const STREET_ANCHOR_LAST = new Uint8Array(0x132);
const STREET_ANCHOR_BY_END = new Map<number, string[]>();
let streetAnchorLasts = 0;
for (const w of STREET_ANCHOR_WORDS) {
  const last = w.charCodeAt(w.length - 1);
  if (STREET_ANCHOR_LAST[last] === 0) STREET_ANCHOR_LAST[last] = ++streetAnchorLasts;
  const key = last * 0x10000 + w.charCodeAt(w.length - 2);
  STREET_ANCHOR_BY_END.set(key, [...(STREET_ANCHOR_BY_END.get(key) ?? []), w]);
}
const STREET_ANCHOR_PAIR = new Uint8Array((streetAnchorLasts + 1) * 0x132);
for (const w of STREET_ANCHOR_WORDS) STREET_ANCHOR_PAIR[STREET_ANCHOR_LAST[w.charCodeAt(w.length - 1)]! * 0x132 + w.charCodeAt(w.length - 2)] = 1;
/** Longest run of characters TR_NUMBER's gap allows between the street word and the digit: 3 + No + . + 2 + : + 2. */
const STREET_ANCHOR_GAP = 11;

/** Whether `word` is at `i` in `codes`. */
function codesStartWith(codes: Uint16Array, i: number, word: string): boolean {
  if (i < 0 || i + word.length > codes.length) return false;
  for (let k = 0; k < word.length; k++) if (codes[i + k] !== word.charCodeAt(k)) return false;
  return true;
}

function isSpaceTab(c: number): boolean {
  return c === 32 || c === 9;
}

/** Characters the gap `[ \t,]{0,3}(?:(?:No|NO|no|Nr)\.?[ \t]{0,2}:?[ \t]{0,2})?` can hold. */
function isAnchorGapCode(c: number): boolean {
  return c === 32 || c === 9 || c === 44 || c === 78 || c === 110 || c === 111 || c === 79 || c === 114 || c === 46 || c === 58;
}

/** Whether `[ \t,]{0,3}(?:(?:No|NO|no|Nr)\.?[ \t]{0,2}:?[ \t]{0,2})?\d` matches at `e`. */
function anchorGapAt(codes: Uint16Array, e: number): boolean {
  for (let a = 0; a <= 3; a++) {
    const i = e + a;
    if (a > 0) {
      const c = codes[i - 1]!;
      if (c !== 32 && c !== 9 && c !== 44) break;
    }
    if (isDigit(codes[i]!)) return true;
    const c0 = codes[i]!;
    const c1 = codes[i + 1]!;
    if (!((c0 === 78 && (c1 === 111 || c1 === 79 || c1 === 114)) || (c0 === 110 && c1 === 111))) continue;
    // After the number word, `\.?` can only succeed by taking a '.', since nothing after it may start with one.
    const j = codes[i + 2]! === 46 ? i + 3 : i + 2;
    for (let s1 = 0; s1 <= 2; s1++) {
      if (s1 > 0 && !isSpaceTab(codes[j + s1 - 1]!)) break;
      const k = j + s1;
      for (let colon = 0; colon <= (codes[k]! === 58 ? 1 : 0); colon++) {
        for (let s2 = 0; s2 <= 2; s2++) {
          if (s2 > 0 && !isSpaceTab(codes[k + colon + s2 - 1]!)) break;
          if (isDigit(codes[k + colon + s2]!)) return true;
        }
      }
    }
  }
  return false;
}

/** Start of each street word that the anchor pattern would match, in order. */
function streetAnchors(codes: Uint16Array, runs: DigitRuns): number[] {
  const anchors: number[] = [];
  /** Words found before the current run: [start, length] pairs (usually none, at most a few). */
  let found: number[] | undefined;
  let from = 0;
  for (const digit of runs.starts) {
    // Right before the digit is a street word's last character or the gap: rules out most runs at once.
    const before = codes[digit - 1];
    if (before === undefined || before >= 0x132 || (STREET_ANCHOR_LAST[before] === 0 && !isAnchorGapCode(before))) continue;
    for (let e = digit; e > 0 && digit - e <= STREET_ANCHOR_GAP; e--) {
      if (e < digit && !isAnchorGapCode(codes[e]!)) break;
      const last = codes[e - 1]!;
      const lastNumber = last < 0x132 ? STREET_ANCHOR_LAST[last]! : 0;
      if (lastNumber === 0) continue;
      const prev = codes[e - 2];
      if (prev === undefined || prev >= 0x132 || STREET_ANCHOR_PAIR[lastNumber * 0x132 + prev] === 0) continue;
      const words = STREET_ANCHOR_BY_END.get(last * 0x10000 + prev);
      if (!words) continue;
      for (const w of words) {
        if (e - w.length >= 0 && codesStartWith(codes, e - w.length, w) && anchorGapAt(codes, e)) {
          (found ??= []).push(e - w.length, w.length);
          break;
        }
      }
    }
    if (!found) continue;
    // In order of start, each at or after the end of the one before.
    for (;;) {
      let best = -1;
      for (let i = 0; i < found.length; i += 2) if (found[i]! >= from && (best === -1 || found[i]! < found[best]!)) best = i;
      if (best === -1) break;
      anchors.push(found[best]!);
      from = found[best]! + found[best + 1]!;
    }
    found = undefined;
  }
  return anchors;
}

const STREET_NAME_FIRST_RES = [
  // Hauptstraße 5, 10115 Berlin; Berliner Str. 12; Keizersgracht 123, 1015 CJ Amsterdam
  new RegExp(
    `${NOT_AFTER_WORD}${LU}[${L}-]{1,30}(?:${DE_SUFFIX}|[ \\t](?:${DE_WORD}))[ \\t]{1,3}\\d{1,4}[a-z]?(?:[ \\t]?[-/][ \\t]?\\d{1,4}[a-z]?)?${NOT_BEFORE_WORD}${POSTCODE_CITY}`,
    'g',
  ),
  // Atatürk Caddesi No: 25, Bağdat Cad. No:123/4 Kadıköy/İstanbul, Cumhuriyet Mah. Gül Sokak No 5
  new RegExp(
    `${NOT_AFTER_WORD}(?:${LU}[${L}]{1,30}[ \\t]{1,3}(?:Mahallesi|Mah\\.|Mh\\.)[ \\t,]{1,3})?${LU}[${L}]{1,30}(?:[ \\t]{1,3}${LU}[${L}]{1,30}){0,2}[ \\t]{1,3}` +
      `(?:${TR_TYPES})[ \\t,]{0,3}${TR_NUMBER}\\d{1,4}[A-Za-z]?(?:[ \\t]?/[ \\t]?\\d{1,4})?` +
      `${NOT_BEFORE_WORD}(?:[ \\t,]{1,3}(?:D|Daire|Kat)[ \\t]?:?[ \\t]?\\d{1,3})?(?:[ \\t,]{1,3}(?:\\d{5}[ \\t]{1,3})?${LU}[${L}]{1,30}(?:[ \\t]?/[ \\t]?${LU}[${L}]{1,30})?)?`,
    'g',
  ),
];
/**
 * Type first, number after: Calle Mayor 10, Via Roma 15, Avenida Paulista 1578, Rua Augusta 1500. Sticky: tried where
 * the text index found one of STREET_TYPES at the start of a word.
 */
const STREET_TYPE_FIRST_RE = new RegExp(
  `\\b(?:${STREET_TYPES.map((w) => w.replace('.', '\\.')).join('|')})[ \\t]{1,3}` +
    `(?:(?:de|del|la|las|los|el|da|do|dos|das|di|della|dei|degli)[ \\t]{1,3}){0,3}${NAME}(?:[ \\t]{1,3}(?:(?:de|del|la|di|da|do)[ \\t]{1,3})?${NAME}){0,3},?[ \\t]{1,3}` +
    `(?:[Nn][º°o]\\.?[ \\t]?)?\\d{1,4}[A-Za-z]?${NOT_BEFORE_WORD}${POSTCODE_CITY}`,
  'y',
);

function pushStreet(scan: Scan, start: number, end: number): void {
  while (end > start && /[\s,.]/.test(scan.text.charAt(end - 1))) end--;
  scan.push('street_address', start, end);
}

/** Latin letters as in L: ASCII, Latin-1 (but × and ÷) and Latin Extended-A/B up to U+024F. */
function isLatinLetter(c: number): boolean {
  return c < 128 ? isAsciiLetter(c) : (c >= 0xc0 && c <= 0x24f && c !== 0xd7 && c !== 0xf7);
}

/** As LU: an ASCII or Latin-1 capital, or any letter of Latin Extended-A/B. */
function isLatinUpper(c: number): boolean {
  return isAsciiUpper(c) || (c >= 0xc0 && c <= 0xde && c !== 0xd7) || (c >= 0x100 && c <= 0x24f);
}

/** Whether a French street type written in lower case (as FR_TYPES allows) starts at `t`. */
function frTypeLowerAt(codes: Uint16Array, t: number): boolean {
  switch (codes[t]!) {
    case 114: // r
      return codesStartWith(codes, t, 'rue');
    case 97: // a
      return codesStartWith(codes, t, 'avenue') || codesStartWith(codes, t, 'allée');
    case 98: // b
      return codesStartWith(codes, t, 'boulevard') || codesStartWith(codes, t, 'bd');
    case 112: // p
      return codesStartWith(codes, t, 'place');
    case 99: // c
      return codesStartWith(codes, t, 'chemin') || codesStartWith(codes, t, 'cours');
    case 105: // i
      return codesStartWith(codes, t, 'impasse');
    case 113: // q
      return codesStartWith(codes, t, 'quai');
    default:
      return false;
  }
}

/** Whether `\d{1,3}(?:st|nd|rd|th)` matches at `t` (a digit). */
function ordinalAt(codes: Uint16Array, t: number): boolean {
  let r = t + 1;
  while (r < t + 4 && isDigit(codes[r]!)) r++;
  if (r - t > 3) return false;
  const a = codes[r]!;
  const b = codes[r + 1]!;
  return (a === 115 && b === 116) || (a === 110 && b === 100) || (a === 114 && b === 100) || (a === 116 && b === 104);
}

/**
 * Whether the number-first pattern can match at the run of digits [start, end). Follows its number part exactly
 * (`\d{1,5}[A-Za-z]?(?:[-/]\d{1,5}[A-Za-z]?)?(?:[ \t]?(?:bis|ter))?,?[ \t]{1,3}`: no letter, digit or joining
 * punctuation before it), then asks for what every alternative starts with: a capital, an ordinal ("5th") or a French
 * street type. The pattern itself then decides.
 */
function numberFirstCandidate(codes: Uint16Array, start: number, end: number): boolean {
  if (end - start > 5) return false;
  const prev = codes[start - 1];
  if (prev !== undefined && prev < 0x250 && NUMBER_FIRST_NOT_AFTER[prev] === 1) return false;
  const next = codes[end];
  if (next === undefined || next >= 128 || NUMBER_FIRST_NEXT[next] === 0) return false;
  return numberSuffixThenStreet(codes, end) || (isAsciiLetter(next) && numberSuffixThenStreet(codes, end + 1));
}

/** What the number-first pattern's lookbehind rules out before the number: [L0-9_.,/-]. */
const NUMBER_FIRST_NOT_AFTER = new Uint8Array(0x250);
for (let c = 0; c < 0x250; c++) if (isLatinLetter(c) || isDigit(c) || c === 95 || c === 46 || c === 44 || c === 47 || c === 45) NUMBER_FIRST_NOT_AFTER[c] = 1;
/** What may follow the digits of a number-first street: a letter, '-', '/', ' ', '\t' or ','. */
const NUMBER_FIRST_NEXT = new Uint8Array(128);
for (let c = 0; c < 128; c++) if (isAsciiLetter(c) || c === 45 || c === 47 || c === 32 || c === 9 || c === 44) NUMBER_FIRST_NEXT[c] = 1;

/** `(?:[-/]\d{1,5}[A-Za-z]?)?` at `i`, then numberTailThenStreet. */
function numberSuffixThenStreet(codes: Uint16Array, i: number): boolean {
  if (numberTailThenStreet(codes, i)) return true;
  const c = codes[i]!;
  if (c !== 45 && c !== 47) return false;
  let j = i + 1;
  while (j < i + 7 && isDigit(codes[j]!)) j++;
  if (j === i + 1 || j - i - 1 > 5 || isDigit(codes[j]!)) return false;
  return numberTailThenStreet(codes, j) || (isAsciiLetter(codes[j]!) && numberTailThenStreet(codes, j + 1));
}

/** `(?:[ \t]?(?:bis|ter))?,?[ \t]{1,3}` at `i`, then a capital, an ordinal or a French street type. */
function numberTailThenStreet(codes: Uint16Array, i: number): boolean {
  if (commaSpacesThenStreet(codes, i)) return true;
  const k = isSpaceTab(codes[i]!) ? i + 1 : i;
  return bisTerAt(codes, k) && commaSpacesThenStreet(codes, k + 3);
}

function bisTerAt(codes: Uint16Array, k: number): boolean {
  const c = codes[k]!;
  return c === 98 ? codes[k + 1]! === 105 && codes[k + 2]! === 115 : c === 116 && codes[k + 1]! === 101 && codes[k + 2]! === 114;
}

function commaSpacesThenStreet(codes: Uint16Array, i: number): boolean {
  let j = codes[i]! === 44 ? i + 1 : i;
  const spaces = j;
  while (j < spaces + 4 && isSpaceTab(codes[j]!)) j++;
  if (j === spaces || j - spaces > 3) return false;
  const first = codes[j]!;
  return isLatinUpper(first) || (isDigit(first) ? ordinalAt(codes, j) : frTypeLowerAt(codes, j));
}

function detectStreets(scan: Scan): void {
  const { text } = scan;
  const runs = scan.digitRuns();
  const { starts, ends } = runs;
  let from = 0;
  for (let k = 0; k < starts.length; k++) {
    const start = starts[k]!;
    if (start < from || !numberFirstCandidate(scan.codes, start, ends[k]!)) continue;
    STREET_NUMBER_FIRST_RE.lastIndex = start;
    const m = STREET_NUMBER_FIRST_RE.exec(text);
    if (!m) continue;
    from = start + m[0].length;
    pushStreet(scan, start, from);
  }
  from = 0;
  for (const start of scan.index().streetTypes) {
    if (start < from) continue;
    STREET_TYPE_FIRST_RE.lastIndex = start;
    const m = STREET_TYPE_FIRST_RE.exec(text);
    if (!m) continue;
    from = start + m[0].length;
    pushStreet(scan, start, from);
  }
  let covered = 0;
  for (const anchor of streetAnchors(scan.codes, runs)) {
    if (anchor < covered) continue;
    // Up to 64 characters of names (and a "Mahallesi") before the street word, the number and a district after it.
    const from = Math.max(0, anchor - 64, covered);
    const window = text.slice(from, anchor + 64);
    for (const re of STREET_NAME_FIRST_RES) {
      re.lastIndex = 0;
      for (let m = re.exec(window); m; m = re.exec(window)) {
        const start = from + m.index;
        const end = start + m[0].length;
        if (start <= anchor && anchor < end && !isWordAt(text, start - 1)) {
          pushStreet(scan, start, end);
          covered = Math.max(covered, end);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Entry points

/** Keeps the longest of overlapping candidates (on equal length the most specific), in order of start. */
function resolve(candidates: Candidate[]): Span[] {
  candidates.sort((a, b) => a.start - b.start || b.end - a.end);
  const out: Span[] = [];
  let i = 0;
  while (i < candidates.length) {
    const first = candidates[i]!;
    let j = i + 1;
    let clusterEnd = first.end;
    while (j < candidates.length && candidates[j]!.start < clusterEnd) {
      clusterEnd = Math.max(clusterEnd, candidates[j]!.end);
      j++;
    }
    if (j === i + 1) {
      out.push({ category: first.category, start: first.start, end: first.end });
    } else {
      const cluster = candidates.slice(i, j);
      cluster.sort((a, b) => b.end - b.start - (a.end - a.start) || a.priority - b.priority || a.start - b.start);
      // Kept spans, sorted by start and non-overlapping: binary search for the neighbours of each new one.
      const kept: Candidate[] = [];
      for (const c of cluster) {
        let lo = 0;
        let hi = kept.length;
        while (lo < hi) {
          const mid = (lo + hi) >> 1;
          if (kept[mid]!.start < c.start) lo = mid + 1;
          else hi = mid;
        }
        const prev = kept[lo - 1];
        const next = kept[lo];
        if ((prev && prev.end > c.start) || (next && next.start < c.end)) continue;
        kept.splice(lo, 0, c);
      }
      for (const c of kept) out.push({ category: c.category, start: c.start, end: c.end });
    }
    i = j;
  }
  return out;
}

/**
 * Finds PII in `text` (already normalised with normalizeText) and returns non-overlapping spans sorted by start.
 * `enabled` limits the categories reported (all by default).
 */
export function scanPii(text: string, enabled: ReadonlySet<PiiCategory> = ALL_CATEGORIES): Span[] {
  if (text.length === 0 || enabled.size === 0) return [];
  const scan = new Scan(text, enabled);
  const on = (c: PiiCategory): boolean => enabled.has(c);
  const digits = hasDigit(text);
  const at = text.indexOf('@') !== -1;

  if (on('email') && at) detectEmails(scan);
  if (on('url') || on('social_handle')) scan.urlSpans();
  if (on('social_handle')) {
    if (at) detectHandles(scan);
    detectBareSocialUrls(scan);
  }
  if (on('ip_address') && (digits || text.indexOf('::') !== -1)) detectIps(scan);
  if (on('api_key') || on('crypto_wallet')) detectTokens(scan);
  if (on('api_key')) {
    detectJwts(scan);
    detectPem(scan);
  }
  if (on('iban')) detectIbans(scan);
  if (on('swift_bic')) detectSwift(scan);
  if (digits) {
    if (on('credit_card')) detectCards(scan);
    if (on('us_ssn')) detectSsns(scan);
    if (on('phone')) detectPhones(scan);
    if (on('street_address')) detectStreets(scan);
    if (on('national_id')) detectNationalIds(scan);
    if (on('passport') || on('date_of_birth') || on('api_key') || on('us_ssn') || on('national_id')) detectByKeyword(scan);
  }
  return resolve(scan.candidates);
}

/** What a redaction puts in place of a finding. */
const redactionMarker = (category: string) => `[REDACTED:${category}]`;
/** A redaction marker at `lastIndex` (sticky): what `redactionMarker` writes. */
export const REDACTION_MARKER = /\[REDACTED:[a-z0-9_]+\]/y;

/** Replaces each span with its redaction marker; spans are applied in order of start, overlaps skipped. */
export function redactPii(text: string, spans: Span[]): string {
  const sorted = [...spans].sort((a, b) => a.start - b.start || b.end - a.end);
  let out = '';
  let pos = 0;
  for (const span of sorted) {
    const start = Math.max(span.start, 0);
    const end = Math.min(span.end, text.length);
    if (start < pos || end <= start) continue;
    out += text.slice(pos, start) + redactionMarker(span.category);
    pos = end;
  }
  return out + text.slice(pos);
}
