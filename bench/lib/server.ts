import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Cleanups } from './options.js';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface ServerOptions {
  /** `tsx` runs src/main.ts through the tsx loader; `dist` runs the built dist/main.js (run `npm run build` first). */
  entry: 'tsx' | 'dist';
  /** DATABASE_URL; a SQLite file in the temp data directory when unset. */
  databaseUrl?: string;
  logLevel: string;
  /** CPU list for `taskset -c`, or null to run unpinned. */
  cpus: string | null;
  /** Extra environment variables for the server (applied last). */
  env?: Record<string, string>;
  /** Extra node flags placed before the entry, e.g. `--cpu-prof`. */
  nodeArgs?: string[];
  /** A JavaScript main file to run with plain node instead of `entry` (e.g. from transpileSources()). */
  mainFile?: string;
  /** A command and its arguments that node runs under, in the same process (e.g. valgrind); not with `cpus`. */
  launcher?: string[];
  /** How long start-up may take before the server counts as failed (default 30 s). */
  readyTimeoutMs?: number;
}

export interface BenchServer {
  pid: number;
  baseUrl: string;
  host: string;
  port: number;
  /** The owner token of project default (WAYGATE_BOOTSTRAP_TOKEN). */
  token: string;
  /** WAYGATE_ADMIN_EMAIL / WAYGATE_ADMIN_PASSWORD, for POST /api/auth/login. */
  adminEmail: string;
  adminPassword: string;
  dataDir: string;
  logFile: string;
  /** CPU time (user + system, all threads) the server process has used, in seconds; NaN without /proc. */
  cpuSeconds(): number;
  /** Lines the server logged at level error (50) or worse so far. */
  errorLines(): string[];
  stop(): Promise<void>;
}

export function hasTaskset(): boolean {
  return ['/usr/bin/taskset', '/bin/taskset', '/usr/local/bin/taskset'].some((p) => fs.existsSync(p));
}

/** A free loopback port (the OS picks one, we release it and hand it to the server). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

function getStatus(url: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get(url, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.setTimeout(1000, () => req.destroy());
  });
}

function waitForExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** Stops a child process by its PID: SIGTERM, then SIGKILL when it has not exited after `graceMs`. */
export async function terminate(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  process.kill(child.pid, 'SIGTERM');
  if (!(await waitForExit(child, graceMs))) {
    process.kill(child.pid, 'SIGKILL');
    await waitForExit(child, 5_000);
  }
}

/** Clock ticks per second for /proc/<pid>/stat; 100 on every mainstream Linux build. */
const CLOCK_TICKS = 100;

export function cpuSecondsOf(pid: number): number {
  return SCHEDULER_TIMES ? scheduledSecondsOf(pid) : tickSecondsOf(pid);
}

/** Whether this kernel shows the scheduler's per-thread run time (CONFIG_SCHED_DEBUG); decided once per run. */
export const SCHEDULER_TIMES = fs.existsSync(`/proc/${process.pid}/task/${process.pid}/sched`);

/**
 * CPU time from the scheduler (`se.sum_exec_runtime` in ms, to the nanosecond, summed over the process's live
 * threads): fine enough for a few hundred sparse requests. A thread that ends between the listing and the read is
 * left out, as are threads that ended before (their time is gone from /proc).
 */
function scheduledSecondsOf(pid: number): number {
  let ms = 0;
  let tids: string[];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return Number.NaN;
  }
  for (const tid of tids) {
    let text: string;
    try {
      text = fs.readFileSync(`/proc/${pid}/task/${tid}/sched`, 'utf8');
    } catch {
      continue;
    }
    const match = /se\.sum_exec_runtime\s*:\s*([\d.]+)/.exec(text);
    if (match) ms += Number(match[1]);
  }
  return ms / 1000;
}

/** CPU time in clock ticks (10 ms) from /proc/<pid>/stat. */
function tickSecondsOf(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces) start at field 3; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return Number.NaN;
  }
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

/**
 * src/ transpiled file by file with esbuild (no type check, no bundling) into .test-build/bench-<pid>/ (git-ignored,
 * inside the repository so that node_modules resolves): what `node dist/main.js` runs, without tsx's loader thread in
 * the measured process and without depending on a stale dist/. `srcDir`: another checkout's src/ (its output still
 * lands in this repository, whose node_modules it then uses); `name` tells two builds of one process apart. Call
 * remove() when done.
 */
export async function transpileSources(options: { srcDir?: string; name?: string } = {}): Promise<{ main: string; remove(): void }> {
  const { build } = await import('esbuild');
  const srcDir = options.srcDir ?? path.join(REPO_ROOT, 'src');
  const outdir = path.join(REPO_ROOT, '.test-build', `bench-${process.pid}${options.name ? `-${options.name}` : ''}`);
  await build({
    entryPoints: sourceFiles(srcDir),
    outdir,
    outbase: srcDir,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    bundle: false,
    sourcemap: false,
    logLevel: 'error',
  });
  return { main: path.join(outdir, 'main.js'), remove: () => fs.rmSync(outdir, { recursive: true, force: true }) };
}

/** A commit's src/ from a temporary git worktree, transpiled as transpileSources() does; remove() deletes both. */
async function transpileRef(ref: string): Promise<{ label: string; main: string; remove(): void }> {
  const worktree = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-against-'));
  execFileSync('git', ['worktree', 'add', '--detach', worktree, ref], { cwd: REPO_ROOT, stdio: 'ignore' });
  const removeWorktree = () => execFileSync('git', ['worktree', 'remove', '--force', worktree], { cwd: REPO_ROOT, stdio: 'ignore' });
  try {
    const built = await transpileSources({ srcDir: path.join(worktree, 'src'), name: 'against' });
    return {
      label: ref,
      main: built.main,
      remove: () => {
        built.remove();
        removeWorktree();
      },
    };
  } catch (err) {
    removeWorktree();
    throw err;
  }
}

/**
 * What an A/B tool compares: this checkout's src/ and, with `ref`, that commit's, each transpiled (the main files)
 * and removed by `cleanups`.
 */
export async function buildsToCompare(ref: string | undefined, cleanups: Cleanups): Promise<{ current: string; against: { label: string; main: string } | null }> {
  const current = await transpileSources({ name: 'current' });
  cleanups.add(async () => current.remove());
  if (!ref) return { current: current.main, against: null };
  const against = await transpileRef(ref);
  cleanups.add(async () => against.remove());
  return { current: current.main, against };
}

/** A field of /proc/<pid>/status in MB (VmRSS: resident now, VmHWM: peak resident); NaN without /proc. */
export function memoryMbOf(pid: number, field: 'VmRSS' | 'VmHWM' = 'VmRSS'): number {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) / 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/**
 * The environment and node flags of `npm start` (the last command of package.json's start script), so that the
 * benchmarks measure the process users run: e.g. `MALLOC_ARENA_MAX=2 node --max-semi-space-size=2 dist/main.js`.
 */
export function startScriptRuntime(): { env: Record<string, string>; nodeArgs: string[] } {
  const pkg = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } };
  const words = pkg.scripts.start.split('&&').at(-1)!.trim().split(/\s+/);
  const node = words.indexOf('node');
  if (node < 0) throw new Error(`package.json start script does not end with a node command: ${pkg.scripts.start}`);
  const env = Object.fromEntries(words.slice(0, node).map((word) => [word.slice(0, word.indexOf('=')), word.slice(word.indexOf('=') + 1)]));
  return { env, nodeArgs: words.slice(node + 1).filter((word) => word.startsWith('--')) };
}

/**
 * One admin password and one secret key for every server this benchmark process starts: on a shared PostgreSQL
 * database a later server must log in as the admin the first one created, and decrypt the provider keys it stored
 * (without WAYGATE_SECRET_KEY each server would make its own key file in its own temp directory).
 */
const RUN_ADMIN_PASSWORD = randomBytes(18).toString('base64url');
const RUN_SECRET_KEY = randomBytes(32).toString('base64url');

/** Starts Waygate as a child process on a loopback port with its own temp data directory; resolves once ready. */
export async function startServer(options: ServerOptions): Promise<BenchServer> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-bench-'));
  const logFile = path.join(dataDir, 'server.log');
  const port = await freePort();
  const host = '127.0.0.1';
  const token = `wgt_${randomBytes(32).toString('base64url')}`;
  const adminEmail = 'bench@example.com';
  const adminPassword = RUN_ADMIN_PASSWORD;
  const runtime = startScriptRuntime();
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    HOST: host,
    PORT: String(port),
    WAYGATE_DATA_DIR: dataDir,
    DATABASE_URL: options.databaseUrl ?? `sqlite:${path.join(dataDir, 'waygate.db')}`,
    WAYGATE_BOOTSTRAP_TOKEN: token,
    WAYGATE_ADMIN_EMAIL: adminEmail,
    WAYGATE_ADMIN_PASSWORD: adminPassword,
    WAYGATE_SECRET_KEY: RUN_SECRET_KEY,
    LOG_LEVEL: options.logLevel,
    ...runtime.env,
    ...options.env,
  };
  const entryArgs = options.mainFile
    ? [options.mainFile]
    : options.entry === 'dist'
      ? [path.join(REPO_ROOT, 'dist', 'main.js')]
      : ['--import', 'tsx', path.join(REPO_ROOT, 'src', 'main.ts')];
  const nodeArgs = [...runtime.nodeArgs, ...(options.nodeArgs ?? []), ...entryArgs];
  const prefix = options.launcher ?? (options.cpus ? ['taskset', '-c', options.cpus] : []);
  const [command, args] = prefix.length > 0 ? [prefix[0]!, [...prefix.slice(1), process.execPath, ...nodeArgs]] : [process.execPath, nodeArgs];
  const log = fs.openSync(logFile, 'a');
  // taskset execs node (valgrind runs it in its own process), so the child's PID is the server's PID.
  const child = spawn(command as string, args as string[], { cwd: REPO_ROOT, env, stdio: ['ignore', log, log] });
  fs.closeSync(log);
  if (child.pid === undefined) throw new Error('could not start the Waygate server');
  const pid = child.pid;
  const baseUrl = `http://${host}:${port}`;

  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await terminate(child, 10_000);
    fs.rmSync(dataDir, { recursive: true, force: true });
  };

  const deadline = Date.now() + (options.readyTimeoutMs ?? 30_000);
  while ((await getStatus(`${baseUrl}/api/health/ready`)) !== 200) {
    if (child.exitCode !== null || Date.now() > deadline) {
      const output = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').slice(-2000) : '';
      await stop();
      throw new Error(`Waygate did not become ready (exit code ${child.exitCode}):\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  return {
    pid,
    baseUrl,
    host,
    port,
    token,
    adminEmail,
    adminPassword,
    dataDir,
    logFile,
    cpuSeconds: () => cpuSecondsOf(pid),
    errorLines: () =>
      (fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '')
        .split('\n')
        .filter((line) => /"level":(50|60)/.test(line)),
    stop,
  };
}

/** Waits (up to 5 s) until the given processes use less than 5 % of a core, so one target's after-work does not land in the next one's run. */
export async function settle(pids: number[]): Promise<void> {
  const cpu = () => pids.reduce((sum, pid) => sum + (cpuSecondsOf(pid) || 0), 0);
  for (let i = 0; i < 20; i++) {
    const before = cpu();
    await sleep(250);
    if (cpu() - before < 0.0125) return;
  }
}

/** Busy CPU seconds of the whole machine (all CPUs, from /proc/stat), NaN without /proc. */
function machineBusySeconds(): number {
  try {
    const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal: busy = all but idle and iowait.
    const busy = fields.slice(0, 8).reduce((sum, v, i) => (i === 3 || i === 4 ? sum : sum + v), 0);
    return busy / 100;
  } catch {
    return Number.NaN;
  }
}

/**
 * Measures how much CPU processes other than the benchmark's own used meanwhile (the VM may be shared): machine busy
 * time minus this process, the upstream and the gateways, in cores.
 */
export function foreignLoad(ownPids: () => number[]): () => number {
  const own = () => ownPids().reduce((sum, pid) => sum + (cpuSecondsOf(pid) || 0), 0);
  const busy0 = machineBusySeconds();
  const own0 = own();
  const t0 = performance.now();
  return () => (machineBusySeconds() - busy0 - (own() - own0)) / ((performance.now() - t0) / 1000);
}
