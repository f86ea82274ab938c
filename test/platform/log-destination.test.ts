import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LogDestination } from '../../src/platform/log-destination.js';

/** The log's destination: lines batched and written in order, everything held written at exit, never a throw. */
describe('LogDestination', () => {
  let dir: string;
  let file: string;
  let fd: number;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-log-'));
    file = path.join(dir, 'out.log');
    fd = fs.openSync(file, 'a');
  });
  afterEach(() => {
    try {
      fs.closeSync(fd);
    } catch {
      // closed by the test
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const flushed = (destination: LogDestination) => new Promise<void>((resolve) => destination.flush(resolve));
  const lineOf = (i: number) => `{"n":${i},"msg":"line ${i} é"}\n`;

  it('holds lines until a batch is full, then writes them all in order, none twice', async () => {
    const destination = new LogDestination(fd, 1024, 60_000);
    destination.write(lineOf(0));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(fs.readFileSync(file, 'utf8')).toBe('');
    const lines = Array.from({ length: 500 }, (_, i) => lineOf(i + 1));
    for (const line of lines) destination.write(line);
    await flushed(destination);
    expect(fs.readFileSync(file, 'utf8')).toBe(lineOf(0) + lines.join(''));
    destination.flushSync();
  });

  it('writes what is held after its flush interval', async () => {
    const destination = new LogDestination(fd, 1024 * 1024, 20);
    destination.write(lineOf(1));
    for (let i = 0; i < 100 && fs.readFileSync(file, 'utf8') === ''; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(fs.readFileSync(file, 'utf8')).toBe(lineOf(1));
    destination.flushSync();
  });

  it('calls a flush back only once the lines held at its call are written, even behind a write under way', async () => {
    const destination = new LogDestination(fd, 64, 60_000);
    destination.write(lineOf(1).repeat(4)); // a batch: its write starts now
    destination.write(lineOf(2)); // held behind it
    await flushed(destination);
    expect(fs.readFileSync(file, 'utf8')).toBe(lineOf(1).repeat(4) + lineOf(2));
    await flushed(destination); // nothing held: at once
    destination.flushSync();
  });

  it('drops lines without throwing once the descriptor cannot be written, and still calls flushes back', async () => {
    const destination = new LogDestination(fd, 16, 60_000);
    fs.closeSync(fd);
    expect(destination.write(lineOf(1))).toBe(true);
    await flushed(destination);
    expect(destination.write(lineOf(2))).toBe(true);
    await flushed(destination);
    destination.flushSync();
  });

  it('writes everything held when the process exits, even right after the last line', () => {
    const script = `
      import { LogDestination } from ${JSON.stringify(path.resolve('src/platform/log-destination.ts'))};
      import fs from 'node:fs';
      const destination = new LogDestination(fs.openSync(${JSON.stringify(file)}, 'a'), 1024, 60_000);
      for (let i = 0; i < 300; i++) destination.write(JSON.stringify({ n: i }) + '\\n');
      process.exit(0);
    `;
    execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: 'ignore', timeout: 30_000 });
    const numbers = fs.readFileSync(file, 'utf8').trim().split('\n').map((line) => (JSON.parse(line) as { n: number }).n);
    // A batch under way at exit may be written twice (rather than lost): every line is there, in order.
    expect([...new Set(numbers)]).toEqual(Array.from({ length: 300 }, (_, i) => i));
  });
});
