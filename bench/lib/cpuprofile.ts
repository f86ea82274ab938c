/**
 * Summarises a V8 .cpuprofile (from `node --cpu-prof`, e.g. `bench/inference.ts --cpu-prof <dir>`): the functions
 * with the most self time and the most inclusive time, and self time per file.
 *
 *   node --import tsx bench/lib/cpuprofile.ts <file.cpuprofile> [--top 25] [--filter src/] [--timeline] [--from 24.2 --to 25.8]
 *
 * `--filter` keeps only functions whose URL contains the text in the inclusive list (self time is always shown for
 * everything, so that node internals and dependencies are visible too). `--timeline` prints the busy share (samples
 * not in `(idle)`) of each half second, to find a phase of a run (a burst of streams, say); `--from` and `--to`, in
 * seconds since the profile began, then summarise that phase alone.
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

/** Each sample's time in seconds since the profile began. */
function sampleSeconds(profile: Profile): number[] {
  let t = 0;
  return profile.timeDeltas.map((dt) => (t += dt) / 1e6);
}

/** The share of samples outside `(idle)` in each step of `stepSeconds`. */
export function timeline(profile: Profile, stepSeconds: number): { from: number; busy: number }[] {
  const idle = new Set(profile.nodes.filter((n) => n.callFrame.functionName === '(idle)').map((n) => n.id));
  const steps: { samples: number; busy: number }[] = [];
  sampleSeconds(profile).forEach((at, i) => {
    const step = (steps[Math.floor(at / stepSeconds)] ??= { samples: 0, busy: 0 });
    step.samples++;
    if (!idle.has(profile.samples[i]!)) step.busy++;
  });
  return [...steps.entries()].flatMap(([i, s]) => (s ? [{ from: i * stepSeconds, busy: s.busy / s.samples }] : []));
}

/** The profile with only the samples taken between `from` and `to` seconds after it began. */
export function slice(profile: Profile, from: number, to: number): Profile {
  const at = sampleSeconds(profile);
  const keep = at.flatMap((t, i) => (t >= from && t < to ? [i] : []));
  return { ...profile, samples: keep.map((i) => profile.samples[i]!), timeDeltas: keep.map((i) => profile.timeDeltas[i]!) };
}

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
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { top: { type: 'string', default: '25' }, filter: { type: 'string' }, timeline: { type: 'boolean', default: false }, from: { type: 'string' }, to: { type: 'string' } },
  });
  const file = positionals[0];
  if (!file) {
    process.stderr.write('usage: node --import tsx bench/lib/cpuprofile.ts <file.cpuprofile> [--top 25] [--filter src/] [--timeline] [--from S --to S]\n');
    process.exit(2);
  }
  let profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
  if (values.timeline) {
    process.stdout.write('busy share per half second (seconds since the profile began)\n');
    for (const step of timeline(profile, 0.5)) process.stdout.write(`${step.from.toFixed(1).padStart(7)} s  ${(step.busy * 100).toFixed(0).padStart(3)}%\n`);
  }
  if (values.from !== undefined || values.to !== undefined) profile = slice(profile, Number(values.from ?? 0), Number(values.to ?? Infinity));
  const summary = summarise(profile, Number(values.top), values.filter);
  const print = (title: string, rows: ProfileRow[]) => {
    process.stdout.write(`\n${title}\n`);
    for (const r of rows) process.stdout.write(`${(r.share * 100).toFixed(1).padStart(5)}%  ${r.ms.toFixed(0).padStart(7)} ms  ${r.name}\n`);
  };
  process.stdout.write(`${file}: ${(summary.totalMs / 1000).toFixed(1)} s sampled\n`);
  print('self time by function', summary.self);
  print('self time by file', summary.files);
  print(`inclusive time by function${values.filter ? ` (URL contains ${values.filter})` : ''}`, summary.inclusive);
}
