import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { BufferedWriter, WRITE_SLICE } from '../../src/platform/buffered-writer.js';

const silent = pino({ level: 'silent' });

function writerWith(write: (batch: number[]) => Promise<void>, log = silent) {
  return new BufferedWriter<number>({ name: 'test', write, describe: (item) => ({ item }), log });
}

/** An error as the drivers throw it, with its code (SQLite's name, or PostgreSQL's SQLSTATE). */
function dbError(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

describe('BufferedWriter', () => {
  it('writes a full slice at once, and a backlog in slices, in order, letting other work run between them', async () => {
    const writes: number[][] = [];
    const events: string[] = [];
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const writer = writerWith(async (batch) => {
      // The first write waits, so what arrives meanwhile becomes a backlog.
      if (writes.length === 0) await gate;
      writes.push(batch);
      events.push(`write ${batch.length}`);
      // Work that arrives while a slice is written (a request) runs before the next slice.
      setImmediate(() => events.push('other work'));
    });
    const total = WRITE_SLICE * 3 + 7;
    for (let i = 0; i < total; i++) writer.push(i);
    expect(writer.pending).toBe(total - WRITE_SLICE); // the first slice left when it was full
    open();
    await writer.flush();
    expect(writes.map((w) => w.length)).toEqual([WRITE_SLICE, WRITE_SLICE, WRITE_SLICE, 7]);
    expect(writes.flat()).toEqual(Array.from({ length: total }, (_, i) => i));
    expect(events.slice(0, 6)).toEqual([`write ${WRITE_SLICE}`, 'other work', `write ${WRITE_SLICE}`, 'other work', `write ${WRITE_SLICE}`, 'other work']);
    await writer.close();
  });

  it('while a write runs, pushes only buffer; full slices that waited are written when that write ends', async () => {
    const writes: number[][] = [];
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const writer = writerWith(async (batch) => {
      if (writes.length === 0) await gate;
      writes.push(batch);
    });
    const flushes = vi.spyOn(writer, 'flush');
    const total = WRITE_SLICE * 4 + 3;
    for (let i = 0; i < total; i++) writer.push(i);
    // One flush started by the first full slice; the pushes behind it did not each queue another.
    expect(flushes).toHaveBeenCalledTimes(1);
    open();
    // No flush() call: the end of the first write starts the next one.
    for (let i = 0; i < 50 && writes.flat().length < total; i++) await new Promise((resolve) => setImmediate(resolve));
    // The next write takes everything that waited, in slices.
    expect(writes.map((w) => w.length)).toEqual([WRITE_SLICE, WRITE_SLICE, WRITE_SLICE, WRITE_SLICE, 3]);
    expect(writes.flat()).toEqual(Array.from({ length: total }, (_, i) => i));
    expect(writer.pending).toBe(0);
    await writer.close();
  });

  it('keeps what an unreachable database did not take, ahead of what came meanwhile, and writes it later', async () => {
    let down = false;
    const written: number[] = [];
    const writer = writerWith(async (batch) => {
      if (down) throw dbError('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED');
      written.push(...batch);
      if (written.length === WRITE_SLICE) down = true; // the database goes away after the first slice
    });
    const first = WRITE_SLICE * 3;
    for (let i = 0; i < first; i++) writer.push(i);
    await writer.flush();
    expect(written).toEqual(Array.from({ length: WRITE_SLICE }, (_, i) => i));
    expect(writer.pending).toBe(first - WRITE_SLICE);
    writer.push(first); // arrives after the failed attempt: kept behind what failed
    expect(writer.pending).toBe(first - WRITE_SLICE + 1);
    down = false;
    await writer.flush();
    expect(written).toEqual(Array.from({ length: first + 1 }, (_, i) => i));
    await writer.close();
  });

  it('close() goes on retrying while the database is briefly unreachable (a failover during a deploy)', async () => {
    const downUntil = Date.now() + 300;
    const written: number[] = [];
    const writer = writerWith(async (batch) => {
      if (Date.now() < downUntil) throw dbError('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED');
      written.push(...batch);
    });
    for (let i = 0; i < 10; i++) writer.push(i);
    await writer.close();
    expect(written).toEqual(Array.from({ length: 10 }, (_, i) => i));
    expect(writer.pending).toBe(0);
  });

  it.each([
    ['PostgreSQL, value too long', dbError('value too long for type character varying(10)', '22001')],
    ['PostgreSQL, not null', dbError('null value in column "model" violates not-null constraint', '23502')],
    ['SQLite, not null', dbError('NOT NULL constraint failed: usage_events.model', 'SQLITE_CONSTRAINT_NOTNULL')],
    ['a value the driver cannot bind', new TypeError('SQLite3 can only bind numbers, strings, bigints, buffers, and null')],
  ])('drops only an item the database refuses (%s); the rest of its slice and later slices are written', async (_name, refusal) => {
    const written: number[] = [];
    const writer = writerWith(async (batch) => {
      if (batch.includes(3)) throw refusal;
      written.push(...batch);
    });
    const total = WRITE_SLICE + 5;
    for (let i = 0; i < total; i++) writer.push(i);
    await writer.flush();
    expect(written).toEqual(Array.from({ length: total }, (_, i) => i).filter((i) => i !== 3));
    expect(writer.pending).toBe(0);
    await writer.close();
  });

  it.each([
    ['SQLite read-only', dbError('attempt to write a readonly database', 'SQLITE_READONLY')],
    ['SQLite disk full', dbError('database or disk is full', 'SQLITE_FULL')],
    ['PostgreSQL read-only standby', dbError('cannot execute INSERT in a read-only transaction', '25006')],
    ['PostgreSQL statement timeout', dbError('canceling statement due to statement timeout', '57014')],
  ])('keeps everything while the database answers but takes no writes (%s)', async (_name, failure) => {
    let failing = true;
    const written: number[] = [];
    const writer = writerWith(async (batch) => {
      if (failing) throw failure;
      written.push(...batch);
    });
    const total = WRITE_SLICE + 5;
    for (let i = 0; i < total; i++) writer.push(i);
    await writer.flush();
    expect(written).toEqual([]);
    expect(writer.pending).toBe(total);
    failing = false;
    await writer.flush();
    expect(written).toEqual(Array.from({ length: total }, (_, i) => i));
    await writer.close();
  });

  it('stops writing row by row when the database fails meanwhile, and keeps the rest of the slice in order', async () => {
    let failing = false;
    const written: number[] = [];
    const writer = writerWith(async (batch) => {
      if (failing) throw dbError('database or disk is full', 'SQLITE_FULL');
      if (batch.includes(3)) throw dbError('NOT NULL constraint failed', 'SQLITE_CONSTRAINT_NOTNULL');
      written.push(...batch);
      if (batch.length === 1 && batch[0] === 5) failing = true; // the disk fills up right after item 5
    });
    for (let i = 0; i < 10; i++) writer.push(i);
    await writer.flush();
    expect(written).toEqual([0, 1, 2, 4, 5]);
    writer.push(10);
    expect(writer.pending).toBe(5);
    failing = false;
    await writer.flush();
    expect(written).toEqual([0, 1, 2, 4, 5, 6, 7, 8, 9, 10]);
    await writer.close();
  });

  it('reports events dropped when the buffer is full, and events pushed after close, instead of losing them silently', async () => {
    const lines: string[] = [];
    const log = pino({ level: 'error' }, { write: (line: string) => void lines.push(line) });
    let down = true;
    const writer = writerWith(async () => {
      if (down) throw dbError('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED');
    }, log);
    for (let i = 0; i < 100_003; i++) writer.push(i);
    await writer.flush(); // the first slice's failed write puts it back: three items too many
    expect(writer.pending).toBe(100_000);
    // Dropped items are counted and reported together (each flush), not one log line each.
    for (let i = 0; i < 10; i++) writer.push(-2);
    await writer.flush();
    const drops = lines.filter((line) => line.includes('oldest events are dropped'));
    expect(drops.map((line) => JSON.parse(line).dropped)).toEqual([13]);
    down = false;
    await writer.close();
    expect(writer.pending).toBe(0);
    // Nothing flushes after close (a call cut at the shutdown deadline that ends later).
    writer.push(-1);
    expect(writer.pending).toBe(0);
    expect(lines.some((line) => line.includes('"item":-1') && line.includes('after shutdown'))).toBe(true);
  });
});
