import { spawn } from 'node:child_process';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { REPO_ROOT, terminate } from './server.js';

/** A helper server of the benchmark (fake upstream, bare proxy) running as its own process. */
export interface ChildServer {
  pid: number;
  port: number;
  stop(): Promise<void>;
}

/**
 * Runs `node --import tsx <script> ...args` (through `taskset -c <cpus>` when cpus is set; taskset execs node, so the
 * PID is node's) and resolves with the port once the script prints `listening <port>` on stdout.
 */
export async function startChild(label: string, script: string, args: string[], cpus: string | null): Promise<ChildServer> {
  const nodeArgs = ['--import', 'tsx', script, ...args];
  const [command, argv] = cpus ? ['taskset', ['-c', cpus, process.execPath, ...nodeArgs]] : [process.execPath, nodeArgs];
  const child = spawn(command, argv, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'], env: { PATH: process.env.PATH, HOME: process.env.HOME } });
  if (child.pid === undefined) throw new Error(`could not start the ${label}`);
  const pid = child.pid;
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the ${label} did not start within 30 s`));
    }, 30_000);
    child.stdout.on('data', (part: Buffer) => {
      out += part.toString('utf8');
      const match = /listening (\d+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the ${label} exited with ${code}: ${out.slice(-500)}`));
    });
  });
  child.stdout.resume();
  let stopped = false;
  return {
    pid,
    port,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await terminate(child, 5_000);
    },
  };
}

/**
 * The child side of startChild: listens on loopback, prints `listening <port>` for the parent, and closes every
 * connection on SIGTERM or SIGINT.
 */
export function serveChild(server: http.Server, port: number): void {
  server.listen({ host: '127.0.0.1', port, backlog: 4096 }, () => {
    process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
  });
  const shutdown = () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}
