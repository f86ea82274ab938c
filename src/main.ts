import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { createContext, type Context } from './context.js';
import { startLoopPoller, type LoopPoller } from './platform/loop-poller.js';

export interface RunningServer {
  app: FastifyInstance;
  ctx: Context;
  url: string;
  /** Keeps the event loop polling after traffic (WAYGATE_BUSY_POLL_US); null when turned off. */
  poller: LoopPoller | null;
  /** Stop accepting, finish in-flight requests, flush buffers, close the database. Idempotent. */
  stop(): Promise<void>;
}

/** How long shutdown waits for in-flight requests before cutting the remaining connections. */
const SHUTDOWN_GRACE_MS = 10_000;

/** Deliberately stdout, not the log: the one-time password must not end up in log storage. */
function say(line: string): void {
  process.stdout.write(line + '\n');
}

/**
 * Connections the kernel queues for accept(). Node's default of 511 overflows when a thousand clients connect at once
 * (streams opened together): the kernel drops the extra SYNs and the client retries after 1 s, then 3 s. Linux caps
 * this at net.core.somaxconn (4096 since 5.4).
 */
const LISTEN_BACKLOG = 4096;

/**
 * config -> database -> app -> listen; readiness turns ok only after all of it. A generated admin password is
 * announced as soon as it is committed, so a start that fails later (port taken) does not lose it.
 */
export async function startServer(config: Config, announce: (line: string) => void = say): Promise<RunningServer> {
  const ctx = await createContext(config);
  const { generatedAdminPassword, adminEmail } = ctx.bootstrap;
  if (generatedAdminPassword) announce(`Admin ${adminEmail} password (generated, shown only this once): ${generatedAdminPassword}`);
  const app = await buildApp(ctx);
  await ctx.startWorkers();
  const address = await app.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG });
  const { poller, stop: stopPoller } = startLoopPoller(config.busyPollUs);
  ctx.health.markServing();
  let stopping: Promise<void> | null = null;
  return {
    app,
    ctx,
    url: address,
    poller,
    stop: () => {
      stopping ??= (async () => {
        ctx.health.markStopping();
        // Readiness already answers 503; give the load balancer time to notice before the listener closes.
        if (config.shutdownDelaySeconds > 0) await sleep(config.shutdownDelaySeconds * 1000);
        const deadline = setTimeout(() => app.server.closeAllConnections(), SHUTDOWN_GRACE_MS);
        deadline.unref();
        try {
          await app.close();
        } finally {
          clearTimeout(deadline);
          stopPoller();
        }
      })();
      return stopping;
    },
  };
}

function printBanner(server: RunningServer): void {
  const { bootstrap, config } = server.ctx;
  const lines = [
    `Waygate listening on ${server.url} (database: ${server.ctx.database.dialect}, data: ${config.dataDir})`,
    `  Client API:   ${server.url}/api/client/v1   (Authorization: Bearer <API token>)`,
    `  Log in:       POST ${server.url}/api/auth/login {"email":"${bootstrap.adminEmail}","password":...}`,
  ];
  if (bootstrap.bootstrapTokenCreated) lines.push('  Bootstrap API token from WAYGATE_BOOTSTRAP_TOKEN created for project "default".');
  say(lines.join('\n'));
}

/** `waygate serve` and `npm start`: runs until SIGTERM or SIGINT, then shuts down gracefully. */
export async function serve(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(err.message + '\n');
      process.exit(2);
    }
    throw err;
  }
  const server = await startServer(config);
  printBanner(server);
  const shutdown = (signal: string) => {
    server.ctx.log.info({ signal }, 'shutting down');
    server.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        server.ctx.log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  serve().catch((err: unknown) => {
    process.stderr.write(`Waygate failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
