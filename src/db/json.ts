import { sql, type RawBuilder } from 'kysely';
import type { Dialect } from './types.js';

/** Serialises a value for a JSON column (TEXT in SQLite, JSONB in PostgreSQL). */
export function toJson(dialect: Dialect, value: unknown): RawBuilder<unknown> | string | null {
  if (value === undefined || value === null) return null;
  const text = JSON.stringify(value);
  return dialect === 'postgres' ? sql`${text}::jsonb` : text;
}

/** Reads a JSON column: PostgreSQL hands back parsed values, SQLite hands back text. */
export function fromJson<T>(value: unknown): T | null {
  if (value === null || value === undefined) return null;
  return (typeof value === 'string' ? JSON.parse(value) : value) as T;
}
