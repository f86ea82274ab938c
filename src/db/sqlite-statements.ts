import type BetterSqlite3 from 'better-sqlite3';
import type { SqliteDatabase } from 'kysely';

/** Distinct statements kept prepared; Kysely's texts repeat (same query, same shape), so a few hundred cover them. */
const MAX_CACHED = 256;

/**
 * The SQLite connection as Kysely sees it, with prepared statements reused. Kysely prepares every statement again
 * on every call, which on the hot paths (usage flushes, token checks) cost about as much as running it: a usage
 * flush's multi-row insert holds over a thousand parameters. A statement still running (an iteration being read) is
 * never handed out twice: that call gets a fresh one.
 */
export function withStatementCache(sqlite: BetterSqlite3.Database): SqliteDatabase {
  const cache = new Map<string, BetterSqlite3.Statement>();
  return {
    prepare(text: string) {
      const cached = cache.get(text);
      if (cached) {
        if (cached.busy) return sqlite.prepare(text);
        // Most recently used last, so the oldest is the first key.
        cache.delete(text);
        cache.set(text, cached);
        return cached;
      }
      const statement = sqlite.prepare(text);
      cache.set(text, statement);
      if (cache.size > MAX_CACHED) cache.delete(cache.keys().next().value!);
      return statement;
    },
    close() {
      cache.clear();
      sqlite.close();
    },
  };
}
