/**
 * Calls to a running Waygate for the benchmarks' set-up and checks (not the measured load): one JSON request, the
 * admin login, and model registration on a fake upstream.
 */
import http from 'node:http';
import type { BenchServer } from './server.js';
import { UPSTREAM_API_KEY } from './upstream.js';

export interface JsonReply {
  status: number;
  /** The parsed body, or undefined when it is not JSON. */
  body: unknown;
  text: string;
}

export interface RequestOptions {
  /** A keep-alive agent to reuse; a fresh connection per request when unset. */
  agent?: http.Agent;
  timeoutMs?: number;
}

/** One request with a JSON body (an object to serialise, or bytes sent as they are) and a JSON answer. */
export function requestJson(
  host: string,
  port: number,
  method: string,
  urlPath: string,
  headers: Record<string, string>,
  body?: unknown,
  options: RequestOptions = {},
): Promise<JsonReply> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body);
    const h: Record<string, string> = { ...headers };
    if (payload !== undefined) {
      h['content-type'] = 'application/json';
      h['content-length'] = String(Buffer.byteLength(payload));
    }
    const timeoutMs = options.timeoutMs ?? 30_000;
    const req = http.request({ host, port, method, path: urlPath, headers: h, agent: options.agent ?? false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (part: string) => (text += part));
      res.on('end', () => {
        let parsed: unknown = undefined;
        try {
          parsed = JSON.parse(text);
        } catch {
          // not JSON
        }
        resolve({ status: res.statusCode ?? 0, body: parsed, text });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${urlPath}: no answer in ${timeoutMs / 1000} s`)));
    req.end(payload);
  });
}

/** Logs in as the admin (POST /api/auth/login); the authorization header for the dashboard API, or why not. */
async function adminLogin(server: BenchServer): Promise<{ authorization: string } | string> {
  const login = await requestJson(server.host, server.port, 'POST', '/api/auth/login', {}, { email: server.adminEmail, password: server.adminPassword });
  const jwt = (login.body as { token?: string } | undefined)?.token;
  if (login.status !== 200 || !jwt) return `login failed: ${login.status} ${login.text.slice(0, 200)}`;
  return { authorization: `Bearer ${jwt}` };
}

export interface ModelSpec {
  /** Waygate's model key (what clients send as `model`). */
  key: string;
  /** The model name sent to the upstream. */
  upstreamModel: string;
  capabilities: string[];
}

/** The price every benchmark model gets, so that metering computes a cost. */
const BENCH_PRICING = { inputPer1M: 0.15, outputPer1M: 0.6, currency: 'USD' };

/**
 * Logs in as the admin and registers the models as `openai-compatible` on the upstream at `upstreamBaseUrl`
 * (http://127.0.0.1:PORT/v1), each with BENCH_PRICING. Returns null when done, or why it could not.
 */
export async function registerModels(server: BenchServer, upstreamBaseUrl: string, models: ModelSpec[]): Promise<string | null> {
  const auth = await adminLogin(server);
  if (typeof auth === 'string') return auth;
  const provider = { type: 'openai-compatible', baseUrl: upstreamBaseUrl, apiKey: UPSTREAM_API_KEY };
  for (const m of models) {
    const reply = await requestJson(server.host, server.port, 'POST', '/api/models', auth, { ...m, name: m.key, provider, pricing: BENCH_PRICING });
    if (reply.status === 404) return `POST /api/models answered 404: the inference routes are not there yet`;
    if (reply.status !== 201) return `POST /api/models (${m.key}) answered ${reply.status}: ${reply.text.slice(0, 300)}`;
  }
  return null;
}

/** Limits so large that a benchmark never reaches them, so that every call is admitted and settled on each counter. */
const UNREACHED_LIMITS = { budget: { maxTokens: 1e15, maxCostUsd: 1e6, period: 'day' }, rateLimit: { rpm: 1e9, tpm: 1e15 } };

/**
 * Creates a member token of the default project (where registerModels puts the models) with UNREACHED_LIMITS: calls
 * with it take the path of a token with a budget and a rate limit. Returns its id and value, or why it could not.
 */
export async function createLimitedToken(server: BenchServer): Promise<{ id: string; value: string } | string> {
  const auth = await adminLogin(server);
  if (typeof auth === 'string') return auth;
  const reply = await requestJson(server.host, server.port, 'POST', '/api/tokens', auth, { name: 'bench-limited', projectId: 'default', role: 'member', ...UNREACHED_LIMITS });
  const created = reply.body as { token?: { id?: string }; value?: string } | undefined;
  if (reply.status !== 201 || !created?.token?.id || !created.value) return `POST /api/tokens answered ${reply.status}: ${reply.text.slice(0, 300)}`;
  return { id: created.token.id, value: created.value };
}
