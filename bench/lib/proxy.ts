/**
 * A bare pass-through proxy, the control target of the inference benchmark: node:http in front, an undici 7 Agent
 * with keep-alive behind (the same client library Waygate uses), no parsing, no auth, no metering. It shows what one
 * extra Node.js hop costs on this machine and this pinning, so that the rest of Waygate's added latency is its own.
 *
 *   node --import tsx bench/lib/proxy.ts --port 0 --upstream http://127.0.0.1:PORT
 *
 * Forwards `/v1/...` requests to the upstream origin with the same method, path and body; answers (streams too)
 * are piped back chunk by chunk. Prints `listening <port>` once it listens.
 */
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Agent } from 'undici';
import { serveChild, startChild, type ChildServer } from './child.js';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'host']);

export function createProxy(upstreamOrigin: string): http.Server {
  const agent = new Agent({ keepAliveTimeout: 30_000, connections: null });
  const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (part: Buffer) => parts.push(part));
    req.on('end', () => {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) if (typeof value === 'string' && !HOP_BY_HOP.has(name)) headers[name] = value;
      agent
        .request({ origin: upstreamOrigin, path: req.url ?? '/', method: (req.method ?? 'GET') as 'POST', headers, body: parts.length ? Buffer.concat(parts) : null })
        .then(({ statusCode, headers: upstreamHeaders, body }) => {
          const out: Record<string, string> = {};
          for (const [name, value] of Object.entries(upstreamHeaders)) if (typeof value === 'string' && !HOP_BY_HOP.has(name)) out[name] = value;
          res.writeHead(statusCode, out);
          body.on('data', (chunk: Buffer) => res.write(chunk));
          body.on('end', () => res.end());
          body.on('error', () => res.destroy());
          res.on('close', () => body.destroy());
        })
        .catch((err: unknown) => {
          res.writeHead(502, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: err instanceof Error ? err.message : String(err) } }));
        });
    });
  });
  server.headersTimeout = 60_000;
  server.requestTimeout = 0;
  return server;
}

/** Starts the bare proxy as a child process, pinned with `taskset -c <cpus>` when cpus is set. */
export function startProxy(options: { cpus: string | null; upstreamOrigin: string }): Promise<ChildServer> {
  return startChild('bare proxy', fileURLToPath(import.meta.url), ['--port', '0', '--upstream', options.upstreamOrigin], options.cpus);
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const { values } = parseArgs({ options: { port: { type: 'string', default: '0' }, upstream: { type: 'string' } } });
  if (!values.upstream) throw new Error('--upstream http://127.0.0.1:PORT is required');
  const server = createProxy(new URL(values.upstream).origin);
  serveChild(server, Number(values.port));
}
