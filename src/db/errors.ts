/** A unique or primary-key constraint rejected a write: PostgreSQL 23505, SQLite SQLITE_CONSTRAINT_UNIQUE/PRIMARYKEY. */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/** A foreign key rejected a write: the referenced row is missing, or still referenced (PostgreSQL 23503). */
export function isForeignKeyViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY';
}

/** SQLite's codes for a row the database will not take (any SQLITE_CONSTRAINT_* too). */
const SQLITE_ROW_REFUSALS = new Set(['SQLITE_MISMATCH', 'SQLITE_TOOBIG', 'SQLITE_RANGE']);

/**
 * The database refused the rows themselves, and would refuse them again: PostgreSQL's data exceptions and integrity
 * violations (SQLSTATE classes 22 and 23), SQLite's constraint, type and size errors, or a value the driver cannot
 * bind (a TypeError or RangeError). Anything else (unreachable, read-only, full, locked, timed out) is the
 * database's state, and the same rows may well be written later.
 */
export function isRefusedRow(err: unknown): boolean {
  if (err instanceof TypeError || err instanceof RangeError) return true;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  if (/^2[23][0-9A-Z]{3}$/.test(code)) return true;
  return code.startsWith('SQLITE_CONSTRAINT') || SQLITE_ROW_REFUSALS.has(code);
}
