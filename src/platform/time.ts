import { setTimeout as sleep } from 'node:timers/promises';

/** ISO 8601 date or date-time; Date.parse alone would also take free text such as "hello 2". */
const ISO_8601 = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i;

export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

/** Unix seconds, as OpenAI-style objects carry their timestamps (`created`, `created_at`). */
export function unixSeconds(ms: number): number {
  return Math.floor(ms / 1000);
}

/** A list's page size: the default when none was asked for, else the request clamped to 1..max (interface 8). */
export function pageSize(requested: number | undefined, fallback: number, max: number): number {
  return Math.min(max, Math.max(1, requested ?? fallback));
}

/** Milliseconds at the start of a UTC day, for every year (Date.UTC reads years 0 to 99 as 1900 to 1999). */
export function utcDay(year: number, monthIndex: number, day: number): number {
  const date = new Date(0);
  date.setUTCFullYear(year, monthIndex, day);
  return date.getTime();
}

/** The moments an ISO 8601 / RFC 3339 timestamp can show with four year digits: years 0000 to 9999 in UTC. */
const FIRST_ISO_MS = utcDay(0, 0, 1);
const LAST_ISO_MS = utcDay(10_000, 0, 1) - 1;

/**
 * Milliseconds for a real calendar moment (no 31 February, which Date.parse would roll over), else undefined.
 * Times without an offset are UTC, never the server's zone. A bare date as the upper bound covers its whole day.
 * An offset that moves the moment out of years 0000 to 9999 is refused: it could not be shown back as a date-time.
 */
export function parseTime(value: string | undefined, bound: 'from' | 'to'): number | undefined {
  const text = value?.trim() ?? '';
  const match = ISO_8601.exec(text);
  if (!match) return undefined;
  const [year, month, day, hour = 0, minute = 0, second = 0] = match.slice(1).map((part) => (part === undefined ? undefined : Number(part))) as number[];
  const daysInMonth = new Date(utcDay(year!, month!, 0)).getUTCDate();
  if (month! < 1 || month! > 12 || day! < 1 || day! > daysInMonth || hour > 23 || minute > 59 || second > 59) return undefined;
  const dateOnly = match[4] === undefined;
  const hasOffset = /(?:Z|[+-]\d{2}:?\d{2})$/i.test(text);
  const ms = Date.parse(dateOnly || hasOffset ? text : `${text}Z`);
  if (Number.isNaN(ms)) return undefined;
  const moment = dateOnly && bound === 'to' ? ms + DAY_MS - 1 : ms;
  return moment >= FIRST_ISO_MS && moment <= LAST_ISO_MS ? moment : undefined;
}

/** Whether `work` settles (either way) within `ms`; the timer does not keep the process alive. */
export function settledWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  return Promise.race([work.then(() => true, () => true), sleep(ms, false, { ref: false })]);
}
