import type BetterSqlite3 from 'better-sqlite3';
import type { SqliteDatabase } from 'kysely';

/** Distinct statements kept prepared; Kysely's texts repeat (same query, same shape), so a few hundred cover them. */
const MAX_CACHED = 256;
/**
 * Characters of SQL kept prepared in all. A prepared statement holds about 30 bytes of native memory per character
 * of its text (a multi-row insert with a thousand parameters, about 100 KB), so the cache is bounded by text too:
 * about 2 MB.
 */
const MAX_CACHED_CHARS = 64 * 1024;

/**
 * The SQLite connection as Kysely sees it, with prepared statements reused. Kysely prepares every statement again
 * on every call, which on the hot paths (usage flushes, token checks) cost about as much as running it: a usage
 * flush's multi-row insert holds over a thousand parameters. A statement still running (an iteration being read) is
 * never handed out twice: that call gets a fresh one.
 */
export function withStatementCache(sqlite: BetterSqlite3.Database): SqliteDatabase {
  const cache = new Map<string, BetterSqlite3.Statement>();
  let cachedChars = 0;
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
      if (text.length > MAX_CACHED_CHARS / 4) return statement;
      cache.set(text, statement);
      cachedChars += text.length;
      while (cache.size > MAX_CACHED || cachedChars > MAX_CACHED_CHARS) {
        const oldest = cache.keys().next().value!;
        cache.delete(oldest);
        cachedChars -= oldest.length;
      }
      return statement;
    },
    close() {
      cache.clear();
      sqlite.close();
    },
  };
}
