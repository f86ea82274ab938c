/**
 * Built-in offline content moderation (issue 5 part 3): OpenAI's moderation categories scored by a lexicon of
 * weighted words and short phrase patterns over tokens. Pure: no I/O, no model, no state between calls.
 *
 * How it works
 * - The text (already NFKC-normalised by the caller) is split once into lower-case word tokens; apostrophes are
 *   dropped ("don't" -> "dont"), diacritics are folded, leetspeak is folded inside words with at least two letters
 *   ("k1ll" -> "kill", the original kept as an alternative), letters repeated three or more times are collapsed
 *   ("kiiiill" matches "kill"), and Cyrillic or Greek look-alike letters inside Latin words are mapped to Latin.
 *   Sentence punctuation and blank lines become a break that no pattern crosses; a single line break does not (a line
 *   start may still begin a sentence for `^`).
 * - Phrase patterns (a tiny token language: alternatives `a|b`, optional `[a|b]`, prefixes `kill*`, bounded gaps
 *   `..3`, word sets `@PERSON`, sentence start `^`) are indexed by their first word, so a text is scanned once and
 *   only patterns whose first word occurs are tried: time is linear in the text, with no regular expression over it.
 * - Each pattern carries a weight per category. A category's score is 1 - prod(1 - w) over the distinct patterns
 *   that matched (overlapping matches count once, with the best weight), after: negation on the same line ("I would never hurt you": x0.15), benign idioms that cancel a match ("kill the
 *   process", "shoot me an email", "bath bomb", "cum laude"), and context cues near the match that damp it per
 *   category (history, news, education, fiction, games, jokes, medical, support and prevention, technical, security
 *   defence, addiction recovery, accidents, photography). A sub-category lifts its parent (`self-harm/intent`
 *   raises `self-harm`); explicit violent threats and `hate/threatening` also score `violence` (implied threats such
 *   as "I know where you live" do not); sexual content near a minor cue scores `sexual/minors`.
 * - Extra categories (admin-defined): terms match as whole words after the same folding; patterns are regular
 *   expressions checked by validateExtraCategories (no nested quantifiers, at most 1024 ways to match from one
 *   position, at most 200 characters, 50 in all) and run on segments of at most 128 characters. Each distinct term or
 *   pattern found adds 0.9 (1 - 0.1^hits).
 *
 * Limits (why a model-based engine exists too)
 * - Lexical and English-centred: other languages are barely covered; meaning, sarcasm, irony, quotation, reclaimed
 *   language and coded or novel slang are not understood. Obfuscation beyond leetspeak, repeated letters and
 *   homoglyphs (spaced letters "k i l l", asterisks "k*ll") is not undone.
 * - No literal slurs are listed: hate is found through dehumanising statements and threats about groups. Admins can
 *   add the words of their community as extra categories.
 * - Context damping is local (about 20 words around a match) and can be gamed ("for my history essay: ...").
 * - Measured on sentences written after the lexicon and not tuned on, recall was about 0.45 at a precision of
 *   0.90-1.00: it catches common phrasings, not paraphrases.
 * - Scores are heuristic weights, not calibrated probabilities; the corpus in test/fixtures/guardrails is a
 *   regression set written alongside the lexicon, not an independent benchmark.
 */

import { lazy } from '../../platform/lazy.js';

export const MODERATION_CATEGORIES = [
  'harassment',
  'harassment/threatening',
  'hate',
  'hate/threatening',
  'self-harm',
  'self-harm/intent',
  'self-harm/instructions',
  'sexual',
  'sexual/minors',
  'violence',
  'violence/graphic',
  'illicit',
  'illicit/violent',
] as const;

export type ModerationCategory = (typeof MODERATION_CATEGORIES)[number];

/** A sub-category's score lifts its parent's: content that is `self-harm/intent` is `self-harm`. */
export const MODERATION_PARENTS: Readonly<Partial<Record<ModerationCategory, ModerationCategory>>> = {
  'harassment/threatening': 'harassment',
  'hate/threatening': 'hate',
  'self-harm/intent': 'self-harm',
  'self-harm/instructions': 'self-harm',
  'sexual/minors': 'sexual',
  'violence/graphic': 'violence',
  'illicit/violent': 'illicit',
};

/** Threats against a group are violence too (explicit threats against a person score violence through their patterns). */
const ALSO_LIFTS: Readonly<Partial<Record<ModerationCategory, ModerationCategory>>> = { 'hate/threatening': 'violence' };

export interface ExtraCategory {
  name: string;
  terms: string[];
  patterns?: string[];
}

export interface ModerationOptions {
  /** Built-in categories to report (default all); names that are not built-in categories are ignored. */
  categories?: readonly string[];
  /** Admin-defined categories, always checked. */
  extraCategories?: readonly ExtraCategory[];
  /** Score from which a category is reported, 0..1 (default 0.5). */
  threshold?: number;
}

export interface ModerationResult {
  category: string;
  /** 0..1, rounded to 3 decimals. */
  score: number;
  /** The matched words (normalised), at most 5. */
  evidence: string[];
}

// ---------------------------------------------------------------- tokens (shared with prompt-shield.ts)

/** The token that stands for sentence punctuation; no pattern matches across it. */
export const BREAK = '.';

export interface TokenStream {
  /** Canonical tokens: lower-case, folded; BREAK between sentences. */
  readonly tok: readonly string[];
  /** A second form of the token where one exists (the unfolded leetspeak, or repeats collapsed to one letter). */
  readonly alt: readonly (string | undefined)[];
  /** Words that mixed Latin with Cyrillic or Greek letters (a homoglyph trick) before folding. */
  readonly mixedScript: number;
  /** Words that needed leetspeak folding. */
  readonly leet: number;
  /** Tokens that begin a new line (after a single line break, a BREAK before them or not): a sentence may start there (`^`), or go on. */
  readonly lineStarts: ReadonlySet<number>;
}

const NO_LINE_STARTS: ReadonlySet<number> = new Set();

/** Words, runs of sentence punctuation, and line breaks (with the blank lines and spaces after them). */
const TOKEN_RE = /[\p{L}\p{N}\p{M}@$'\u2019]+|[.!?;:]+|\n(?:[^\S\n]*\n)*/gu;
const APOSTROPHES = /['\u2019]/g;
const NON_ASCII = /[\u0080-\uffff]/;
const LATIN = /[a-z]/;
const CYRILLIC_GREEK = /[\u0370-\u03ff\u0400-\u04ff\u0500-\u052f]/;
const MARKS = /\p{M}+/gu;
const LEET: Readonly<Record<string, string>> = { '0': 'o', '1': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't', '@': 'a', $: 's' };
const LEET_CHARS = /[013457@$]/;
const SPECIAL_LETTERS: Readonly<Record<string, string>> = { ı: 'i', ß: 'ss', ø: 'o', æ: 'ae', œ: 'oe', ł: 'l', đ: 'd', ð: 'd', þ: 'th' };
/** Cyrillic and Greek letters that look like Latin ones (lower case). */
export const CONFUSABLES: Readonly<Record<string, string>> = {
  а: 'a', в: 'b', е: 'e', ё: 'e', к: 'k', м: 'm', н: 'h', о: 'o', р: 'p', с: 'c', т: 't', у: 'y', х: 'x', і: 'i', ї: 'i',
  ј: 'j', ѕ: 's', ԁ: 'd', ԛ: 'q', ԝ: 'w', һ: 'h', ӏ: 'l', ү: 'y', ɡ: 'g', α: 'a', β: 'b', ε: 'e', ι: 'i', κ: 'k', ν: 'v',
  ο: 'o', ρ: 'p', τ: 't', υ: 'u', χ: 'x', γ: 'y', η: 'n', ω: 'w',
};

function mapChars(text: string, table: Readonly<Record<string, string>>): string {
  let out = '';
  for (const ch of text) out += table[ch] ?? ch;
  return out;
}

/** Diacritics off and a few special letters spelled out ("önceki" -> "onceki", "ı" -> "i"). */
export function foldLetters(token: string): string {
  return mapChars(token.normalize('NFD').replace(MARKS, ''), SPECIAL_LETTERS);
}

function letterCount(token: string): number {
  let count = 0;
  for (let i = 0; i < token.length; i++) {
    const c = token.charCodeAt(i);
    if (c >= 97 && c <= 122) count++;
  }
  return count;
}

/** Runs of three or more equal characters shortened to `keep` characters (shorter runs stay as they are). */
function collapseRuns(token: string, keep: number): string {
  let out = '';
  let i = 0;
  while (i < token.length) {
    let j = i + 1;
    while (j < token.length && token[j] === token[i]) j++;
    out += token.slice(i, j - i >= 3 ? i + keep : j);
    i = j;
  }
  return out;
}

function hasTripleRun(token: string): boolean {
  for (let i = 2; i < token.length; i++) if (token[i] === token[i - 1] && token[i] === token[i - 2]) return true;
  return false;
}

/** A word's canonical form, its second form, and whether it mixed scripts or needed leetspeak folding. */
type Canonical = readonly [tok: string, alt: string | undefined, mixed: boolean, leet: boolean];

/** Canonical forms of recent words: texts repeat words, adversarial ones massively. */
const CANONICAL_CACHE = new Map<string, Canonical | null>();
const CANONICAL_CACHE_SIZE = 20_000;

function canonical(raw: string): Canonical | null {
  let t = raw.toLowerCase().replace(APOSTROPHES, '');
  let mixed = false;
  if (NON_ASCII.test(t)) {
    if (LATIN.test(t) && CYRILLIC_GREEK.test(t)) {
      mixed = true;
      t = mapChars(t, CONFUSABLES);
    }
    t = foldLetters(t);
  }
  let second: string | undefined;
  let leet = false;
  if (LEET_CHARS.test(t)) {
    if (letterCount(t) >= 2) {
      const folded = mapChars(t, LEET);
      if (folded !== t) {
        second = t;
        t = folded;
        leet = true;
      }
    } else {
      t = t.replace(/[@$]/g, '');
    }
  }
  if (t === '') return null;
  if (hasTripleRun(t)) {
    second ??= collapseRuns(t, 1);
    t = collapseRuns(t, 2);
  }
  return [t, second, mixed, leet];
}

/** Token arrays up to this length are allocated at their final size (longer ones grow, staying fast arrays). */
const PRESIZED_TOKENS = 10_000;

/** Splits text into canonical word tokens (see the top of this file). Linear in the text. */
export function tokenize(text: string): TokenStream {
  // match() with a global pattern gives the matched strings alone, no match object per token; its array then holds
  // the tokens (each written at or before the index it was read from). Little garbage per text.
  const tok: string[] = text.match(TOKEN_RE) ?? [];
  const words = tok.length;
  const alt: (string | undefined)[] = words <= PRESIZED_TOKENS ? new Array<string | undefined>(words) : [];
  let n = 0;
  let mixedScript = 0;
  let leet = 0;
  let lineStarts: Set<number> | undefined;
  for (let r = 0; r < words; r++) {
    const raw = tok[r]!;
    const first = raw.charCodeAt(0);
    // A single line break is whitespace, as text is often wrapped mid-sentence ("I will\nkill you"); a blank line
    // ends a sentence like punctuation does.
    if (first === 10 && raw.indexOf('\n', 1) < 0) {
      if (n > 0) (lineStarts ??= new Set()).add(n);
      continue;
    }
    if (first === 46 || first === 33 || first === 63 || first === 59 || first === 58 || first === 10) {
      if (n > 0 && tok[n - 1] !== BREAK) {
        tok[n] = BREAK;
        alt[n++] = undefined;
      }
      continue;
    }
    let c = CANONICAL_CACHE.get(raw);
    if (c === undefined) {
      c = canonical(raw);
      if (raw.length <= 64) {
        if (CANONICAL_CACHE.size >= CANONICAL_CACHE_SIZE) CANONICAL_CACHE.clear();
        CANONICAL_CACHE.set(raw, c);
      }
    }
    if (c === null) continue;
    tok[n] = c[0];
    alt[n++] = c[1];
    if (c[2]) mixedScript++;
    if (c[3]) leet++;
  }
  tok.length = n;
  alt.length = n;
  return { tok, alt, mixedScript, leet, lineStarts: lineStarts ?? NO_LINE_STARTS };
}

// ---------------------------------------------------------------- phrase patterns (shared with prompt-shield.ts)

type Elem =
  | {
      readonly kind: 'word';
      readonly words: ReadonlySet<string>;
      /** The same words as an array (iterated without allocating an iterator). */
      readonly wordList: readonly string[];
      readonly prefixes: readonly string[];
      readonly optional: boolean;
      id: number;
    }
  | { readonly kind: 'gap'; readonly max: number }
  | { readonly kind: 'start' };

export interface Phrase<M> {
  readonly id: number;
  readonly source: string;
  readonly elems: readonly Elem[];
  /** The required word elements: a text lacking a word of any of them cannot match. */
  readonly required: readonly Extract<Elem, { kind: 'word' }>[];
  readonly meta: M;
}

export interface PhraseHit<M> {
  readonly phrase: Phrase<M>;
  /** First token of the match. */
  readonly start: number;
  /** One past the last token of the (shortest) match. */
  readonly end: number;
}

export type WordSets = Readonly<Record<string, readonly string[]>>;

function parseElem(part: string, sets: WordSets, source: string): Elem {
  if (part === '^') return { kind: 'start' };
  const gap = /^\.\.([1-9])$/.exec(part);
  if (gap) return { kind: 'gap', max: Number(gap[1]) };
  const optional = part.startsWith('[') && part.endsWith(']');
  const body = optional ? part.slice(1, -1) : part;
  const words = new Set<string>();
  const prefixes: string[] = [];
  const add = (word: string): void => {
    if (word.endsWith('*')) prefixes.push(word.slice(0, -1));
    else words.add(word);
  };
  for (const alternative of body.split('|')) {
    if (alternative.startsWith('@')) {
      const set = sets[alternative.slice(1)];
      if (!set) throw new Error(`phrase "${source}": unknown word set ${alternative}`);
      set.forEach(add);
    } else if (alternative !== '') {
      add(alternative);
    }
  }
  if (words.size === 0 && prefixes.length === 0) throw new Error(`phrase "${source}": empty element "${part}"`);
  return { kind: 'word', words, wordList: [...words], prefixes, optional, id: -1 };
}

function wordAt(elem: Extract<Elem, { kind: 'word' }>, ts: TokenStream, pos: number): boolean {
  const t = ts.tok[pos];
  if (t === undefined || t === BREAK) return false;
  if (elem.words.has(t)) return true;
  const a = ts.alt[pos];
  if (a !== undefined && elem.words.has(a)) return true;
  for (const p of elem.prefixes) if (t.startsWith(p) || (a !== undefined && a.startsWith(p))) return true;
  return false;
}

/** Longest span (in tokens) a pattern may cover: match positions are kept as bits of one 32-bit integer. */
const MAX_SPAN = 30;

function maxSpan(elems: readonly Elem[]): number {
  return elems.reduce((sum, e) => sum + (e.kind === 'gap' ? e.max : e.kind === 'word' ? 1 : 0), 0);
}

/**
 * The end of the shortest match of `elems` starting at `start`, or -1. The positions a partial match can have reached
 * are bits (offsets from `start`) of one integer, so a step costs a few bit operations and allocates nothing; work is
 * bounded by the pattern's size.
 */
function matchAt(elems: readonly Elem[], ts: TokenStream, start: number): number {
  const n = ts.tok.length;
  let current = 1;
  for (const elem of elems) {
    let next = 0;
    if (elem.kind === 'start') {
      next = start === 0 || ts.tok[start - 1] === BREAK || ts.lineStarts.has(start) ? current & 1 : 0;
      // Only offset 0 can be a sentence start inside a pattern that begins with ^.
    } else if (elem.kind === 'gap') {
      next = current;
      for (let bits = current, b = 0; bits !== 0; bits >>>= 1, b++) {
        if ((bits & 1) === 0) continue;
        for (let k = 1; k <= elem.max; k++) {
          const q = start + b + k - 1;
          if (q >= n || ts.tok[q] === BREAK) break;
          next |= 1 << (b + k);
        }
      }
    } else {
      if (elem.optional) next = current;
      for (let bits = current, b = 0; bits !== 0; bits >>>= 1, b++) {
        if ((bits & 1) !== 0 && wordAt(elem, ts, start + b)) next |= 1 << (b + 1);
      }
    }
    if (next === 0) return -1;
    current = next;
  }
  // The lowest set bit is the shortest match.
  return start + (31 - Math.clz32(current & -current));
}

/** For phrase sets without prefix patterns: no heads are looked up. */
const NO_HEADS: { heads: readonly (string | undefined)[]; altHeads: readonly (string | undefined)[] } = { heads: [], altHeads: [] };

/**
 * A set of phrase patterns indexed by the words they start with. Pattern language (space-separated elements):
 * `a|b` one of these words · `[a|b]` optional · `kill*` a prefix · `@NAME` a word set · `..3` up to 3 any words
 * (never across a sentence break) · `^` start of a sentence. The first word element must be required; its prefixes
 * must have at least 3 letters.
 */
export class PhraseSet<M> {
  private readonly exact = new Map<string, Phrase<M>[]>();
  private readonly prefix = new Map<string, Phrase<M>[]>();
  private readonly count: number;
  /** Word elements, shared between patterns that spell them the same way, numbered for per-text caching. */
  private readonly elems = new Map<string, Elem>();
  /** Per-text scratch arrays of find(), allocated once (find is synchronous and does not nest). */
  private scratch: { elemPresent: Int8Array; tried: Int32Array; possible: Int8Array } | undefined;

  constructor(entries: readonly (readonly [string, M])[], sets: WordSets = {}) {
    let id = 0;
    for (const [source, meta] of entries) {
      const elems = source
        .trim()
        .split(/\s+/)
        .map((part) => {
          const known = this.elems.get(part);
          if (known) return known;
          const elem = parseElem(part, sets, source);
          if (elem.kind === 'word') elem.id = this.elems.size;
          this.elems.set(part, elem);
          return elem;
        });
      const head = elems.find((e) => e.kind !== 'start');
      if (!head || head.kind !== 'word' || head.optional) throw new Error(`phrase "${source}": must start with a required word`);
      if (maxSpan(elems) > MAX_SPAN) throw new Error(`phrase "${source}": spans more than ${MAX_SPAN} tokens`);
      const required = elems.filter((e): e is Extract<Elem, { kind: 'word' }> => e.kind === 'word' && !e.optional && e !== head);
      const phrase: Phrase<M> = { id: id++, source, elems, required, meta };
      for (const word of head.words) this.push(this.exact, word, phrase);
      for (const p of head.prefixes) {
        if (p.length < 3) throw new Error(`phrase "${source}": a leading prefix needs 3 letters`);
        this.push(this.prefix, p.slice(0, 3), phrase);
      }
    }
    this.count = id;
  }

  private push(map: Map<string, Phrase<M>[]>, key: string, phrase: Phrase<M>): void {
    const list = map.get(key);
    if (list) list.push(phrase);
    else map.set(key, [phrase]);
  }

  /** Every match (overlaps included), in text order. */
  find(ts: TokenStream): PhraseHit<M>[] {
    const hits: PhraseHit<M>[] = [];
    // A pattern needing a word the text lacks is skipped up front; element answers are cached for this text.
    const presence = presenceOf(ts);
    const scratch = (this.scratch ??= { elemPresent: new Int8Array(this.elems.size), tried: new Int32Array(this.count), possible: new Int8Array(this.count) });
    const { elemPresent, tried, possible } = scratch;
    elemPresent.fill(0);
    tried.fill(-1);
    possible.fill(0);
    const has = (elem: Extract<Elem, { kind: 'word' }>): boolean => {
      const known = elemPresent[elem.id];
      if (known !== 0) return known === 1;
      const found = elemIn(elem, presence);
      elemPresent[elem.id] = found ? 1 : -1;
      return found;
    };
    const tryAll = (list: Phrase<M>[] | undefined, i: number): void => {
      if (!list) return;
      for (const phrase of list) {
        if (possible[phrase.id] === 0) possible[phrase.id] = phrase.required.every(has) ? 1 : -1;
        if (possible[phrase.id] === -1 || tried[phrase.id] === i) continue;
        tried[phrase.id] = i;
        const end = matchAt(phrase.elems, ts, i);
        if (end >= 0) hits.push({ phrase, start: i, end });
      }
    };
    const { heads, altHeads } = this.prefix.size > 0 ? headsOf(ts, presence) : NO_HEADS;
    for (let i = 0; i < ts.tok.length; i++) {
      const t = ts.tok[i]!;
      if (t === BREAK) continue;
      tryAll(this.exact.get(t), i);
      const head = heads[i];
      if (head !== undefined && this.prefix.size > 0) tryAll(this.prefix.get(head), i);
      const a = ts.alt[i];
      if (a !== undefined) {
        tryAll(this.exact.get(a), i);
        const altHead = altHeads[i];
        if (altHead !== undefined && this.prefix.size > 0) tryAll(this.prefix.get(altHead), i);
      }
    }
    return hits;
  }
}

interface Presence {
  /** The distinct tokens (both forms). */
  present: Set<string>;
  /** The distinct tokens as an array, in order of first appearance (the order of `present`). */
  presentList: string[];
  /** Their first three letters (computed when a prefix element first asks). */
  present3: Set<string> | undefined;
  /** Per token, its first three letters when it has three (the key of prefix patterns; computed when first needed). */
  heads: (string | undefined)[] | undefined;
  altHeads: (string | undefined)[] | undefined;
}

const PRESENCE = new WeakMap<TokenStream, Presence>();

/** What phrase sets need to know about a text, computed once per token stream and shared. */
function presenceOf(ts: TokenStream): Presence {
  let cached = PRESENCE.get(ts);
  if (!cached) {
    const present = new Set<string>();
    const presentList: string[] = [];
    const note = (t: string | undefined): void => {
      if (t !== undefined && !present.has(t)) {
        present.add(t);
        presentList.push(t);
      }
    };
    for (let i = 0; i < ts.tok.length; i++) {
      note(ts.tok[i]);
      note(ts.alt[i]);
    }
    cached = { present, presentList, present3: undefined, heads: undefined, altHeads: undefined };
    PRESENCE.set(ts, cached);
  }
  return cached;
}

function present3Of(presence: Presence): Set<string> {
  if (!presence.present3) {
    const present3 = new Set<string>();
    for (const t of presence.presentList) present3.add(t.slice(0, 3));
    presence.present3 = present3;
  }
  return presence.present3;
}

function headsOf(ts: TokenStream, presence: Presence): { heads: (string | undefined)[]; altHeads: (string | undefined)[] } {
  if (!presence.heads || !presence.altHeads) {
    const head = (t: string | undefined): string | undefined => (t !== undefined && t.length >= 3 ? t.slice(0, 3) : undefined);
    presence.heads = ts.tok.map(head);
    presence.altHeads = ts.alt.map(head);
  }
  return { heads: presence.heads, altHeads: presence.altHeads };
}

/** Whether a text with these tokens has any word of the element. */
function elemIn(elem: Extract<Elem, { kind: 'word' }>, presence: Presence): boolean {
  const { present, presentList } = presence;
  if (elem.words.size < present.size) {
    const words = elem.wordList;
    for (let i = 0; i < words.length; i++) if (present.has(words[i]!)) return true;
  } else {
    for (let i = 0; i < presentList.length; i++) if (elem.words.has(presentList[i]!)) return true;
  }
  for (const p of elem.prefixes) if (p.length < 3 || present3Of(presence).has(p.slice(0, 3))) return true;
  return false;
}

/** Prefix counts of marked token positions: `has(from, to)` answers "any mark in [from, to)" in O(1). */
export class Marks {
  private readonly counts: Int32Array;

  constructor(length: number, spans: Iterable<readonly [number, number]>) {
    const marks = new Int32Array(length + 1);
    for (const [start, end] of spans) for (let i = start; i < Math.min(end, length); i++) marks[i + 1] = 1;
    for (let i = 1; i <= length; i++) marks[i]! += marks[i - 1]!;
    this.counts = marks;
  }

  has(from: number, to: number): boolean {
    const n = this.counts.length - 1;
    const a = Math.max(0, Math.min(from, n));
    const b = Math.max(0, Math.min(to, n));
    return b > a && this.counts[b]! - this.counts[a]! > 0;
  }
}

export function evidenceOf(ts: TokenStream, start: number, end: number): string {
  return ts.tok.slice(start, end).join(' ').slice(0, 120);
}

// ---------------------------------------------------------------- lexicon

const AGES = ['1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12', '13', '14', '15', '16', '17'];
const AGE_WORDS = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten', 'eleven', 'twelve', 'thirteen', 'fourteen', 'fifteen', 'sixteen', 'seventeen'];

/** Word sets for the patterns (one word each: a pattern element never spans two words). */
const SETS: WordSets = {
  SUBJ: ['i', 'ill', 'im', 'imma', 'ima', 'id', 'ive', 'we', 'wed', 'weve', 'gonna', 'finna'],
  VHURT: [
    'kill', 'murder', 'stab', 'shoot', 'strangle', 'choke', 'slaughter', 'behead', 'decapitate', 'butcher', 'torture', 'burn', 'hang',
    'lynch', 'maim', 'poison', 'drown', 'gut', 'shank', 'cut', 'hurt', 'rape', 'bash', 'execute', 'end', 'slit', 'strangulate',
    'bludgeon', 'skin', 'murk', 'assault', 'attack', 'castrate', 'mutilate', 'dismember', 'smother', 'suffocate',
  ],
  VHURT_PAST: [
    'killed', 'murdered', 'stabbed', 'shot', 'strangled', 'choked', 'slaughtered', 'beheaded', 'butchered', 'tortured', 'burned',
    'lynched', 'maimed', 'poisoned', 'drowned', 'gutted', 'raped', 'bashed', 'executed', 'bludgeoned', 'mutilated', 'attacked',
    'assaulted', 'punched', 'kicked', 'stomped', 'slashed', 'smothered', 'suffocated',
  ],
  TARGET: ['him', 'her', 'them', 'everyone', 'everybody', 'someone', 'somebody', 'anyone', 'anybody', 'people', 'yall'],
  DET: ['my', 'his', 'her', 'their', 'that', 'this', 'the', 'a', 'an', 'every', 'all', 'those', 'these', 'some', 'our', 'your'],
  PERSON: [
    'man', 'woman', 'guy', 'girl', 'boy', 'kid', 'kids', 'child', 'children', 'baby', 'person', 'people', 'cop', 'cops', 'officer',
    'officers', 'teacher', 'teachers', 'boss', 'coworker', 'coworkers', 'neighbor', 'neighbour', 'neighbors', 'neighbours', 'wife',
    'husband', 'ex', 'girlfriend', 'boyfriend', 'mom', 'mother', 'dad', 'father', 'brother', 'sister', 'son', 'daughter', 'family',
    'referee', 'senator', 'president', 'judge', 'doctor', 'nurse', 'students', 'classmates', 'classmate', 'landlord', 'roommate',
    'driver', 'bitch', 'bastard', 'prick', 'whore', 'stepdad', 'stepmom', 'parents', 'grandma', 'grandpa', 'uncle', 'aunt',
    'cousin', 'friend', 'bully', 'manager', 'principal', 'priest', 'pastor', 'mayor', 'governor', 'politician', 'journalist',
  ],
  BODY: [
    'legs', 'leg', 'neck', 'face', 'skull', 'head', 'jaw', 'nose', 'teeth', 'arms', 'arm', 'fingers', 'throat', 'knees', 'kneecaps',
    'bones', 'ribs', 'spine', 'eyes', 'guts', 'heart', 'belly', 'stomach', 'hands', 'hand', 'chest', 'back',
  ],
  INSULT_NOUN: [
    'idiot', 'idiots', 'moron', 'morons', 'imbecile', 'loser', 'losers', 'dumbass', 'dipshit', 'jackass', 'jerk', 'asshole', 'arsehole',
    'bitch', 'bastard', 'scum', 'scumbag', 'garbage', 'trash', 'failure', 'disgrace', 'freak', 'creep', 'cunt', 'twat', 'prick',
    'douche', 'douchebag', 'whore', 'slut', 'skank', 'pig', 'cow', 'rat', 'worm', 'parasite', 'leech', 'maggot', 'vermin', 'subhuman',
    'dumbfuck', 'fuckface', 'shithead', 'dickhead', 'numbnuts', 'halfwit', 'nitwit', 'cretin', 'degenerate', 'lowlife', 'nobody', 'pos',
    'wanker', 'tosser', 'bellend', 'clown', 'psycho',
  ],
  INSULT_ADJ: [
    'stupid', 'dumb', 'dumbest', 'stupidest', 'idiotic', 'worthless', 'pathetic', 'useless', 'disgusting', 'ugly', 'ugliest', 'fat',
    'brainless', 'braindead', 'filthy', 'incompetent', 'clueless', 'gross', 'hideous', 'repulsive', 'vile', 'despicable', 'spineless',
    'insufferable', 'obnoxious', 'trashy', 'moronic', 'pitiful', 'retarded', 'dense',
  ],
  INTENS: ['fucking', 'complete', 'absolute', 'total', 'utter', 'big', 'little', 'giant', 'massive', 'real', 'damn', 'stupid', 'such', 'so', 'really'],
  GROUP_PL: [
    'immigrants', 'migrants', 'refugees', 'muslims', 'jews', 'christians', 'catholics', 'hindus', 'sikhs', 'buddhists', 'atheists',
    'blacks', 'whites', 'asians', 'hispanics', 'latinos', 'latinas', 'mexicans', 'arabs', 'africans', 'chinese', 'indians',
    'pakistanis', 'gays', 'lesbians', 'homosexuals', 'transgenders', 'trannies', 'bisexuals', 'women', 'females', 'gypsies', 'roma',
    'foreigners', 'palestinians', 'israelis', 'somalis', 'syrians', 'afghans', 'nigerians', 'haitians', 'koreans', 'japanese',
    'filipinos', 'muzzies', 'queers', 'disabled',
  ],
  GROUP_ADJ: [
    'black', 'white', 'brown', 'gay', 'trans', 'transgender', 'jewish', 'asian', 'muslim', 'disabled', 'indian', 'chinese', 'mexican',
    'arab', 'african', 'hispanic', 'latino', 'lesbian', 'queer', 'bisexual', 'christian', 'hindu', 'immigrant', 'autistic',
  ],
  GROUP_N: ['people', 'folks', 'men', 'women', 'guys', 'kids', 'persons', 'immigrants', 'families', 'children'],
  GROUP_SG: [
    'immigrant', 'migrant', 'refugee', 'muslim', 'jew', 'christian', 'black', 'mexican', 'arab', 'indian', 'gay', 'woman', 'asian',
    'foreigner', 'catholic', 'hindu', 'african', 'palestinian', 'israeli', 'tranny', 'queer', 'lesbian',
  ],
  DEHUMAN: [
    'animals', 'animal', 'vermin', 'rats', 'cockroaches', 'roaches', 'parasites', 'parasite', 'subhuman', 'subhumans', 'savages',
    'savage', 'filth', 'scum', 'inferior', 'disease', 'plague', 'cancer', 'apes', 'monkeys', 'pigs', 'dogs', 'beasts', 'degenerates',
    'degenerate', 'trash', 'garbage', 'invaders', 'mongrels', 'untermenschen', 'freaks', 'abominations', 'abomination', 'burden',
    'insects', 'cattle', 'criminals', 'rapists', 'terrorists', 'barbarians', 'leeches', 'maggots', 'worms', 'pests', 'scourge',
    'infestation', 'virus',
  ],
  BADADJ: ['disgusting', 'filthy', 'dirty', 'mentally', 'sick', 'worthless', 'stupid', 'lazy', 'violent', 'ill', 'fucking', 'dumb', 'stinking', 'smelly', 'inbred', 'godless', 'evil'],
  MYSELF: ['myself', 'meself'],
  PLACE: [
    'school', 'mall', 'church', 'office', 'class', 'classroom', 'concert', 'party', 'place', 'campus', 'store', 'workplace',
    'hospital', 'stadium', 'parade', 'synagogue', 'mosque', 'temple', 'club', 'bar', 'station', 'airport', 'festival',
  ],
  DRUG: [
    'cocaine', 'meth', 'methamphetamine', 'heroin', 'fentanyl', 'carfentanil', 'lsd', 'mdma', 'ecstasy', 'ketamine', 'ghb', 'pcp',
    'dmt', 'psilocybin', 'shrooms', 'oxycodone', 'oxycontin', 'opium', 'amphetamine', 'amphetamines', 'drugs', 'narcotics', 'roofies',
    'rohypnol', 'krokodil', 'xanax', 'percocet', 'opioids',
  ],
  WEAPON: [
    'bomb', 'bombs', 'explosive', 'explosives', 'ied', 'ieds', 'molotov', 'molotovs', 'napalm', 'grenade', 'grenades', 'detonator',
    'detonators', 'landmine', 'landmines', 'silencer', 'silencers', 'suppressor', 'sarin', 'ricin', 'anthrax', 'vx', 'c4', 'semtex',
    'tatp', 'pipebomb', 'firebomb', 'incendiary', 'bioweapon', 'bioweapons', 'gun', 'guns', 'firearm', 'firearms', 'pistol', 'rifle',
    'shotgun', 'weapon', 'weapons', 'flamethrower', 'nerve', 'phosgene',
  ],
  MALWARE: [
    'malware', 'ransomware', 'keylogger', 'keyloggers', 'virus', 'viruses', 'trojan', 'trojans', 'rootkit', 'botnet', 'spyware',
    'stealer', 'infostealer', 'worm', 'backdoor', 'cryptojacker', 'stalkerware', 'rat', 'exploit', 'exploits', 'phishing', 'skimmer',
  ],
  ACCOUNT: [
    'account', 'accounts', 'email', 'emails', 'gmail', 'instagram', 'insta', 'facebook', 'snapchat', 'whatsapp', 'phone', 'messages',
    'texts', 'icloud', 'wifi', 'computer', 'laptop', 'webcam', 'bank', 'password', 'passwords', 'tiktok', 'twitter', 'outlook', 'dms',
    'camera', 'inbox', 'discord', 'telegram', 'iphone', 'router', 'network',
  ],
  OTHER: [
    'someones', 'somebodys', 'exs', 'ex', 'his', 'her', 'their', 'another', 'girlfriends', 'boyfriends', 'wifes', 'husbands',
    'partners', 'neighbors', 'neighbours', 'coworkers', 'bosss', 'victims', 'peoples', 'persons', 'teachers', 'moms', 'dads',
    'sisters', 'brothers', 'friends', 'classmates', 'celebrity', 'celebritys', 'other', 'others',
  ],
  REQ: [
    'how', 'where', 'ways', 'way', 'best', 'easiest', 'cheapest', 'safest', 'guide', 'tutorial', 'steps', 'teach', 'help', 'explain',
    'instructions', 'recipe', 'tips', 'can', 'could', 'should', 'tell', 'show', 'want', 'need', 'wanna',
  ],
  MINOR_AGE: [...AGES, ...AGE_WORDS],
  POISON: ['ricin', 'cyanide', 'arsenic', 'strychnine', 'thallium', 'polonium', 'sarin', 'vx', 'antifreeze', 'botulinum', 'botox', 'aconite', 'hemlock', 'oleander', 'digoxin', 'tetrodotoxin'],
};

type W = Partial<Record<ModerationCategory, number>>;
interface Rule {
  readonly weights: W;
  /** Whether a negation just before or inside the match damps it (false where the pattern is itself negative). */
  readonly negatable: boolean;
}

const RULES: [string, W, boolean][] = [];
function rule(weights: W, patterns: readonly string[], negatable = true): void {
  for (const p of patterns) RULES.push([p, weights, negatable]);
}
/** A pattern about a group, once with a plural group noun and once with "<adjective> people". */
function grp(patterns: readonly string[]): string[] {
  return patterns.flatMap((p) => [p.replace('@GRP', '@GROUP_PL'), p.replace('@GRP', '@GROUP_ADJ @GROUP_N')]);
}

// harassment/threatening: explicit violent threats at the reader (also violence), then implied ones.
rule({ 'harassment/threatening': 0.85, violence: 0.85 }, [
  '@SUBJ ..3 @VHURT you|u|ya|yall',
  '@SUBJ ..3 @VHURT your [whole|entire|little|fucking] @PERSON',
  '@SUBJ ..3 break|smash|snap|crack|bash|cave|slit|cut|rip|tear|gouge|stab|shoot|blow|bust|split ..1 your @BODY',
  'were|well|gonna|going ..2 @VHURT you|u|ya',
  'put|pump [a|some] bullet|bullets|round|rounds|lead|hole|holes in|into|through your',
  'blow your ..1 brains|head|face',
  '@SUBJ ..3 beat|kick|knock|whoop ..1 the shit|crap|hell|life|living|fuck out of you',
  'beat you up|senseless|bloody|unconscious',
  'beat you to death',
  '@SUBJ ..3 make sure you|u bleed|suffer|die',
  '@SUBJ ..3 make you bleed|suffer|scream',
  '@SUBJ ..3 burn your house|home|car|place|family',
  '@SUBJ ..3 rape you|ya',
]);
rule({ 'harassment/threatening': 0.7 }, ['i know where you live|work|sleep', 'i know where your @PERSON live|lives|works|sleep|sleeps|goes']);
rule({ 'harassment/threatening': 0.75 }, ['@SUBJ ..3 make you wish ..3 never|dead'], false);
rule({ 'harassment/threatening': 0.6 }, ['or|before @SUBJ ..4 permanently|forever']);
rule({ harassment: 0.45 }, ['shut your|ur mouth|face|trap']);
rule({ 'harassment/threatening': 0.55 }, [
  'watch your back',
  'sleep with one eye open',
  'your days are numbered',
  '@SUBJ ..3 make you pay|regret',
  '@SUBJ ..2 find you ..3 and',
  'beat|kick|whoop your ass',
]);
rule({ 'harassment/threatening': 0.5 }, ['youre|you|ur [are|r] dead [meat]', 'youre|you|ur [are|r] a dead man|woman|boy|girl', '@SUBJ|were ..2 coming for you']);
rule({ 'harassment/threatening': 0.4 }, ['you [will] wont|not|never see it coming', 'you better run|hide', 'you better watch out', 'you will|youll|youre ..2 die|bleed|suffer'], false);
rule({ 'harassment/threatening': 0.35 }, ['you will|youll|youre ..2 regret|pay', 'and your family|kids']);

// harassment: insults and hostility aimed at a person; "kill yourself" is also self-harm encouragement.
rule({ harassment: 0.7 }, [
  'you|youre|ur|u [are|r|re|is] [such|so|a|an|the|one] [a|an] [@INTENS] [@INSULT_ADJ] [@INSULT_ADJ] @INSULT_NOUN',
  'your a|an|such|so [a|an] [@INTENS] [@INSULT_ADJ] [@INSULT_ADJ] @INSULT_NOUN',
  'you|youre|ur|u [are|r|re] [honestly|literally|seriously|actually|genuinely|clearly|truly|just] [such|so|a|an|the] [a|an] [most|biggest|worst|least] @INSULT_ADJ [and] [@INSULT_ADJ] person|human|guy|girl|man|woman|excuse|individual|creature|thing|being|bitch|people|member|player|employee',
  'pathetic|sorry|worthless|miserable|poor excuse ..1 for a|an human|person|man|woman|being|adult|parent|mother|father',
  'waste of space|oxygen|air|skin|sperm|life',
  'piece of shit|crap|garbage|trash',
]);
rule({ harassment: 0.65 }, ['you|youre|ur|u [are|r|re] [such|so|really|truly|just|very|fucking|completely|totally|utterly|the] @INSULT_ADJ']);
rule({ harassment: 0.75 }, ['go|get fuck|screw yourself|urself', 'hope|wish you|your ..3 die|dies|died|rot|burn|drown', 'hope|wish you|your ..3 get|gets cancer|raped|hit|aids|killed|murdered']);
rule({ 'harassment/threatening': 0.8, violence: 0.8 }, [
  'people|someone|somebody|guys|men|women|scum|trash|freaks|losers|idiots like you ..2 should|deserve|deserves|need|needs|ought ..2 shot|killed|die|hanged|hung|beaten|executed|lynched|burned|stabbed|strangled',
  'you|u|yall ..2 should|deserve|need|ought ..2 be ..1 shot|killed|hanged|hung|beaten|executed|lynched|burned|stabbed|strangled|murdered',
  'you|u|yall deserve to die|suffer|be hurt',
]);
rule({ harassment: 0.65 }, ['^ fuck you|u|ya|yall', 'and|so|well|oh|just|ok|okay|lol|haha|then|said fuck you|u|ya|yall', 'hey|hi|listen|ok|okay|yo|oi|shut [up] [you] [@INSULT_ADJ] @INSULT_NOUN']);
rule({ harassment: 0.55 }, ['fuck off', 'everyone|everybody hates you', '^ @INSULT_ADJ @INSULT_NOUN', '^ @INTENS @INSULT_ADJ @INSULT_NOUN']);
rule({ harassment: 0.5 }, ['nobody|noone likes|loves|wants|misses you', 'nobody|noone cares about you', 'no one likes|loves|wants|misses you', 'no one cares about you', 'go die', 'die in a fire|hole|ditch'], false);
rule({ harassment: 0.35 }, ['no wonder youre|ur|your|you [are|re] single|alone|lonely|unemployed', 'drink bleach'], false);
rule({ harassment: 0.3 }, ['shut up', 'stfu', 'shut the fuck up', 'screw you']);
rule({ harassment: 0.8, 'self-harm': 0.6 }, [
  'kys',
  '^ kill|hang|neck|off yourself|urself|yourselves',
  'go|just|should|please|pls|plz|fucking|better|could|gonna ..1 kill|hang|neck|shoot|off yourself|urself|yourselves',
]);

// hate: dehumanising generalisations and exclusion of protected groups; hate/threatening: violence against them.
rule({ hate: 0.75 }, grp([
  '@GRP [are|is|r|arent] [all|just|nothing|literally|basically|simply|such|so|fucking|no|truly|really] [but|better|more|worse] [than] [a|an] [bunch|pack|horde|swarm|plague|load] [of] [@BADADJ] [@BADADJ] [and] @DEHUMAN',
  '@GRP should|must ..1 be banned|deported|sterilized|sterilised|segregated|removed|locked',
]));
rule({ hate: 0.75 }, grp([
  '@GRP dont|do|doesnt ..1 deserve [to] rights|respect|live|exist|dignity|citizenship|freedom|jobs|equality',
  '@GRP ..2 shouldnt|mustnt ..2 exist|breed|vote|reproduce|allowed',
  '@GRP ..2 should|must not ..2 exist|breed|vote|reproduce|allowed',
]), false);
rule({ hate: 0.65 }, grp([
  '@GRP are|is [all|just|too|so|way|simply|naturally|genetically|inherently] stupid|dumb|inferior|incapable|worthless|lazy|weak|emotional|primitive|backward ..2 to|for|and',
  '@GRP ..1 control|controls|run|runs [the|our] ..1 banks|media|world|government|money|hollywood',
]));
rule({ hate: 0.6 }, grp([
  '@GRP ..5 are|is|r [all|just|nothing|literally|basically|simply|such|no] [but|better|more|worse] [than] [a|an] [bunch|pack|horde|swarm|plague|load] [of] [@BADADJ] [@BADADJ] @DEHUMAN',
]));
rule({ hate: 0.7 }, grp(['i|we|everyone hate|despise|loathe [all|those|these|the|fucking|every|filthy|dirty] @GRP']));
rule({ hate: 0.6 }, grp(['filthy|dirty|disgusting|stinking|smelly|subhuman|inbred|godless @GRP', '@GRP ..2 ruining|destroying|poisoning|infesting|invading|polluting|replacing ..2 country|nation|society|race|culture|neighborhood|neighbourhood|schools|blood']));
rule({ hate: 0.5 }, ['go back to your|their|where ..2 country|countries|shithole|jungle|desert|village', 'send them all back', 'breed like rats|rabbits|cockroaches']);
rule({ hate: 0.4 }, grp(['@GRP ..1 cant|cannot be trusted', '@GRP ..1 are a threat', '@GRP ..1 are all the same']), false);
rule({ 'hate/threatening': 0.85, violence: 0.85 }, [
  ...grp([
    '@GRP ..3 should|must|need|needs|deserve|deserves|ought|will|gonna ..3 die|killed|shot|exterminated|gassed|hanged|hung|lynched|eradicated|burned|burnt|wiped|slaughtered|executed|purged|eliminated|massacred|nuked|culled',
    'kill|exterminate|gas|shoot|slaughter|lynch|eradicate|purge|eliminate|hang|burn|massacre|nuke|bomb|wipe|cull|genocide ..1 [out] [all|every|each|the|those|these|them] [of] [the] [@BADADJ] @GRP',
    'death to [all] [the] @GRP',
  ]),
  'only good @GROUP_SG|@GROUP_ADJ [person|one|man|woman] is|are [a] dead',
  'burn|bomb|torch|firebomb|blow|shoot|attack ..1 [down|up] [that|the|a|their|every|this|another] mosque|mosques|synagogue|synagogues|church|churches|temple|temples|gurdwara',
]);
rule({ 'hate/threatening': 0.85 }, grp(['@GRP ..2 and shoot|kill|gas|hang|burn|execute|slaughter|exterminate them|em']));
rule({ 'hate/threatening': 0.55 }, [...grp(['round|line up [all] [the|those|these|every] @GRP']), 'put|throw them|em in|into camps|ovens|chambers']);
rule({ 'hate/threatening': 0.45, violence: 0.45 }, ['wipe them|em|those|these out', 'gas them|em all']);

// self-harm/intent, self-harm/instructions (both lift self-harm) and self-harm.
rule({ 'self-harm/intent': 0.85 }, [
  'i|im|ive|id|ill ..4 kill|killing|end|ending|hang|hanging|shoot|shooting|drown|drowning|poison|poisoning|off|offing|suffocate @MYSELF',
  'i|im|ive|id|ill ..4 end|ending|take|taking my [own] life',
  'i|im|ive|id|ill ..4 commit|committing suicide',
  'im|i suicidal',
  'i am suicidal',
  'my suicide note|letter|plan',
  'writing ..2 suicide note|letter',
  'i|im|ive|ill ..4 jump|jumping off ..3 bridge|building|roof|cliff|balcony|overpass',
]);
rule({ 'self-harm/intent': 0.8 }, ['i [really|just|honestly|seriously|kinda|truly|still] dont|do|no ..1 want|wanna ..2 live|alive|exist|wake'], false);
rule({ 'self-harm/intent': 0.75 }, [
  'i [really|just|honestly|seriously|kinda|truly] want|wanna|wish ..1 [to] die|dead',
  'i wish i was|were|wasnt|werent dead|never|gone',
  'i|im|ive|ill ..3 end|ending it all',
  'i|im|ive|ill ..3 end|ending everything',
  'thinking|thought|think|fantasizing|fantasising ..1 about|of killing|ending|hanging|shooting|drowning|offing ..1 @MYSELF|it|my',
  'thinking|thought|thinkin|fantasizing|fantasising ..1 about|of jumping off',
  'thinking|thought|thinkin|fantasizing|fantasising ..1 about|of overdosing|suicide|dying',
  'take|swallow|overdose ..1 all|whole ..1 my|the|of ..1 pills|bottle|tablets|meds|medication|sleeping|painkillers',
]);
rule({ 'self-harm/intent': 0.75 }, ['want|wish|hope|pray|wanna ..4 never wake up', 'want|wish|hope|pray|wanna ..4 not wake up'], false);
rule({ 'self-harm/intent': 0.4 }, ['disappear forever']);
rule({ 'self-harm/intent': 0.65 }, ['better off dead', 'better off without me', 'no reason|point ..4 live|living|alive|existing|exist', 'im|i done with life|living|existing'], false);
rule({ 'self-harm/intent': 0.35 }, ['goodbye everyone|world|forever', 'this is goodbye', 'bought|got ..2 rope|noose']);
rule({ 'self-harm/instructions': 0.85 }, [
  'how|ways|way|best|easiest|quickest|fastest|painless|painlessly|method|methods|steps|instructions|guide|tips|help ..4 kill|end|hang|shoot|drown|poison|off|suffocate @MYSELF|yourself|oneself',
  'how|ways|way|best|easiest|quickest|fastest|painless|method|methods ..3 to|of end|ending my|your|ones life',
  'painless|quickest|fastest|easiest|best|surest|quick|peaceful|quietest ..2 way|ways|method|methods ..1 to|of die|dying|suicide',
  'way|ways|method|methods ..2 commit suicide',
  'how|where|which ..3 cut ..2 deeper|vein|veins|artery|arteries|wrist|wrists',
  'how many|much ..4 pills|tablets|tylenol|paracetamol|acetaminophen|aspirin|ibuprofen|insulin|sleeping|xanax|benadryl|meds|medication ..4 die|overdose|od|kill|lethal|fatal',
  'how ..5 cut|cuts|wounds|wound ..1 deeper|deep',
  'which|what ..4 chemicals|pills|drugs|poison|poisons ..4 end my life',
  'which|what ..4 chemicals|pills|drugs|poison|poisons ..4 kill @MYSELF',
  'which|what ..4 chemicals|pills|drugs|poison|poisons ..4 to die',
  'tips|tricks|ways|how|guide ..2 starve|starving yourself|@MYSELF',
  'pro ana|mia tips|tricks|advice|guide',
  'proana|thinspo|thinspiration tips|tricks|advice|guide',
  'how long ..4 bleed out',
  'how long ..4 to die',
  'how long ..4 suffocate',
]);
rule({ 'self-harm/instructions': 0.75 }, [
  'lethal|fatal|deadly dose ..4 my weight',
  'lethal|fatal|deadly dose ..4 for me|myself',
  'hide|hiding|cover|covering ..2 self harm|harming scars|marks|cuts|wounds',
  'hide|hiding|cover|covering ..2 selfharm|cutting scars|marks|cuts|wounds',
  'hide|hiding|cover ..2 cuts|cutting ..3 from',
]);
rule({ 'self-harm/instructions': 0.75 }, [
  'spot|place|area|part|where ..3 my|your body|arms|arm|legs|leg|thighs|wrist|wrists|skin|stomach ..3 cut|burn|hurt',
]);
rule({ 'self-harm/instructions': 0.8 }, ['how many|much ..4 pills|tablets|tylenol|paracetamol|acetaminophen|aspirin|ibuprofen|insulin|sleeping|xanax|benadryl|meds|medication ..5 never|not wake'], false);
rule({ 'self-harm/instructions': 0.75 }, ['cut|burn ..4 where|so no one|nobody|noone|parents|anyone ..2 see|notice|sees|notices|find'], false);
rule({ 'self-harm/instructions': 0.6 }, ['where ..4 should i cut', 'without anyone|people|parents noticing ..1 cuts|scars']);
rule({ 'self-harm/instructions': 0.45 }, ['bleed|bleeds ..1 most|more|faster']);
rule({ 'self-harm': 0.7 }, [
  'cutting|burning|starving|harming|scratching|punishing|hurting|hitting @MYSELF',
  'cutting|burning|starving|harming|scratching|hurting|hitting my ..1 wrists|arms|thighs|skin|legs|body',
  'self harm|harming ..1 is|feels|helps|was|makes ..2 the|only|relief|release|amazing|calm|calms',
  'cutting|selfharm ..1 is|feels|helps|was|makes ..2 only|relief|release|amazing|calm|calms',
  'hurting @MYSELF ..1 is|feels|helps ..2 only|relief|release|calm',
  'make|made|making @MYSELF throw|vomit|puke|purge',
  'you|u should|must|need ..2 cut|burn|starve|hurt|harm yourself',
]);
rule({ 'self-harm': 0.6 }, ['purging|purge|throwing|vomiting ..2 whatever|everything|anything|what|after ..2 i|eat|ate|eating|meal|meals', 'purging after ..1 meal|meals|eating|dinner', 'pro ana|mia', 'proana|thinspo|thinspiration', 'scratching|scratch|picking ..4 until|till|til it|they|my ..2 bleed|bleeds']);
rule({ 'self-harm': 0.6 }, ['my arms|wrists|thighs|legs|skin|body|stomach ..3 covered|full ..2 cuts|scars|burns|cut|burn', 'cuts|cut ..1 deeper']);
rule({ 'self-harm': 0.35 }, ['fresh cuts|scars|burns']);
rule({ 'self-harm': 0.55 }, [
  'i|ive|im ..2 cut|burn|starve|harm|scratch|burned|burnt|starved|harmed @MYSELF',
  'i|ive|im ..2 cut|burn|harm|scratch|burned|burnt|harmed my ..1 wrists|arms|thighs',
  'cuts|scars|burns|wounds on|across my ..1 wrists|arms|thighs|legs|stomach|skin',
]);
rule({ 'self-harm': 0.45 }, ['i|me deserve ..2 pain|hurt|suffer|bleed|punished', 'punch|punching|hit|hitting ..1 walls|wall ..4 bleed|bleeds|bleeding']);
rule({ 'self-harm': 0.35 }, ['self harm|harming|injury|mutilation', 'selfharm', 'relapsed|relapse', 'skipping|skip|skipped ..1 meals']);
rule({ 'self-harm': 0.2 }, ['on purpose', 'deliberately', 'deeper than']);

// sexual and sexual/minors (sexual content near a minor cue is also sexual/minors, see scoreBuiltIn).
rule({ sexual: 0.85 }, [
  'send|show|post|share ..4 nudes|nude|naked|tits|boobs|dick|pussy|cock',
  'suck|sucked|sucking|lick|licked|licking ..1 cock|dick|tits|nipples|balls|pussy',
  'dick|cock|nude|naked pic|pics|selfie|selfies',
  'blowjob|blowjobs|handjob|handjobs|rimjob|deepthroat|cumshot|creampie|gangbang|bukkake|cunnilingus|fellatio',
]);
rule({ sexual: 0.8 }, ['explicit|graphic|hardcore|detailed|steamy|dirty ..1 sex|sexual|porn|smut|intercourse|erotica', 'anal|oral sex', 'sex tape']);
rule({ sexual: 0.75 }, ['want|wanna|gonna|going ..2 fuck|shag|bang you|me|her|him', 'fuck|fucking|screw|bang|shag|pound ..1 me|her|him|you ..2 hard|harder|raw|senseless|doggy|tonight']);
rule({ sexual: 0.7 }, ['passionate|rough|wild|hot ..1 sex', 'nude|naked ..1 pics|pictures|photos|images|videos|selfies|body|bodies|women|girls|men|woman|girl|boy|boys']);
rule({ sexual: 0.6 }, [
  'porn|porno|pornhub|xvideos|xhamster|hentai|xxx|nudes',
  'erotic|smut|lewd ..1 story|stories|fanfic|fanfiction|roleplay|scene|chat|novel',
  'horny',
  'masturbat*',
  'jerk|jerking off',
  'dildo|dildos|clit|clitoris',
]);
rule({ sexual: 0.55 }, ['steamy|spicy|smutty|naughty|dirty|sexy ..1 scene|story|roleplay|chat|fanfic|fanfiction', 'sex|sexual ..1 scene|story|stories|fanfic|fanfiction|roleplay|chat|video|videos|pics|photos', 'sexting|sext|sexted', 'erotic|erotica|smut|smutty|lewd', 'orgasm|orgasms|climaxed|cum|cumming']);
rule({ sexual: 0.45 }, ['tits|titties|bdsm', 'lap dance', 'have|had|having sex']);
rule({ sexual: 0.4 }, ['rip|tear|tore|ripped|tearing ..3 clothes off', 'boobs|pussy|boner|stripper|strippers|nsfw|fetish|moaning|moaned|undress|undresses|undressed|undressing|threesome', 'make|made|making love']);
rule({ sexual: 0.3 }, ['dick|cock|nipples|erection|penis|vagina|lingerie|sexy|seduce|seduced|climax|onlyfans|hardcore']);
rule({ 'sexual/minors': 0.95 }, [
  'child|children|kiddie|kiddy|kid|kids|underage|minor|minors|preteen|preteens|teen|toddler ..1 porn|pornography|nudes|sex|sexual|erotica|nude|naked',
  'lolicon|shotacon|jailbait|pedoporn',
  'loli|shota ..1 porn|hentai|nudes|pics|doujin',
]);
rule({ 'sexual/minors': 0.5 }, ['csam', 'cp links|videos|pics']);

// violence.
rule({ violence: 0.75 }, [
  '@SUBJ ..3 @VHURT ..1 @TARGET',
  '@SUBJ ..3 @VHURT [@DET] [fucking|stupid|little|whole] @PERSON',
  'smash|bash|crush|cave|break|snap|crack|stomp ..1 his|her|their|someones|that ..1 @BODY',
  'tortur* ..1 animals|animal|cats|cat|dogs|dog|puppies|puppy|kittens|kitten|pets|him|her|them|people|kids',
  'bomb|nuke|firebomb|torch ..1 [the|this|that|whole|entire|my|our] ..1 neighborhood|neighbourhood|city|building|school|office|station|airport|embassy|village|town|house|houses|crowd',
  'blow up ..1 [the|this|that|whole|entire|my|our] ..1 neighborhood|neighbourhood|city|building|school|office|station|airport|embassy|crowd|bus|train|plane',
  'shooter|killer|bomber|terrorist|murderer|gunman|attacker ..2 was|is|were a|an|true|real ..1 hero|heroes|legend|martyr|saint|inspiration',
  'how|ways|way|best ..2 to|do|can|i ..2 kill|murder|strangle|stab|drown|behead [a|an|my|your|the] person|human|humans|man|woman|child|kid|wife|husband|neighbor|neighbour|boss|someone|somebody|people|him|her',
]);
rule({ violence: 0.85 }, ['shoot|shooting up [the|a|my|our|this|that] @PLACE', 'mass shooting at|in [the|a|my|our|this] @PLACE']);
rule({ violence: 0.7 }, [
  'he|she|they|someone|somebody|i|we|you ..2 @VHURT_PAST ..1 him|her|them|me|us|@PERSON',
  'beat|beats|beating ..1 him|her|them|me|us ..2 until|senseless|bloody|unconscious|with',
  'deserves|deserve|deserved ..2 to be|get beaten|shot|killed|stabbed|tortured|hanged|lynched|murdered|executed|raped|burned',
  'deserves|deserve|deserved to die|suffer|burn|rot',
  'put|pump [a|some] bullet|bullets|round|rounds|lead in|into|through ..3 head|skull|brain|brains|face|chest|back',
  '@SUBJ ..4 peel|rip|tear|flay|gouge ..3 skin|face|flesh|eyes',
]);
rule({ violence: 0.6 }, [
  'beaten|stabbed|burned|tortured|shot|hacked|bludgeoned|kicked|strangled|choked|stomped|beat|beats|beating to death',
  'until ..2 stopped moving|breathing',
  'until ..2 went limp',
  'until ..2 was|were dead',
  'kill|hurt|kick|drown|burn|poison ..1 [a|the|my|his|her|some|that] cat|dog|puppy|kitten|puppies|kittens|pets',
]);
rule({ violence: 0.75 }, ['they|we|someone|somebody|people|you|i ..2 should|must|need|ought ..2 hang|shoot|kill|execute|lynch|behead|hanging|shooting ..3 them|every|all|those|these']);
rule({ violence: 0.55 }, ['i|we ..3 want|wanna|like|love|enjoy ..2 hear|hearing|see|seeing|watch|watching ..3 scream|bleed|suffer|die|beg|burn', 'more people should ..1 follow|copy|do']);
rule({ violence: 0.35 }, ['jump|jumped|ambush|ambushed him|her|them', 'bones crack|snap|break', 'kept stabbing|hitting|punching|kicking']);

// violence/graphic (lifts violence).
rule({ 'violence/graphic': 0.75 }, [
  'guts|intestines|entrails|innards|organs|bowels|viscera|brains|brain ..2 spill*|pour*|hang*|splatter*|spray*|ooz*|leak*|everywhere|exposed|dangling',
  'skull ..2 crushed|cracked|caved|shattered|split|smashed',
  'split|cracked|caved|crushed|smashed|bashed ..2 skull|head ..1 open|in',
  'eyes|eye|eyeballs ..2 gouged|ripped|torn|plucked|popped',
  'gouged out',
  'skinned|burned|burnt ..1 alive',
]);
rule({ 'violence/graphic': 0.7 }, [
  'severed|hacked ..1 limbs|head|heads|arm|arms|leg|legs|fingers|hand|hands|body|torso',
  'flay* ..2 skin|flesh|face',
  'peel|peeled|peeling|rip|ripped|flay|flayed ..3 skin|flesh ..1 off|from ..1 his|her|their|a|the ..1 face|body|bones|back|skull|arm|arms|legs',
  'face|arm|arms|leg|legs|head|hand|hands|limbs|stomach|belly|throat|chest|jaw ..2 torn|ripped|hacked|blown ..1 off|open|apart|out',
  'chopped|hacked|cut|dismembered him|her|them ..1 up|into|to',
  'chopped|hacked|cut ..1 body|bodies|corpse|corpses ..1 up|into|to',
]);
rule({ 'violence/graphic': 0.7 }, [
  'tore|ripped|blew|blown|torn|tearing|ripping ..3 legs|arms|arm|leg|head|face|limbs|hand|hands|fingers|jaw off|apart|open',
  'cut|chopped|hacked|sliced|ripped|tore|pulled|cutting|ripping ..1 off|out ..2 his|her|their|my ..1 fingers|toes|ears|nose|tongue|hands|hand|legs|arms|eyes|teeth|nails',
]);
rule({ 'violence/graphic': 0.4 }, ['bled|bleeding out', 'bleed out ..2 on|in the street|floor']);
rule({ 'violence/graphic': 0.65 }, ['tears|tore|ripping|rips|rip|ripped|slit|slits|slices ..1 open ..3 stomach|belly|chest|throat|skull|torso', 'eat*|devour*|gnaw*|chew* ..2 intestines|guts|entrails|organs|brains|innards']);
rule({ 'violence/graphic': 0.6 }, ['flesh ..2 peel*|rip*|torn|tore|melt*|charred|rotting|rotted|bubbling|sloughing|flayed|shredded', 'rotting|mutilated|dismembered|bloated|decomposing|charred|maggot|maggots ..2 corpse|corpses|body|bodies|flesh|remains', 'torn|shredded|mangled ..1 flesh|limbs|corpse|bodies']);
rule({ 'violence/graphic': 0.55 }, ['blood ..2 spray*|spurt*|gush*|pour*|pooled|splatter*|squirt*|fountain*', 'blood gushed|gushing|spurting|spurted|sprayed|spraying|everywhere']);
rule({ 'violence/graphic': 0.4 }, [
  'dismember*|decapitat*|disembowel*|mutilat*|eviscerat*',
  'flayed|beheaded|severed|impaled',
  'exposed|protruding|jutting|shattered|splintered ..1 bone|bones|ribs|skull',
  'maggots ..2 crawl*',
  'pool|pools|puddle|river|rivers ..1 of blood',
  'brain matter',
]);
rule({ 'violence/graphic': 0.25 }, ['stump', 'gore|gory|gruesome']);

// illicit: acquiring or making drugs, malware, fraud, theft; illicit/violent (lifts illicit): weapons, poisoning, killing.
rule({ illicit: 0.8 }, [
  '@REQ ..4 buy|purchase|order|score|cop|get|obtain|source|find ..3 @DRUG',
  '@REQ ..4 make|cook|synthesize|synthesise|produce|manufacture|brew|extract|grow|cultivate|refine|prepare ..3 @DRUG',
  'hack|hacking|hijack|crack|cracking|snoop|spy|break|breaking ..4 @OTHER ..2 @ACCOUNT',
  'write|create|make|build|code|develop|program|generate|craft|deploy|spread|coding|writing|creating|building ..3 @MALWARE',
  'write|create|make|build|design|craft|send ..3 phishing|scam|spoofed ..1 email|emails|page|site|website|kit|sms|texts|message|messages|login',
  'how|ways|way|best|help|easiest ..3 launder|laundering ..3 money|cash|funds|proceeds|profits|crypto|bitcoin|dirty',
  'make|buy|get|print|create|order|obtain|forge|produce ..3 fake|forged|counterfeit|fraudulent ..1 id|ids|passport|passports|license|licence|licenses|drivers|money|bills|cash|currency|documents|diploma|degree|prescription|prescriptions|checks|cheques|notes',
  'buy|buying|sell|selling ..2 stolen ..2 credit|card|cards|accounts|goods|cars|phones|identities|data|credentials|logins',
  'how|ways|tips|teach|help|guide ..3 shoplift|shoplifting|pickpocket|burglarize|hotwire|rob|steal|mug',
  'hotwire ..2 car|cars|vehicle|truck|motorcycle',
  '@REQ ..4 ddos|swatting|dox|doxx|doxxing|doxing',
]);
rule({ illicit: 0.8 }, ['script|program|code|tool|bot|extension|app|malware ..3 steals|steal|grabs|harvests|exfiltrates|dumps|stealing ..3 passwords|credentials|cookies|tokens|logins|cards|wallets']);
rule({ illicit: 0.6 }, ['credit card generator|generators', 'working|valid|live ..2 credit card|cards|cc|ccs|cvv numbers|number|details|dumps', 'valid cvv|cvvs']);
rule({ illicit: 0.7 }, [
  'steal|stealing|harvest|harvesting|exfiltrate|phish ..3 passwords|credentials|logins|login|identity|identities|cookies|ssn|ssns',
  'steal|stealing|harvest|harvesting|exfiltrate|phish ..3 credit card|cards|numbers|details',
  'sell|selling|smuggle|smuggling|trafficking ..3 @DRUG|stolen|organs',
  'cook|cooking|make|making|synthesize|synthesizing ..2 meth|methamphetamine|fentanyl|heroin|lsd|mdma|ghb',
  '@REQ ..3 hack|ddos|breach|hijack ..3 website|server|network|database|system|systems|wifi|router|account|accounts',
]);
rule({ illicit: 0.45 }, ['@REQ ..3 read|access|track|monitor|get|see|log ..4 @OTHER ..2 @ACCOUNT', 'fake|forged|counterfeit ..1 id|ids|passport|passports|money|bills|currency|documents']);
rule({ illicit: 0.4 }, ['launder|laundering|wash|washing ..2 money|cash|funds|proceeds|profits', 'carding|fullz|skimmers', 'cvv dumps', 'steal ..2 car|cars|bike|catalytic|package|packages|identity']);
rule({ illicit: 0.35 }, [
  'without a|any prescription',
  'without getting|being caught',
  'without anyone knowing',
  'without ..2 knowing|permission|consent|noticing',
  'undetected',
  'untraceable',
  'dark|deep web',
  'darknet',
  'black market',
  'without setting off',
]);
rule({ illicit: 0.35 }, ['no questions asked'], false);
rule({ 'illicit/violent': 0.85 }, [
  'make|build|assemble|construct|create|print|manufacture|rig|wire|prepare|mix|cook|brew|making|building|assembling|printing ..4 @WEAPON',
  'make|produce|create|mix|build|cook|brew|making|producing ..4 mustard|chlorine|poison|poisonous|toxic|nerve|phosgene gas|agent|agents',
  'recipe|recipes|formula|ingredients|blueprint|blueprints|schematics|schematic ..3 @WEAPON',
  'convert|modify|turn ..4 ar15|ar|glock|rifle|semi|gun|pistol|ak|ak47 ..4 full|fully ..1 auto|automatic',
  'hire|find|contact|pay ..2 [a] hitman|hitmen|assassin|assassins',
  'hire|find|contact|pay ..2 [a] hit man',
  'kill|murder|poison|strangle|drown ..3 [and] get away with it|murder',
  'kill|murder|poison|strangle|drown ..4 without getting|being caught',
  'kill|murder|poison|strangle|drown ..4 without a trace',
  'kill|murder|poison|strangle|drown ..4 without leaving ..1 evidence|trace|traces',
  'kill|murder|poison|strangle|drown ..4 without evidence',
]);
rule({ 'illicit/violent': 0.85 }, [
  'buy|get|obtain|acquire|purchase ..4 gun|guns|firearm|firearms|pistol|rifle|ak47|ar15|handgun|weapon|weapons ..4 without|no|off ..2 background|check|license|licence|id|paperwork|serial|papers|questions|permit|record|records|books',
], false);
rule({ 'illicit/violent': 0.8 }, [
  'felon|felons|felony|prohibited|restraining|underage|minor ..5 buy|get|obtain|own|carry ..2 gun|guns|firearm|firearms|pistol|rifle',
  'buy|get|obtain|own ..3 gun|guns|firearm|firearms|pistol|rifle ..4 felon|felony|prohibited|restraining|underage|minor',
]);
rule({ 'illicit/violent': 0.8, violence: 0.7 }, ['how much|many ..4 @POISON ..4 kill|die|lethal|fatal|murder']);
rule({ 'illicit/violent': 0.8, violence: 0.75 }, ['how|ways|way|best|can|help ..3 poison ..2 someone|somebody|him|her|them|people|person|my|husband|wife|boss|neighbor|neighbour']);
rule({ 'illicit/violent': 0.75 }, ['dispose ..2 body|bodies|corpse|corpses', 'dissolve ..2 body|bodies|corpse', 'hide|bury|get ..3 corpse|corpses', 'hide|bury|rid ..3 dead body']);
rule({ 'illicit/violent': 0.6 }, ['untraceable|unregistered|illegal|ghost ..1 gun|guns|firearm|firearms|weapon|weapons|pistol|rifle', 'auto sear|sears', 'glock switch|switches', 'bump stock', 'pipe bomb|bombs', 'zip gun']);

/** Idioms and benign senses that cancel any match they overlap. */
const SUPPRESS: string[] = [
  'kill|kills|killing|killed two birds',
  'kill|killing|killed time',
  'killed|killing|kill it',
  'killer|killing feature|features|app|deal|deals|combo|move|moves|instinct|smile|looks|queen|whale|whales|bee|bees',
  'kill|killing|killed ..3 process|processes|task|tasks|thread|threads|job|jobs|pid|session|sessions|server|container|containers|tab|tabs|command|signal|switch|app|daemon|query|bug|bugs|lights|engine|mood|vibe|buzz',
  'kill|killing ..2 9|sigkill|sigterm',
  'shoot|shooting|shot|shoots ..4 photo|photos|pictures|pics|portraits|portrait|video|videos|footage|film|headshots|wedding|graduation|session|photoshoot|scene|commercial|episode|reel|movie|content|campaign',
  'shoot|shot me|us|him|her|them ..1 an|a email|message|text|note|dm|line|pm|invite|link|reminder|call|mail|list',
  'shot|shoot|shooting ..2 look|looks|glance|glances|smile|wink|grin|question|questions',
  'shoot for the stars|moon',
  'shoot hoops',
  'shot glass|glasses|caller',
  'flu|booster|covid|vaccine shot|shots',
  'photo|bath|seed|f|cherry|love|truth|time bomb|bombs',
  'photobomb|photobombed',
  'bomb calorimeter|cyclone|shelter|squad|disposal',
  'bombed my|the|an|that exam|test|interview|presentation|audition',
  'da bomb',
  'naked eye|chef|mole|truth',
  'nude lipstick|color|colour|heels|tone|shade|palette|makeup',
  'cum laude',
  'summa|magna cum',
  'moby dick',
  'dick cheney|van|tracy|grayson',
  'food|ruin|earth|cabin|design|data porn',
  'pussy willow|willows|cat|footed',
  'cock the|a gun|hammer|rifle|pistol',
  'blue|great|coal tits',
  'spill|spilled|spilling|spills ..2 guts|beans',
  'dead to me',
  'dying to',
  'to die for',
  'die on this|that hill',
  'drop dead gorgeous',
  'dressed to kill',
  'killed @MYSELF|me laughing',
  'dying|died|die [of|from] laughter|laughing|embarrassment|boredom',
  'murder|murdered|murders a|the pizza|burger|drink|song|beat|track|dance|floor|stage|karaoke',
  'gut feeling|instinct|check|punch|health|bacteria|microbiome',
  'burn|burned|burnt ..2 calories|fat|cd|dvd|disc|rubber|bridges|incense|candles|toast|rice|food|dinner|cookies|money|cash|budget|tokens',
  'cut ..2 costs|cost|corners|taxes|budget|ties|losses|carbs|sugar|hair|grass|paper|cake|pizza|mango|onion|onions|vegetables|wood|class|slack|deal|check|piece|share|line|short|loose|free|back|in',
  'cut|cutting him|her|them|me|us|you|people|someone ..1 off',
  'cut off ..2 power|electricity|water|supply|funding|contact|communication|access|traffic|gas|internet|conversation',
  'hang ..2 out|on|up|around|tight|loose|picture|pictures|painting|shelf|clothes|laundry|coat|lights|decorations|wallpaper|with|wall|hook',
  'execute|executed|executing ..3 script|scripts|command|commands|query|queries|plan|plans|order|orders|task|tasks|trade|trades|code|function|program|strategy|contract|will',
  'attack|attacked ..2 surface|vector|vectors|plan|strategy|problem|heart|panic|asthma|anxiety',
  'heart|panic|anxiety|asthma attack|attacks',
  'hurt my|your|his|her ..1 feelings|back|knee|ankle|wrist|shoulder|neck|foot|leg|arm|eyes|ears|chances',
  'hurts|hurt like hell',
  'beat the game|level|boss|record|odds|heat|traffic|rush|deadline|market|competition',
  'poison ivy|oak|control|center|pill',
  'shoot|shooting|shot up ..1 heroin|drugs|dope|meth',
  'end the|this|that|our ..1 call|meeting|session|process|loop|chat|contract|relationship|subscription|program',
  'virus|malware scanner|scanners|removal|protection|definitions|scan|detection',
  'antivirus|antimalware',
  'remove|removing|detect|detecting|prevent|preventing|protect|protecting|against ..3 @MALWARE',
  'skin care|tone|cream|cancer|condition|type|rash',
  'garbage|trash collector|collectors|collection|man|truck|can|bin|bins|day|disposal|bag|bags',
  'pig latin|out',
  'rat race|poison|trap',
  'crack ..2 egg|eggs|joke|jokes|code|case|smile|window|open',
  'crack down|up',
  'blow dry|dryer|out',
  'blow up ..2 balloon|balloons|photo|picture|image|phone|spot',
  'hack|hacking|hacked together',
  'life hack|hacks',
  'hackathon',
  'exploit ..2 opportunity|opportunities|strength|strengths|weakness|market|synergies',
  'worm gear|gears|farm|farming|bin',
  'trojan horse',
  'fake it',
  'fuck ..2 up',
  'break a leg',
  'kicked|kick|kicking ..2 out|off',
  'noise|surge|flash|immune suppressor',
  'nerf|water|glue|toy|squirt|heat|nail|staple|paint|spray|cap|bb|airsoft|paintball|foam|bubble|potato|laser gun|guns|pistol|pistols|rifle',
  'gun safe|cabinet|rack|case|show|range|laws|law|control|violence',
  'child|children|minor|minors sexual abuse|exploitation prevention|awareness|survivors|survivor|cases|case|charges|scandal|allegations|victims|investigation|report|reports|policy|training|laws|law',
  'peel|peeling|peeled ..4 chicken|tomato|tomatoes|potato|potatoes|apple|apples|fruit|peach|peaches|onion|fish|garlic|ginger|banana|bananas|orange|oranges|carrot|carrots|paint|wallpaper|sticker|label|film',
  'explosive diarrhea|growth|entrance|performance|flavor|flavour',
];

type CueKind = 'history' | 'news' | 'edu' | 'fiction' | 'game' | 'joke' | 'medical' | 'support' | 'tech' | 'defensive' | 'recovery' | 'accident' | 'photo';

const CUES: Record<CueKind, string[]> = {
  history: [
    'history', 'historical', 'historically', 'historian', 'historians', 'century', 'centuries', 'ancient', 'medieval', 'empire',
    'ww1', 'ww2', 'wwi', 'wwii', 'world war', 'civil war', 'winter war', 'cold war', 'nazi', 'nazis', 'holocaust', 'genocide',
    'propaganda', 'battle', 'battles', 'soldiers', 'troops', 'allied', 'regime', 'dynasty', 'colonial', 'crusades', 'manhattan project',
    'archduke', 'museum', 'documentary', 'veterans', 'veteran', 'wartime', 'battlefield', 'persecution', 'trenches',
  ],
  news: [
    'police said|say|says|reported', 'according to', 'authorities', 'suspect', 'suspects', 'arrested', 'court', 'trial', 'sentenced',
    'convicted', 'charged with', 'prosecutors', 'investigation', 'investigators', 'reported', 'reports', 'reporter', 'journalist',
    'news', 'headline', 'headlines', 'article', 'officials said', 'witnesses', 'coroner',
  ],
  edu: [
    'lesson', 'lessons', 'textbook', 'curriculum', 'lecture', 'essay', 'homework', 'professor', 'educational', 'education', 'puberty',
    'biology', 'anatomy', 'reproduction', 'reproductive', 'age appropriate', 'sex ed',
  ],
  fiction: ['novel', 'story', 'character', 'characters', 'chapter', 'screenplay', 'movie', 'film', 'fiction', 'fictional', 'plot', 'villain', 'protagonist', 'dnd', 'horror', 'thriller', 'book', 'episode', 'anime', 'comic', 'manga'],
  game: [
    'fortnite', 'minecraft', 'valorant', 'roblox', 'overwatch', 'league of legends', 'mario kart', 'smash bros', 'chess', 'checkers',
    'pvp', 'respawn', 'respawned', 'lobby', 'noob', 'noobs', 'gg', 'ranked', 'multiplayer', 'video game', 'in game', 'ingame',
    'call of duty', 'warzone', 'apex', 'halo', 'tekken', 'boss fight', 'board game', 'game night', 'paintball', 'laser tag', 'dark souls',
    'xbox', 'playstation', 'ps5', 'controller',
  ],
  joke: ['lol', 'lmao', 'lmfao', 'rofl', 'haha', 'hahaha', 'jk', 'joking', 'kidding', 'jokingly', 'hehe', 'xd'],
  medical: [
    'patient', 'patients', 'doctor', 'doctors', 'nurse', 'nurses', 'nursing', 'clinical', 'clinician', 'clinicians', 'clinic',
    'diagnosis', 'diagnosed', 'surgery', 'surgeon', 'surgical', 'symptoms', 'symptom', 'treatment', 'dosage', 'prescribed', 'hospital',
    'medical', 'medication', 'medications', 'therapy', 'therapist', 'psychiatrist', 'psychiatry', 'physician', 'triage', 'icu', 'ward',
    'laceration', 'fracture', 'stabilised', 'stabilized', 'consult', 'pharmacist', 'pharmacy', 'refill', 'anatomy',
    'healthcare', 'pathology', 'erectile', 'dysfunction', 'gynecologist', 'gynaecologist', 'urologist', 'screening', 'palliative',
    'std', 'sti', 'contraception', 'incision', 'presented', 'paramedics', 'antibiotics', 'tablet', 'capsule',
  ],
  support: [
    'prevention', 'prevent', 'preventing', 'hotline', 'helpline', 'crisis line', 'warning signs', 'risk factors', 'awareness',
    'support her|him|them|someone', 'help|support a|my friend', 'how can i help', 'report', 'reporting', 'safeguarding', 'protect',
    'protecting', 'moderators', 'survivors', 'counselor', 'counsellor', 'counselling', 'counseling', 'detect', 'detection', 'policy',
    'policies', 'training', 'recognize', 'recognise', 'ncmec',
  ],
  tech: [
    'process', 'processes', 'pid', 'thread', 'threads', 'server', 'servers', 'container', 'containers', 'terminal', 'command',
    'commands', 'script', 'scripts', 'sql', 'docker', 'kubernetes', 'k8s', 'linux', 'unix', 'python', 'java', 'node', 'bash', 'shell',
    'query', 'cron', 'daemon', 'browser', 'sigkill', 'sigterm', 'css', 'html', 'div', 'function', 'git', 'repo', 'cpu', 'database',
    'wordpress', 'theme', 'compiler', 'runtime', 'kubectl', 'systemd', 'powershell', 'npm',
  ],
  defensive: [
    'authorized', 'authorised', 'pentest', 'pentesting', 'penetration test', 'penetration testing', 'pen test', 'ctf',
    'capture the flag', 'red team', 'blue team', 'defend', 'defending', 'defense', 'defence', 'defensive', 'protect', 'protection',
    'prevent', 'prevention', 'detect', 'detection', 'mitigate', 'mitigation', 'awareness', 'lab', 'homelab', 'my own', 'sandbox',
    'researchers', 'security team', 'incident response', 'forensics', 'antivirus', 'spot', 'recognize', 'recognise', 'identify',
    'never', 'avoid', 'dangerous', 'safety', 'safely',
  ],
  recovery: ['addiction', 'addicted', 'addict', 'rehab', 'recovery', 'recovering', 'detox', 'sober', 'sobriety', 'quit', 'quitting', 'withdrawal', 'treatment', 'naloxone', 'narcan', 'overdose prevention', 'harm reduction'],
  accident: [
    'accidentally', 'accident', 'by accident', 'shaving', 'cooking', 'chopping', 'kitchen', 'stove', 'oven', 'knife slipped', 'paper cut',
    'playing', 'football', 'soccer', 'fell', 'tripped', 'slipped', 'bike', 'workout', 'gym', 'iron', 'curling', 'sun', 'sunburn', 'beach',
  ],
  photo: ['photo', 'photos', 'photograph', 'photographer', 'photography', 'camera', 'filming', 'footage', 'portrait', 'portraits', 'headshots', 'lens', 'photoshoot'],
};

/** Per category, how much each nearby context multiplies a match's weight (the strongest damping applies). */
const DAMPING: Record<ModerationCategory, Partial<Record<CueKind, number>>> = {
  harassment: { history: 0.5, news: 0.6, fiction: 0.8, game: 0.5 },
  'harassment/threatening': { history: 0.5, news: 0.6, game: 0.35, joke: 0.6, fiction: 0.7, tech: 0.5 },
  hate: { history: 0.45, news: 0.6, edu: 0.6 },
  'hate/threatening': { history: 0.45, news: 0.6 },
  'self-harm': { medical: 0.4, support: 0.45, accident: 0.25, history: 0.6 },
  'self-harm/intent': { joke: 0.6, medical: 0.6, support: 0.5 },
  'self-harm/instructions': { medical: 0.5, support: 0.5 },
  sexual: { medical: 0.4, edu: 0.4 },
  'sexual/minors': { support: 0.3, edu: 0.5 },
  violence: { history: 0.45, news: 0.5, tech: 0.3, game: 0.45, joke: 0.6, fiction: 0.75, medical: 0.6, photo: 0.3 },
  'violence/graphic': { history: 0.5, medical: 0.35, news: 0.7 },
  illicit: { defensive: 0.45, history: 0.5, recovery: 0.35, medical: 0.6 },
  'illicit/violent': { history: 0.5, defensive: 0.5, tech: 0.5, news: 0.6, fiction: 0.6, medical: 0.5, game: 0.3 },
};

const DAMPING_LIST = Object.fromEntries(
  Object.entries(DAMPING).map(([category, factors]) => [category, Object.entries(factors) as [CueKind, number][]]),
) as Record<ModerationCategory, [CueKind, number][]>;

const CUE_WINDOW = 20;
const MINOR_WINDOW = 12;
const NEGATION_DAMPING = 0.15;
const NEGATORS = new Set(['not', 'never', 'dont', 'doesnt', 'didnt', 'wont', 'wouldnt', 'cant', 'cannot', 'couldnt', 'shouldnt', 'isnt', 'arent', 'wasnt', 'no', 'nobody', 'neither', 'nor']);

interface Lexicon {
  rules: PhraseSet<Rule>;
  suppressors: PhraseSet<null>;
  cues: PhraseSet<CueKind>;
  minorCues: PhraseSet<null>;
}

/**
 * The phrase sets are built on the first moderation check, not when the module loads: a gateway that never
 * moderates does not keep them (about 5 MB of resident memory with the regular-expression and Unicode code it runs).
 */
const lexicon = lazy(
  (): Lexicon => ({
    rules: new PhraseSet<Rule>(
      RULES.map(([p, weights, negatable]) => [p, { weights, negatable }] as const),
      SETS,
    ),
    suppressors: new PhraseSet<null>(
      SUPPRESS.map((p) => [p, null] as const),
      SETS,
    ),
    cues: new PhraseSet<CueKind>(
      (Object.entries(CUES) as [CueKind, string[]][]).flatMap(([kind, phrases]) => phrases.map((p) => [p, kind] as const)),
      SETS,
    ),
    minorCues: new PhraseSet<null>(
      [
        'child', 'children', 'kid', 'kids', 'minor', 'minors', 'underage', 'preteen', 'preteens', 'schoolgirl', 'schoolgirls',
        'schoolboy', 'toddler', 'little girl|girls|boy|boys', 'young girl|girls|boy|boys', 'middle schooler|schoolers', 'elementary',
        'teen', 'teens', 'teenage', '@MINOR_AGE year|years|yr|yrs [old|olds]', 'loli', 'lolita', 'pedo', 'pedophile', 'paedophile',
        'grade schooler', 'niece', 'nephew', 'stepdaughter', 'stepson',
      ].map((p) => [p, null] as const),
      SETS,
    ),
  }),
);

// ---------------------------------------------------------------- scoring

interface Scored {
  score: number;
  evidence: string[];
}

function isNegated(ts: TokenStream, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (NEGATORS.has(ts.tok[i]!)) return true;
  for (let i = start - 1; i >= Math.max(0, start - 3); i--) {
    // A negator on an earlier line does not reach this one ("lol no\nI will kill you" is a threat). A wrapped
    // "please dont\nkill yourself" is flagged for it: a line break cannot tell a wrap from a reply, and missing a
    // threat costs more than flagging a kind sentence. A negator inside the match still counts across lines.
    if (ts.lineStarts.has(i + 1)) break;
    const t = ts.tok[i]!;
    if (t === BREAK) break;
    if (NEGATORS.has(t)) return true;
  }
  return false;
}

/** Scores of every built-in category (no threshold), parents lifted by their sub-categories. */
function scoreBuiltIn(ts: TokenStream): Map<ModerationCategory, Scored> {
  const n = ts.tok.length;
  const sets = lexicon();
  const hits = sets.rules.find(ts);
  const out = new Map<ModerationCategory, Scored>();
  if (hits.length === 0) return out;

  const suppressed = new Marks(n, sets.suppressors.find(ts).map((h) => [h.start, h.end] as const));
  const cueSpans = new Map<CueKind, [number, number][]>();
  for (const cue of sets.cues.find(ts)) {
    const list = cueSpans.get(cue.phrase.meta) ?? [];
    list.push([cue.start, cue.end]);
    cueSpans.set(cue.phrase.meta, list);
  }
  // Four-digit years 1000-1999 are a history cue.
  for (let i = 0; i < n; i++) {
    if (/^1[0-9]{3}$/.test(ts.tok[i]!)) {
      const list = cueSpans.get('history') ?? [];
      list.push([i, i + 1]);
      cueSpans.set('history', list);
    }
  }
  const cues = new Map<CueKind, Marks>([...cueSpans].map(([kind, spans]) => [kind, new Marks(n, spans)]));
  const damping = (category: ModerationCategory, start: number, end: number): number => {
    let factor = 1;
    for (const [kind, f] of DAMPING_LIST[category]) {
      if (f < factor && cues.get(kind)?.has(start - CUE_WINDOW, end + CUE_WINDOW)) factor = f;
    }
    return factor;
  };

  // Per category, the weighted matches; then matches that overlap count once (their best), and so does a pattern
  // that matches again elsewhere.
  const matches = new Map<ModerationCategory, { id: number; start: number; end: number; w: number }[]>();
  const record = (category: ModerationCategory, id: number, start: number, end: number, w: number): void => {
    if (w <= 0) return;
    const list = matches.get(category) ?? [];
    list.push({ id, start, end, w });
    matches.set(category, list);
  };
  let minorCues: Marks | undefined;
  for (const hit of hits) {
    if (suppressed.has(hit.start, hit.end)) continue;
    const { weights, negatable } = hit.phrase.meta;
    const negation = negatable && isNegated(ts, hit.start, hit.end) ? NEGATION_DAMPING : 1;
    for (const [category, w] of Object.entries(weights) as [ModerationCategory, number][]) {
      record(category, hit.phrase.id, hit.start, hit.end, w * negation * damping(category, hit.start, hit.end));
    }
    // Sexual content near a minor cue is sexual/minors.
    const sexual = weights.sexual;
    if (sexual !== undefined) {
      minorCues ??= new Marks(n, sets.minorCues.find(ts).map((h) => [h.start, h.end] as const));
      if (minorCues.has(hit.start - MINOR_WINDOW, hit.end + MINOR_WINDOW)) {
        record('sexual/minors', hit.phrase.id, hit.start, hit.end, sexual * negation * damping('sexual/minors', hit.start, hit.end));
      }
    }
  }

  for (const [category, list] of matches) {
    list.sort((a, b) => a.start - b.start || b.end - a.end);
    const best = new Map<number, { w: number; start: number; end: number }>();
    let cluster: (typeof list)[number] | null = null;
    let clusterEnd = -1;
    const close = (): void => {
      if (!cluster) return;
      const previous = best.get(cluster.id);
      if (!previous || previous.w < cluster.w) best.set(cluster.id, cluster);
    };
    for (const m of list) {
      if (cluster && m.start < clusterEnd) {
        if (m.w > cluster.w) cluster = { ...m };
        clusterEnd = Math.max(clusterEnd, m.end);
        continue;
      }
      close();
      cluster = { ...m };
      clusterEnd = m.end;
    }
    close();
    const entries = [...best.values()].sort((a, b) => b.w - a.w);
    let keep = 1;
    for (const e of entries) keep *= 1 - Math.min(1, e.w);
    out.set(category, { score: 1 - keep, evidence: [...new Set(entries.slice(0, 10).map((e) => evidenceOf(ts, e.start, e.end)))].slice(0, 5) });
  }
  for (const [child, parent] of [...Object.entries(MODERATION_PARENTS), ...Object.entries(ALSO_LIFTS)] as [ModerationCategory, ModerationCategory][]) {
    const c = out.get(child);
    if (!c) continue;
    const p = out.get(parent);
    if (!p) out.set(parent, { score: c.score, evidence: c.evidence });
    else if (p.score < c.score) out.set(parent, { score: c.score, evidence: [...new Set([...p.evidence, ...c.evidence])].slice(0, 5) });
  }
  return out;
}

// ---------------------------------------------------------------- extra categories

const MAX_EXTRA_CATEGORIES = 20;
const MAX_TERMS = 500;
const MAX_PATTERNS = 50;
/** Regular expressions cost most, so all extra categories together may have at most this many. */
const MAX_TOTAL_PATTERNS = 50;
const MAX_PATTERN_LENGTH = 200;
const MAX_LONG_REPEATS = 1;
const LONG_REPEAT = 20;
/** Extra-category regular expressions run on segments of at most this many characters (see validatePattern). */
const SEGMENT_LENGTH = 128;
/**
 * Most paths a pattern may have: ways a match from one position can go (see Group). A backtracking engine tries at
 * most that many from each of a segment's 128 start positions, each no longer than the 200-character pattern, so the
 * work per segment is bounded by a constant and a text costs time linear in its length (adversarial segments take
 * about 2 ms at this bound). 1024 leaves room for one long repeat with an 8-way choice ("\s+(?:a|b)") or two repeats
 * of about 30 each; a list of words ("\W+(?:you|him|her|them)") is one choice, as only one of them can match.
 */
export const MAX_MATCH_PATHS = 1024;
const EXTRA_HIT_WEIGHT = 0.9;
/** Extra-category patterns match case-insensitively, with Unicode semantics. */
const PATTERN_FLAGS = 'iu';

interface CompiledExtra {
  readonly name: string;
  readonly terms: PhraseSet<string> | null;
  readonly patterns: readonly RegExp[];
}

/**
 * A group of a pattern being scanned: flags for the nesting rules, and its paths, the ways it can match from one
 * position: the sum over its alternatives of the product over their atoms (an upper bound on what backtracking
 * tries; a lookahead counts like a group, though the engine never backtracks into it). Alternatives that are all
 * plain literals ("kill|murder|stab") count less: see literalChain.
 */
interface Group {
  quantified: boolean;
  /** Paths of the alternatives already ended by "|". */
  closedPaths: number;
  /** Paths of the current alternative without its last atom, which a quantifier may still change. */
  branchPaths: number;
  /** Paths of the current alternative's last atom. */
  atomPaths: number;
  /** The alternatives already ended, as pattern source, each null unless a plain literal. */
  literals: (string | null)[];
  /** The current alternative's source while it is a plain literal, else null. */
  literal: string | null;
}

function newGroup(): Group {
  return { quantified: false, closedPaths: 0, branchPaths: 1, atomPaths: 1, literals: [], literal: '' };
}

/** Adds an atom of `paths` paths; `literal` is its source when it is one fixed character, else null. */
function addAtom(group: Group, paths: number, literal: string | null): void {
  group.branchPaths *= group.atomPaths;
  group.atomPaths = paths;
  group.literal = group.literal !== null && literal !== null ? group.literal + literal : null;
}

function sumPaths(group: Group): number {
  return group.closedPaths + group.branchPaths * group.atomPaths;
}

function endAlternative(group: Group): void {
  group.closedPaths = sumPaths(group);
  group.literals.push(group.literal);
  group.branchPaths = 1;
  group.atomPaths = 1;
  group.literal = '';
}

function hasAlternatives(group: Group): boolean {
  return group.literals.length > 0;
}

/**
 * Paths of a closed group. An alternation of plain literals can match at one position only through the literals
 * that are a prefix of the text there, and of two literals that both match, one is a prefix of the other (they
 * cannot differ before either ends): so its paths are at most the longest chain of alternatives each a prefix of the
 * next (1 for "kill|murder|stab", 2 for "a|a" or "kill|killer"). Any other alternation counts every alternative.
 */
function groupPaths(group: Group): number {
  if (!hasAlternatives(group) || group.literal === null || group.literals.includes(null)) return sumPaths(group);
  return literalChain([...(group.literals as string[]), group.literal]);
}

/** A plain literal's source as the text it matches ("a\.b" -> "a.b"). */
function unescapeLiteral(source: string): string {
  return source.replace(/\\(.)/gsu, '$1');
}

/**
 * The longest chain of `literals` (pattern sources of plain literals) where each matches the start of the next,
 * compared as patterns match (case-folded), by the regular expression engine itself.
 */
function literalChain(literals: readonly string[]): number {
  const texts = literals.map(unescapeLiteral);
  const order = literals.map((_, k) => k).sort((a, b) => [...texts[a]!].length - [...texts[b]!].length || a - b);
  const chain = new Array<number>(literals.length).fill(1);
  for (let x = 0; x < order.length; x++) {
    const shorter = order[x]!;
    const prefix = new RegExp(`^(?:${literals[shorter]})`, PATTERN_FLAGS);
    for (let y = x + 1; y < order.length; y++) {
      const longer = order[y]!;
      if (chain[longer]! <= chain[shorter]! && prefix.test(texts[longer]!)) chain[longer] = chain[shorter]! + 1;
    }
  }
  return Math.max(...chain);
}

/** Paths of an atom of `paths` paths repeated min..max times: every repeat count, each repeat taking any path. */
function repeatPaths(paths: number, min: number, max: number): number {
  // A segment holds at most SEGMENT_LENGTH characters, so more repeats than that never match.
  const most = Math.min(max, SEGMENT_LENGTH);
  let sum = 0;
  for (let count = min; count <= most; count++) sum += paths ** count;
  return Math.max(1, sum);
}

/** Escaped syntax characters: a backslash before them makes a plain literal character ("\.", "\("). */
const ESCAPED_LITERAL = /^\\[\^$\\.*+?()[\]{}|/]$/;

/** Characters of the escape at `i`: "\p{...}", "\P{...}" and "\u{...}" carry braces that are no quantifier. */
function escapeLength(source: string, i: number): number {
  if ('pPu'.includes(source[i + 1] ?? '') && source[i + 2] === '{') {
    const close = source.indexOf('}', i + 3);
    if (close > 0) return close - i + 1;
  }
  return 2;
}

const BOUND = /\{(\d+)(,(\d*))?\}/y;

/** The quantifier at `i` ("*", "+", "?", "{n}", "{n,}", "{n,m}", each maybe lazy), or null. */
function quantifierAt(source: string, i: number): { min: number; max: number; length: number } | null {
  const ch = source[i];
  let quantifier: { min: number; max: number; length: number } | null = null;
  if (ch === '*') quantifier = { min: 0, max: Infinity, length: 1 };
  else if (ch === '+') quantifier = { min: 1, max: Infinity, length: 1 };
  else if (ch === '?') quantifier = { min: 0, max: 1, length: 1 };
  else if (ch === '{') {
    // Read on the rest of the pattern, not a window: "{1,0000000000000000000009}" is "{1,9}".
    BOUND.lastIndex = i;
    const m = BOUND.exec(source);
    if (m) quantifier = { min: Number(m[1]), max: m[2] === undefined ? Number(m[1]) : m[3] === '' ? Infinity : Number(m[3]), length: m[0].length };
  }
  if (quantifier && source[i + quantifier.length] === '?') quantifier.length++;
  return quantifier;
}

function formatPaths(paths: number): string {
  return paths < 1e9 ? String(paths) : 'over a billion';
}

/**
 * Rejects regular expressions that could backtrack catastrophically or run long: longer than 200 characters,
 * backreferences, lookbehind, a repeated group that itself contains a quantifier ("(a+)+", "(\w*\s?)*") or an
 * alternation ("(a|ab)*"), more than one long repeat ("*", "+", "{n,}" or a maximum above 20), and more than
 * MAX_MATCH_PATHS paths: chains of bounded repeats ("\w{0,20}\w{0,20}\w{0,20}", "a?a?a?...") and alternatives
 * ("(?:a|a)(?:a|a)...") multiply the ways a match can be tried without nesting anything (alternatives that are all
 * plain literals count by how many of them can match at one place, see groupPaths). What remains runs on
 * segments of at most 128 characters; all extra categories together may have at most 50 patterns.
 */
function validatePattern(source: string, where: string): RegExp {
  const { compiled, paths } = analyzePattern(source, where);
  if (paths > MAX_MATCH_PATHS) {
    throw new Error(
      `${where}: too many ways to match: its optional and repeated parts and alternatives can match from one position in ${formatPaths(paths)} ways (at most ${MAX_MATCH_PATHS}); use fewer of them or narrower repeats`,
    );
  }
  return compiled;
}

/**
 * The paths validatePattern counts for `source`: the ways a match from one position can go, which it refuses past
 * MAX_MATCH_PATHS. Throws like validatePattern for what the other rules refuse.
 */
export function matchPaths(source: string): number {
  return analyzePattern(source, 'pattern').paths;
}

function analyzePattern(source: string, where: string): { compiled: RegExp; paths: number } {
  if (typeof source !== 'string' || source.length === 0) throw new Error(`${where}: a pattern must be a non-empty string`);
  if (source.length > MAX_PATTERN_LENGTH) throw new Error(`${where}: pattern is longer than ${MAX_PATTERN_LENGTH} characters`);
  let compiled: RegExp;
  try {
    compiled = new RegExp(source, PATTERN_FLAGS);
  } catch (err) {
    throw new Error(`${where}: not a valid regular expression (${err instanceof Error ? err.message : String(err)})`);
  }
  if (/\\[1-9]|\\k</.test(source)) throw new Error(`${where}: backreferences are not allowed`);
  if (/\(\?<[=!]/.test(source)) throw new Error(`${where}: lookbehind is not allowed`);

  const stack: Group[] = [newGroup()];
  const current = (): Group => stack[stack.length - 1]!;
  let longRepeats = 0;
  let lastClosed: Group | null = null;
  let i = 0;
  while (i < source.length) {
    const ch = source[i]!;
    const quantifier = quantifierAt(source, i);
    if (quantifier) {
      if (quantifier.max > 1) {
        if (lastClosed?.quantified) throw new Error(`${where}: nested quantifiers (a repeated group containing a quantifier) are not allowed`);
        if (lastClosed && hasAlternatives(lastClosed)) throw new Error(`${where}: a repeated group containing alternatives, like (a|b)*, is not allowed`);
        if (quantifier.max > LONG_REPEAT && ++longRepeats > MAX_LONG_REPEATS) {
          throw new Error(`${where}: at most ${MAX_LONG_REPEATS} long repeat (*, +, {n,} or {n,m} with m > ${LONG_REPEAT}) is allowed`);
        }
      }
      const group = current();
      group.quantified = true;
      group.literal = null;
      group.atomPaths = repeatPaths(group.atomPaths, quantifier.min, quantifier.max);
      i += quantifier.length;
      lastClosed = null;
      continue;
    }
    lastClosed = null;
    if (ch === '\\') {
      const length = escapeLength(source, i);
      const escape = source.slice(i, i + length);
      i += length;
      addAtom(current(), 1, ESCAPED_LITERAL.test(escape) ? escape : null);
    } else if (ch === '[') {
      i++;
      while (i < source.length && source[i] !== ']') i += source[i] === '\\' ? 2 : 1;
      i++;
      addAtom(current(), 1, null);
    } else if (ch === '(') {
      stack.push(newGroup());
      i++;
      // "(?:", "(?=", "(?!", and "(?<name>" (lookbehind is refused above): none of it is matched text.
      if (source[i] === '?') i = source[i + 1] === '<' ? source.indexOf('>', i) + 1 : i + 2;
    } else if (ch === ')') {
      const group = stack.length > 1 ? stack.pop()! : newGroup();
      lastClosed = group;
      i++;
      // A quantifier inside a group is inside every enclosing group too.
      if (group.quantified) current().quantified = true;
      addAtom(current(), groupPaths(group), null);
    } else if (ch === '|') {
      endAlternative(current());
      i++;
    } else {
      // "." and the anchors "^" and "$" are no fixed character.
      addAtom(current(), 1, ch === '.' || ch === '^' || ch === '$' ? null : ch);
      i++;
    }
  }
  return { compiled, paths: groupPaths(stack[0]!) };
}

function compileExtra(extra: readonly ExtraCategory[]): CompiledExtra[] {
  if (!Array.isArray(extra)) throw new Error('extraCategories must be an array');
  if (extra.length > MAX_EXTRA_CATEGORIES) throw new Error(`at most ${MAX_EXTRA_CATEGORIES} extra categories are allowed`);
  const names = new Set<string>();
  const total = extra.reduce((sum, c) => sum + (Array.isArray(c?.patterns) ? c.patterns.length : 0), 0);
  if (total > MAX_TOTAL_PATTERNS) throw new Error(`at most ${MAX_TOTAL_PATTERNS} patterns are allowed across all extra categories (found ${total})`);
  return extra.map((category, index) => {
    const where = `extra category ${index + 1}`;
    if (typeof category !== 'object' || category === null) throw new Error(`${where}: must be an object {name, terms, patterns?}`);
    const { name, terms, patterns = [] } = category;
    if (typeof name !== 'string' || !/^[a-z0-9][a-z0-9_/-]{0,63}$/.test(name)) throw new Error(`${where}: name must be 1-64 lower-case letters, digits, _ / -`);
    if ((MODERATION_CATEGORIES as readonly string[]).includes(name)) throw new Error(`${where}: "${name}" is a built-in category`);
    if (names.has(name)) throw new Error(`${where}: the name "${name}" is used twice`);
    names.add(name);
    if (!Array.isArray(terms) || terms.length > MAX_TERMS) throw new Error(`extra category "${name}": terms must be an array of at most ${MAX_TERMS} strings`);
    if (!Array.isArray(patterns) || patterns.length > MAX_PATTERNS) throw new Error(`extra category "${name}": patterns must be an array of at most ${MAX_PATTERNS} strings`);
    if (terms.length === 0 && patterns.length === 0) throw new Error(`extra category "${name}": give at least one term or pattern`);
    const phrases: [string, string][] = terms.map((term, t) => {
      if (typeof term !== 'string' || term.length === 0 || term.length > 100) throw new Error(`extra category "${name}": term ${t + 1} must be a string of 1-100 characters`);
      const words = tokenize(term).tok.filter((w) => w !== BREAK);
      if (words.length === 0) throw new Error(`extra category "${name}": term "${term}" has no letters or digits`);
      return [words.join(' '), term];
    });
    return {
      name,
      terms: phrases.length > 0 ? new PhraseSet<string>(phrases) : null,
      patterns: patterns.map((p, k) => validatePattern(p, `extra category "${name}" pattern ${k + 1}`)),
    };
  });
}

/**
 * Checks admin-defined categories (for a 400 at configuration time): names, term and pattern counts, and that every
 * pattern is a safe regular expression. Throws an Error whose message says what is wrong.
 */
export function validateExtraCategories(extra: readonly ExtraCategory[]): void {
  compileExtra(extra);
}

/** Splits text into segments of at most SEGMENT_LENGTH characters, at line or sentence ends or else at spaces. */
function segments(text: string): string[] {
  const out: string[] = [];
  let start = 0;
  while (start < text.length) {
    let end = Math.min(start + SEGMENT_LENGTH, text.length);
    if (end < text.length) {
      let cut = -1;
      for (let i = end - 1; i > start + SEGMENT_LENGTH / 2; i--) {
        const c = text[i];
        if (c === '\n' || c === '.' || c === '!' || c === '?') {
          cut = i + 1;
          break;
        }
        if (cut < 0 && (c === ' ' || c === '\t')) cut = -(i + 1);
      }
      if (cut > 0) end = cut;
      else if (cut < -1) end = -cut;
    }
    out.push(text.slice(start, end));
    start = end;
  }
  return out;
}

function scoreExtra(text: string, ts: TokenStream, compiled: readonly CompiledExtra[]): Map<string, Scored> {
  const out = new Map<string, Scored>();
  let parts: string[] | undefined;
  for (const category of compiled) {
    const evidence: string[] = [];
    if (category.terms) for (const hit of category.terms.find(ts)) if (!evidence.includes(hit.phrase.meta)) evidence.push(hit.phrase.meta);
    if (category.patterns.length > 0) {
      parts ??= segments(text);
      for (const pattern of category.patterns) {
        for (const part of parts) {
          const m = pattern.exec(part);
          if (m) {
            evidence.push(m[0].slice(0, 80));
            break;
          }
        }
      }
    }
    if (evidence.length > 0) out.set(category.name, { score: 1 - (1 - EXTRA_HIT_WEIGHT) ** evidence.length, evidence: evidence.slice(0, 5) });
  }
  return out;
}

const extraCache = new Map<string, CompiledExtra[]>();
const EXTRA_CACHE_SIZE = 64;

function compiledExtraFor(extra: readonly ExtraCategory[]): CompiledExtra[] {
  const key = JSON.stringify(extra);
  const cached = extraCache.get(key);
  if (cached) return cached;
  const compiled = compileExtra(extra);
  if (extraCache.size >= EXTRA_CACHE_SIZE) extraCache.delete(extraCache.keys().next().value!);
  extraCache.set(key, compiled);
  return compiled;
}

// ---------------------------------------------------------------- public API

function round(x: number): number {
  return Math.round(Math.min(1, Math.max(0, x)) * 1000) / 1000;
}

/**
 * Classifies (already normalised) text. Returns the categories whose score reaches the threshold, highest first.
 * Throws an Error for a bad threshold or bad extra categories (see validateExtraCategories).
 */
export function classifyContent(text: string, options: ModerationOptions = {}): ModerationResult[] {
  const threshold = options.threshold ?? 0.5;
  if (typeof threshold !== 'number' || !(threshold >= 0 && threshold <= 1)) throw new Error('threshold must be a number from 0 to 1');
  const compiled = options.extraCategories && options.extraCategories.length > 0 ? compiledExtraFor(options.extraCategories) : [];
  const wanted = new Set<string>(options.categories ?? MODERATION_CATEGORIES);
  const ts = tokenize(typeof text === 'string' ? text : String(text));

  const results: ModerationResult[] = [];
  for (const [category, scored] of scoreBuiltIn(ts)) {
    if (!wanted.has(category)) continue;
    const score = round(scored.score);
    if (score > 0 && score >= threshold) results.push({ category, score, evidence: scored.evidence });
  }
  for (const [category, scored] of scoreExtra(text, ts, compiled)) {
    const score = round(scored.score);
    if (score >= threshold) results.push({ category, score, evidence: scored.evidence });
  }
  return results.sort((a, b) => b.score - a.score || a.category.localeCompare(b.category));
}
