/**
 * The Portkey OSS gateway (`@portkey-ai/gateway` 1.15.2) as a comparison target. It lives in bench/portkey/ with its
 * own package.json and lock file (never a Waygate dependency) and is installed on demand with
 * `npm ci --prefix bench/portkey`. `@hono/node-server` is overridden to 1.14.1 there: with the version the gateway
 * resolves by itself it answers 500 to streams and embeddings.
 *
 * Started as `node build/start-server.js --port=<port> --headless` (the package's bin). Requests are routed to an
 * OpenAI-compatible upstream with `x-portkey-provider: openai` and `x-portkey-custom-host: http://127.0.0.1:PORT/v1`
 * (127.0.0.1 is in its default TRUSTED_CUSTOM_HOSTS).
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT, cpuSecondsOf, freePort, terminate } from './server.js';
import { UPSTREAM_API_KEY } from './upstream.js';

export const PORTKEY_DIR = path.join(REPO_ROOT, 'bench', 'portkey');
const ENTRY = path.join(PORTKEY_DIR, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');

/** Installs bench/portkey (npm ci) when its node_modules is missing. Returns null when ready, or why it is not. */
export function ensurePortkey(log: (line: string) => void): string | null {
  if (fs.existsSync(ENTRY)) return null;
  log('installing the Portkey gateway: npm ci --prefix bench/portkey');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const result = spawnSync(npm, ['ci', '--prefix', PORTKEY_DIR, '--no-audit', '--no-fund'], { cwd: REPO_ROOT, encoding: 'utf8', timeout: 300_000 });
  if (result.status !== 0 || !fs.existsSync(ENTRY)) {
    const output = `${result.stdout ?? ''}${result.stderr ?? ''}`.trim().split('\n').slice(-3).join(' / ');
    return `npm ci --prefix bench/portkey failed (${result.error?.message ?? `exit ${result.status}`}): ${output}`;
  }
  return null;
}

export interface PortkeyServer {
  pid: number;
  host: string;
  port: number;
  baseUrl: string;
  logFile: string;
  /** Headers that route a request to the given OpenAI-compatible upstream base URL (…/v1). */
  headersFor(upstreamBaseUrl: string): Record<string, string>;
  cpuSeconds(): number;
  stop(): Promise<void>;
}

function getText(url: string): Promise<string | null> {
  return new Promise((resolve) => {
    const req = http.get(url, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (part: string) => (body += part));
      res.on('end', () => resolve(res.statusCode === 200 ? body : null));
    });
    req.on('error', () => resolve(null));
    req.setTimeout(1000, () => req.destroy());
  });
}

export async function startPortkey(options: { cpus: string | null; nodeArgs?: string[] }): Promise<PortkeyServer> {
  const port = await freePort();
  const host = '127.0.0.1';
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portkey-bench-'));
  const logFile = path.join(logDir, 'portkey.log');
  const args = [...(options.nodeArgs ?? []), ENTRY, `--port=${port}`, '--headless'];
  const [command, argv] = options.cpus ? ['taskset', ['-c', options.cpus, process.execPath, ...args]] : [process.execPath, args];
  const log = fs.openSync(logFile, 'a');
  const child = spawn(command, argv, { cwd: PORTKEY_DIR, env: { PATH: process.env.PATH, HOME: process.env.HOME }, stdio: ['ignore', log, log] });
  fs.closeSync(log);
  if (child.pid === undefined) throw new Error('could not start the Portkey gateway');
  const pid = child.pid;
  const baseUrl = `http://${host}:${port}`;
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await terminate(child, 5_000);
    fs.rmSync(logDir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30_000;
  while ((await getText(`${baseUrl}/`)) === null) {
    if (child.exitCode !== null || Date.now() > deadline) {
      const output = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').slice(-2000) : '';
      await stop();
      throw new Error(`the Portkey gateway did not start (exit code ${child.exitCode}):\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    pid,
    host,
    port,
    baseUrl,
    logFile,
    headersFor: (upstreamBaseUrl) => ({
      'x-portkey-provider': 'openai',
      'x-portkey-custom-host': upstreamBaseUrl,
      authorization: `Bearer ${UPSTREAM_API_KEY}`,
    }),
    cpuSeconds: () => cpuSecondsOf(pid),
    stop,
  };
}
