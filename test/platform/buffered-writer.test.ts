import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { BufferedWriter, WRITE_SLICE } from '../../src/platform/buffered-writer.js';

const silent = pino({ level: 'silent' });

function writerWith(write: (batch: number[]) => Promise<void>, ping: () => Promise<unknown> = async () => undefined) {
  return new BufferedWriter<number>({ name: 'test', write, ping, describe: (item) => ({ item }), log: silent });
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
    const writer = writerWith(
      async (batch) => {
        if (down) throw new Error('connection refused');
        written.push(...batch);
        if (written.length === WRITE_SLICE) down = true; // the database goes away after the first slice
      },
      async () => {
        if (down) throw new Error('connection refused');
      },
    );
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
    const refuse = async () => {
      if (Date.now() < downUntil) throw new Error('connection refused');
    };
    const writer = writerWith(async (batch) => {
      await refuse();
      written.push(...batch);
    }, refuse);
    for (let i = 0; i < 10; i++) writer.push(i);
    await writer.close();
    expect(written).toEqual(Array.from({ length: 10 }, (_, i) => i));
    expect(writer.pending).toBe(0);
  });

  it('drops only an item the database refuses; the rest of its slice and later slices are written', async () => {
    const written: number[] = [];
    const writer = writerWith(async (batch) => {
      if (batch.includes(3)) throw new Error('value too long');
      written.push(...batch);
    });
    const total = WRITE_SLICE + 5;
    for (let i = 0; i < total; i++) writer.push(i);
    await writer.flush();
    expect(written).toEqual(Array.from({ length: total }, (_, i) => i).filter((i) => i !== 3));
    expect(writer.pending).toBe(0);
    await writer.close();
  });
});
