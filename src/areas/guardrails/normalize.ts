/**
 * Zero-width and invisible formatting characters that obfuscation puts between letters ("p\u200Bassword"): ZERO WIDTH
 * SPACE, NON-JOINER, JOINER, WORD JOINER, the BOM, SOFT HYPHEN, MONGOLIAN VOWEL SEPARATOR, and the invisible math
 * operators U+2061-U+2064.
 */
const INVISIBLE = /[\u200B-\u200D\u2060-\u2064\uFEFF\u00AD\u180E]/g;

/**
 * The text every detector scans: NFKC (full-width digits, ligatures and other compatibility forms become their plain
 * letters) with invisible characters removed, so obfuscation does not slip past the patterns. Redacted text is
 * returned in this form.
 */
export function normalizeText(text: string): string {
  return text.normalize('NFKC').replace(INVISIBLE, '');
}
