import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';
import fc from 'fast-check';
import { Kysely, SqliteDialect, sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { withStatementCache } from '../../src/db/sqlite-statements.js';

const SQLite = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
const opened: BetterSqlite3.Database[] = [];

function database(): BetterSqlite3.Database {
  const db = new SQLite(':memory:');
  opened.push(db);
  db.exec('create table t (n integer)');
  return db;
}

afterEach(() => {
  for (const db of opened.splice(0)) if (db.open) db.close();
});

describe('withStatementCache', () => {
  it('hands out the same prepared statement for the same text', () => {
    const cached = withStatementCache(database());
    expect(cached.prepare('select n from t')).toBe(cached.prepare('select n from t'));
    expect(cached.prepare('select n from t')).not.toBe(cached.prepare('select n + 1 from t'));
  });

  it('a statement still being iterated is not handed out again: the second caller gets its own', () => {
    const db = database();
    db.exec('insert into t values (1), (2), (3)');
    const cached = withStatementCache(db);
    const first = cached.prepare('select n from t');
    const iterating = first.iterate([]);
    iterating.next();
    const second = cached.prepare('select n from t');
    expect(second).not.toBe(first);
    expect(second.all([])).toHaveLength(3);
    expect([...iterating]).toHaveLength(2);
  });

  it('keeps at most 256 statements, dropping the least recently used', () => {
    const cached = withStatementCache(database());
    const kept = cached.prepare('select 0 from t');
    for (let i = 1; i <= 300; i++) {
      cached.prepare(`select ${i} from t`);
      if (i % 100 === 0) cached.prepare('select 0 from t');
    }
    expect(cached.prepare('select 0 from t')).toBe(kept);
    const early = cached.prepare('select 1 from t');
    expect(cached.prepare('select 1 from t')).toBe(early);
  });

  it('bounds the SQL it keeps prepared: a very long text is not kept, and long texts push out the oldest', () => {
    const cached = withStatementCache(database());
    const long = (n: number, width: number) => `select ${Array.from({ length: width }, (_, i) => `${n} + ${i}`).join(', ')} from t`;
    const huge = long(0, 2_000); // about 19,000 characters, over a quarter of the budget
    expect(cached.prepare(huge)).not.toBe(cached.prepare(huge));
    const first = cached.prepare(long(1, 800)); // about 7,100 characters each: ten of them pass the 64 K budget
    expect(long(1, 800).length).toBeGreaterThan(7_000);
    expect(cached.prepare(long(1, 800))).toBe(first);
    for (let n = 2; n <= 10; n++) cached.prepare(long(n, 800));
    expect(cached.prepare(long(1, 800))).not.toBe(first);
    const recent = cached.prepare(long(10, 800));
    expect(cached.prepare(long(10, 800))).toBe(recent);
  });

  // Parameters go to better-sqlite3 as arguments rather than as one array: the answers must be the same.
  const primitive = fc.oneof(
    fc.integer(),
    fc.double({ noNaN: true }),
    fc.string(),
    fc.constant(null),
    fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
    fc.boolean(),
    fc.constant(undefined),
  );
  const selectOf = (count: number) => `select ${Array.from({ length: count }, (_, i) => `? as c${i}`).join(', ')}`;
  const outcome = (run: () => unknown) => {
    try {
      return { value: run() };
    } catch (err) {
      return { error: String(err) };
    }
  };

  it('binds any parameters as better-sqlite3 binds them as one array, and refuses what it refuses', () => {
    const raw = database();
    const cached = withStatementCache(raw);
    const object = fc.oneof(fc.constant({ a: 1 }), fc.constant([1, 2]), fc.constant(new Date(0)), fc.constant(Buffer.from('blob')), fc.constant(() => 1));
    fc.assert(
      fc.property(fc.array(primitive, { minLength: 1, maxLength: 30 }), fc.option(fc.tuple(object, fc.nat()), { nil: undefined }), (values, inserted) => {
        const parameters: unknown[] = [...values];
        if (inserted) parameters.splice(inserted[1] % (values.length + 1), 0, inserted[0]);
        const text = selectOf(parameters.length);
        const expected = outcome(() => raw.prepare(text).all(parameters));
        expect(outcome(() => cached.prepare(text).all(parameters))).toEqual(expected);
        expect(outcome(() => [...cached.prepare(text).iterate(parameters)])).toEqual(outcome(() => [...raw.prepare(text).iterate(parameters)]));
      }),
      { numRuns: 300 },
    );
  });

  it('writes rows with many parameters, past the number handed over as arguments', async () => {
    const db = new Kysely<{ t: { n: number } }>({ dialect: new SqliteDialect({ database: withStatementCache(database()) }) });
    for (const count of [10, 999, 1_000, 1_001, 5_000]) {
      await db.deleteFrom('t').execute();
      await db
        .insertInto('t')
        .values(Array.from({ length: count }, (_, n) => ({ n })))
        .execute();
      const { rows } = await sql<{ c: number; s: number }>`select count(*) as c, sum(n) as s from t`.execute(db);
      expect(rows[0]).toEqual({ c: count, s: (count * (count - 1)) / 2 });
    }
    await db.destroy();
  });

  it('runs Kysely queries, transactions and streams through the cache with the right results', async () => {
    const db = new Kysely<{ t: { n: number } }>({ dialect: new SqliteDialect({ database: withStatementCache(database()) }) });
    for (let i = 0; i < 3; i++) {
      await db.transaction().execute(async (trx) => {
        await trx.insertInto('t').values({ n: i }).execute();
      });
    }
    // Kysely holds its one SQLite connection for a stream's whole iteration, so the same text runs after it.
    const streamed: number[] = [];
    for await (const row of db.selectFrom('t').select('n').orderBy('n').stream()) streamed.push(row.n);
    expect(streamed).toEqual([0, 1, 2]);
    expect((await db.selectFrom('t').select('n').orderBy('n').execute()).map((r) => r.n)).toEqual([0, 1, 2]);
    const { rows } = await sql<{ c: number }>`select count(*) as c from t`.execute(db);
    expect(rows[0]!.c).toBe(3);
    await db.destroy();
  });
});
