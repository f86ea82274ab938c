import type BetterSqlite3 from 'better-sqlite3';
import type { SqliteDatabase, SqliteStatement } from 'kysely';

/** Distinct statements kept prepared; Kysely's texts repeat (same query, same shape), so a few hundred cover them. */
const MAX_CACHED = 256;
/**
 * Characters of SQL kept prepared in all. A prepared statement holds about 30 bytes of native memory per character
 * of its text (a multi-row insert with a thousand parameters, about 100 KB), so the cache is bounded by text too:
 * about 2 MB.
 */
const MAX_CACHED_CHARS = 64 * 1024;

/** At most this many parameters go to better-sqlite3 as arguments, each a slot on the stack; more go as one array. */
const MAX_ARGUMENT_PARAMETERS = 1_000;

/** Parameters that can go as arguments: no object (or function) among them, which better-sqlite3 would read as more parameters. */
function asArguments(parameters: ReadonlyArray<unknown>): boolean {
  if (parameters.length > MAX_ARGUMENT_PARAMETERS) return false;
  for (let i = 0; i < parameters.length; i++) {
    const value = parameters[i];
    if ((typeof value === 'object' && value !== null) || typeof value === 'function') return false;
  }
  return true;
}

/**
 * A prepared statement as Kysely calls it, handing its parameters to better-sqlite3 as arguments. Given one array,
 * better-sqlite3 reads it element by element through V8's general property lookup: for the 21 values of a usage
 * row that was about 9,000 instructions a call, 40 % of binding them. Arguments are read directly. Parameters
 * holding an object (a blob, a value that was not stringified) still go as an array: as arguments, better-sqlite3
 * would bind an array's elements or an object's named keys instead of refusing them.
 */
class ArgumentStatement implements SqliteStatement {
  constructor(readonly statement: BetterSqlite3.Statement) {}

  get reader(): boolean {
    return this.statement.reader;
  }

  all(parameters: ReadonlyArray<unknown>): unknown[] {
    return asArguments(parameters) ? this.statement.all(...parameters) : this.statement.all(parameters);
  }

  run(parameters: ReadonlyArray<unknown>): BetterSqlite3.RunResult {
    return asArguments(parameters) ? this.statement.run(...parameters) : this.statement.run(parameters);
  }

  iterate(parameters: ReadonlyArray<unknown>): IterableIterator<unknown> {
    return asArguments(parameters) ? this.statement.iterate(...parameters) : this.statement.iterate(parameters);
  }
}

/**
 * The SQLite connection as Kysely sees it, with prepared statements reused. Kysely prepares every statement again
 * on every call, which on the hot paths (usage flushes, token checks) cost about as much as running it: a usage
 * flush's multi-row insert holds over a thousand parameters. A statement still running (an iteration being read) is
 * never handed out twice: that call gets a fresh one.
 */
export function withStatementCache(sqlite: BetterSqlite3.Database): SqliteDatabase {
  const cache = new Map<string, ArgumentStatement>();
  let cachedChars = 0;
  return {
    prepare(text: string) {
      const cached = cache.get(text);
      if (cached) {
        if (cached.statement.busy) return new ArgumentStatement(sqlite.prepare(text));
        // Most recently used last, so the oldest is the first key.
        cache.delete(text);
        cache.set(text, cached);
        return cached;
      }
      const statement = new ArgumentStatement(sqlite.prepare(text));
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
