import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { REPO_ROOT } from './server.js';

export interface Machine {
  date: string;
  nproc: number;
  cpuModel: string;
  node: string;
  platform: string;
  memoryGb: number;
  loadAverage: string;
}

export function machine(): Machine {
  let cpuModel = os.cpus()[0]?.model ?? 'unknown';
  try {
    const line = fs.readFileSync('/proc/cpuinfo', 'utf8').split('\n').find((l) => l.startsWith('model name'));
    if (line) cpuModel = line.split(':')[1]!.trim();
  } catch {
    // not Linux: keep os.cpus()
  }
  let nproc = os.availableParallelism();
  try {
    nproc = Number(execFileSync('nproc', { encoding: 'utf8' }).trim()) || nproc;
  } catch {
    // no nproc binary
  }
  return {
    date: new Date().toISOString(),
    nproc,
    cpuModel,
    node: process.version,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    memoryGb: Math.round(os.totalmem() / 2 ** 30),
    loadAverage: os.loadavg().map((l) => l.toFixed(2)).join(' '),
  };
}

/** Pins this process (all its threads) to the given CPUs with taskset; returns false when that is not possible. */
export function pinSelf(cpus: string): boolean {
  try {
    execFileSync('taskset', ['-a', '-p', '-c', cpus, String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export function table(header: string[], rows: (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)));
  const line = (r: string[]) => `| ${r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (i === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(cells[0]!), rule, ...cells.slice(1).map(line)].join('\n');
}

export const ms = (value: number) => (value < 10 ? value.toFixed(3) : value.toFixed(1));
export const int = (value: number) => Math.round(value).toLocaleString('en-US');

/** The commit the measured src/ comes from, and whether src/ had uncommitted changes (read-only git). */
export function sourceVersion(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim() !== '';
    return `src at ${head}${dirty ? ' with uncommitted changes' : ''}`;
  } catch {
    return 'src version unknown (no git)';
  }
}
