/**
 * Summarises a V8 .cpuprofile (from `node --cpu-prof`, e.g. `bench/inference.ts --cpu-prof <dir>`): the functions
 * with the most self time and the most inclusive time, and self time per file.
 *
 *   node --import tsx bench/lib/cpuprofile.ts <file.cpuprofile> [--top 25] [--filter src/]
 *
 * `--filter` keeps only functions whose URL contains the text in the inclusive list (self time is always shown for
 * everything, so that node internals and dependencies are visible too).
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { REPO_ROOT } from './server.js';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileRow {
  name: string;
  ms: number;
  share: number;
}

export interface ProfileSummary {
  totalMs: number;
  self: ProfileRow[];
  inclusive: ProfileRow[];
  files: ProfileRow[];
}

function shortUrl(url: string): string {
  if (!url) return '(native)';
  const file = url.startsWith('file://') ? new URL(url).pathname : url;
  const rel = file.startsWith(REPO_ROOT) ? path.relative(REPO_ROOT, file) : file;
  return rel.replace(/^.*node_modules\//, 'node_modules/');
}

const keyOf = (f: CallFrame) => `${f.functionName || '(anonymous)'} ${shortUrl(f.url)}:${f.lineNumber + 1}`;

export function summarise(profile: Profile, top: number, filter?: string): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<string, number>();
  const files = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = (profile.timeDeltas[i + 1] ?? profile.timeDeltas[i] ?? 0) / 1000;
    const node = byId.get(profile.samples[i]!);
    if (!node) continue;
    total += dt;
    const k = keyOf(node.callFrame);
    self.set(k, (self.get(k) ?? 0) + dt);
    const file = shortUrl(node.callFrame.url);
    files.set(file, (files.get(file) ?? 0) + dt);
    const seen = new Set<string>();
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const f = byId.get(id)!.callFrame;
      if (filter && !f.url.includes(filter)) continue;
      const key = keyOf(f);
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + dt);
    }
  }
  const rows = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, v]) => ({ name, ms: v, share: v / total }));
  return { totalMs: total, self: rows(self), inclusive: rows(inclusive), files: rows(files) };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '25' }, filter: { type: 'string' } } });
  const file = positionals[0];
  if (!file) {
    process.stderr.write('usage: node --import tsx bench/lib/cpuprofile.ts <file.cpuprofile> [--top 25] [--filter src/]\n');
    process.exit(2);
  }
  const summary = summarise(JSON.parse(fs.readFileSync(file, 'utf8')) as Profile, Number(values.top), values.filter);
  const print = (title: string, rows: ProfileRow[]) => {
    process.stdout.write(`\n${title}\n`);
    for (const r of rows) process.stdout.write(`${(r.share * 100).toFixed(1).padStart(5)}%  ${r.ms.toFixed(0).padStart(7)} ms  ${r.name}\n`);
  };
  process.stdout.write(`${file}: ${(summary.totalMs / 1000).toFixed(1)} s sampled\n`);
  print('self time by function', summary.self);
  print('self time by file', summary.files);
  print(`inclusive time by function${values.filter ? ` (URL contains ${values.filter})` : ''}`, summary.inclusive);
}
