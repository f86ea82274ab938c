import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import http from 'node:http';
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

  it('starts no poller with WAYGATE_BUSY_POLL_US=0', async () => {
    const running = await start({ WAYGATE_BUSY_POLL_US: '0' });
    expect(running.poller).toBeNull();
    expect(await statusOf(`${running.url}/api/health/live`)).toBe(200);
  });
});
