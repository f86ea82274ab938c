import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { startServer, type RunningServer } from '../src/main.js';

function statusOf(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent: false }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      })
      .on('error', reject);
  });
}

describe('startServer', () => {
  let server: RunningServer | null = null;
  let dataDir: string | null = null;

  afterEach(async () => {
    await server?.stop();
    server = null;
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  async function start(env: Record<string, string>): Promise<RunningServer> {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'waygate-main-'));
    server = await startServer(loadConfig({ PORT: '0', WAYGATE_DATA_DIR: dataDir, WAYGATE_ADMIN_PASSWORD: 'main-test-password', LOG_LEVEL: 'silent', ...env }), () => {});
    return server;
  }

  it('polls the event loop after traffic (WAYGATE_BUSY_POLL_US) and stops polling when it stops', async () => {
    const running = await start({ WAYGATE_BUSY_POLL_US: '1000' });
    const poller = running.poller!;
    expect(poller).not.toBeNull();
    // node:http's client: undici's would start the poller through its own channel, whatever the server did.
    expect(await statusOf(`${running.url}/api/health/live`)).toBe(200);
    expect(poller.starts).toBeGreaterThanOrEqual(1);
    await running.stop();
    for (let i = 0; i < 100 && poller.isPolling; i++) await sleep(5);
    const stoppedAt = poller.starts;
    poller.activity();
    expect(poller.starts).toBe(stoppedAt);
    expect(poller.isPolling).toBe(false);
  });

  // The kernel's count of connections it dropped because a listening socket's accept queue was full (Linux only;
  // the kernel caps a backlog at net.core.somaxconn, 4096 by default since Linux 5.4).
  const listenOverflows = (): number | null => {
    if (!fs.existsSync('/proc/net/netstat')) return null;
    const [names, values] = fs.readFileSync('/proc/net/netstat', 'utf8').split('\n');
    const field = names!.split(' ').indexOf('ListenOverflows');
    return field < 0 ? null : Number(values!.split(' ')[field]);
  };
  const somaxconn = fs.existsSync('/proc/sys/net/core/somaxconn') ? Number(fs.readFileSync('/proc/sys/net/core/somaxconn', 'utf8')) : 0;

  it.runIf(listenOverflows() !== null && somaxconn >= 1_000)('queues a burst of 1,000 connections before it accepts any (listen backlog)', async () => {
    const running = await start({});
    const { port } = new URL(running.url);
    const before = listenOverflows()!;
    const sockets = Array.from({ length: 1_000 }, () => net.connect({ host: '127.0.0.1', port: Number(port) }).on('error', () => {}));
    try {
      // Each connect is issued on the next tick and its loopback handshake completes inside the syscall, all before
      // the event loop can accept one: with Node's default backlog of 511 the kernel dropped the rest.
      await new Promise((resolve) => process.nextTick(resolve));
      expect(listenOverflows()! - before).toBe(0);
      await Promise.all(sockets.map((socket) => new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject))));
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  });

  it('starts no poller with WAYGATE_BUSY_POLL_US=0', async () => {
    const running = await start({ WAYGATE_BUSY_POLL_US: '0' });
    expect(running.poller).toBeNull();
    expect(await statusOf(`${running.url}/api/health/live`)).toBe(200);
  });
});
