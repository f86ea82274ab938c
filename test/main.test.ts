import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { startServer, type RunningServer } from '../src/main.js';

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
    const res = await request(`${running.url}/api/health/live`);
    expect(res.statusCode).toBe(200);
    await res.body.text();
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
    const res = await request(`${running.url}/api/health/live`);
    expect(res.statusCode).toBe(200);
    await res.body.text();
  });
});
