/**
 * Invisible characters that obfuscation puts between letters ("p\u200Bassword"): every default-ignorable code point
 * (zero-width spaces and joiners, direction marks and isolates, the BOM, SOFT HYPHEN, variation selectors, tag
 * characters, Hangul fillers, ...), which Unicode says to render as nothing, and MONGOLIAN VOWEL SEPARATOR.
 */
const INVISIBLE = /[\p{Default_Ignorable_Code_Point}\u180E]/gu;

/**
 * The text every detector scans: NFKC (full-width digits, ligatures and other compatibility forms become their plain
 * letters) with invisible characters removed, so obfuscation does not slip past the patterns. Redacted text is
 * returned in this form.
 */
export function normalizeText(text: string): string {
  return text.normalize('NFKC').replace(INVISIBLE, '');
}

/** The normalised text of normalizeWithOffsets, with where each of its characters came from in the original. */
export interface OffsetText {
  text: string;
  /** Maps a span of `text` to the span of the original it was made from. */
  toOriginal(start: number, end: number): [number, number];
}

/** Anything but printable ASCII and line breaks: text without it is its own normal form. */
const NOT_PLAIN = /[^\x20-\x7e\t\n\r]/;
/** A normalised code point that is one of the INVISIBLE characters (the same set: offsets and normalizeText agree). */
const INVISIBLE_CHAR = new RegExp(`^${INVISIBLE.source}$`, 'u');

/**
 * normalizeText, code point by code point, keeping track of offsets, so that what detectors find in the normalised
 * text can be replaced in the original: redaction changes the findings and nothing else. ASCII text (most text) is
 * its own normal form and maps one to one. Unlike normalizeText, combining sequences are not composed across code
 * points, which only matters for text no detector looks at.
 */
export function normalizeWithOffsets(original: string): OffsetText {
  if (!NOT_PLAIN.test(original)) return { text: original, toOriginal: (start, end) => [start, end] };
  const starts: number[] = [];
  const ends: number[] = [];
  let text = '';
  for (let i = 0; i < original.length; ) {
    const code = original.codePointAt(i)!;
    const width = code > 0xffff ? 2 : 1;
    const piece = original.slice(i, i + width);
    const normal = code < 0x80 ? piece : piece.normalize('NFKC');
    if (!INVISIBLE_CHAR.test(normal)) {
      text += normal;
      for (let k = 0; k < normal.length; k++) {
        starts.push(i);
        ends.push(i + width);
      }
    }
    i += width;
  }
  return {
    text,
    toOriginal: (start, end) => (end <= start ? [starts[start] ?? original.length, starts[start] ?? original.length] : [starts[start]!, ends[end - 1]!]),
  };
}
