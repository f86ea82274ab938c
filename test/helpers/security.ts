import fs from 'node:fs';
import path from 'node:path';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { SignJWT, UnsecuredJWT } from 'jose';
import { expect, it } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { call, createToken, type TestApp } from './app.js';
import { registerModel } from './models.js';

/**
 * The common security cases, run on every route that needs a credential.
 * A route is named as in the OpenAPI document (`DELETE /api/tokens/{id}`) so that a test can check the inventory
 * below against what the app really registers: a new route that is not listed here fails that check.
 */
export interface RouteSpec {
  operation: string;
  /** The status a valid, sufficiently privileged credential gets (positive control). */
  okStatus: number;
  /** Builds a fresh request (unique names and emails, so it can be sent many times). */
  request: (t: TestApp) => Promise<InjectOptions> | InjectOptions;
}

const unique = () => randomBase32(8);

/** Every client-API route (API token as `Authorization: Bearer wgt_...`). */
export const CLIENT_ROUTES: RouteSpec[] = [
  { operation: 'GET /api/client/v1/token', okStatus: 200, request: () => ({ method: 'GET', url: '/api/client/v1/token' }) },
  { operation: 'GET /api/client/v1/audit/logs', okStatus: 200, request: () => ({ method: 'GET', url: '/api/client/v1/audit/logs?limit=5' }) },
  { operation: 'GET /api/client/v1/analytics/overview', okStatus: 200, request: () => ({ method: 'GET', url: '/api/client/v1/analytics/overview' }) },
  { operation: 'GET /api/client/v1/analytics/usage', okStatus: 200, request: () => ({ method: 'GET', url: '/api/client/v1/analytics/usage?group_by=service' }) },
  { operation: 'GET /api/client/v1/models', okStatus: 200, request: () => ({ method: 'GET', url: '/api/client/v1/models' }) },
  { operation: 'GET /api/client/v1/models/{model}', okStatus: 200, request: () => ({ method: 'GET', url: '/api/client/v1/models/local-chat' }) },
  {
    operation: 'POST /api/client/v1/chat/completions',
    okStatus: 200,
    request: () => ({ method: 'POST', url: '/api/client/v1/chat/completions', payload: { model: 'local-chat', messages: [{ role: 'user', content: 'hi' }] } }),
  },
  {
    operation: 'POST /api/client/v1/embeddings',
    okStatus: 200,
    request: () => ({ method: 'POST', url: '/api/client/v1/embeddings', payload: { model: 'local-embed', input: 'hi' } }),
  },
  {
    operation: 'POST /api/client/v1/moderations',
    okStatus: 200,
    request: async (t) => ({ method: 'POST', url: '/api/client/v1/moderations', payload: { model: await mockModel(t, ['moderation']), input: 'hi' } }),
  },
  { operation: 'POST /api/client/v1/files/buckets', okStatus: 201, request: () => ({ method: 'POST', url: '/api/client/v1/files/buckets', payload: { key: `sec-${unique()}` } }) },
  { operation: 'GET /api/client/v1/files/buckets', okStatus: 200, request: () => ({ method: 'GET', url: '/api/client/v1/files/buckets' }) },
  {
    operation: 'GET /api/client/v1/files/buckets/{bucketKey}/objects',
    okStatus: 200,
    request: async (t) => ({ method: 'GET', url: `/api/client/v1/files/buckets/${await securityBucket(t)}/objects` }),
  },
  {
    operation: 'PUT /api/client/v1/files/buckets/{bucketKey}/objects/{*}',
    okStatus: 201,
    request: async (t) => ({ method: 'PUT', url: `/api/client/v1/files/buckets/${await securityBucket(t)}/objects/doc-${unique()}.txt`, payload: 'hello' }),
  },
  {
    operation: 'GET /api/client/v1/files/buckets/{bucketKey}/objects/{*}',
    okStatus: 200,
    request: async (t) => ({ method: 'GET', url: `/api/client/v1/files/buckets/${await securityBucket(t)}/objects/${await securityObject(t)}` }),
  },
  {
    operation: 'DELETE /api/client/v1/files/buckets/{bucketKey}/objects/{*}',
    okStatus: 200,
    request: async (t) => ({ method: 'DELETE', url: `/api/client/v1/files/buckets/${await securityBucket(t)}/objects/${await securityObject(t)}` }),
  },
  {
    operation: 'POST /api/client/v1/batches',
    okStatus: 201,
    request: () => ({ method: 'POST', url: '/api/client/v1/batches', payload: securityBatchBody() }),
  },
  { operation: 'GET /api/client/v1/batches', okStatus: 200, request: () => ({ method: 'GET', url: '/api/client/v1/batches' }) },
  { operation: 'GET /api/client/v1/batches/{batchId}', okStatus: 200, request: async (t) => ({ method: 'GET', url: `/api/client/v1/batches/${await securityBatch(t)}` }) },
  {
    operation: 'POST /api/client/v1/batches/{batchId}/cancel',
    okStatus: 200,
    // A fresh batch each time (a cancelled one cannot be cancelled again); its worker is not started in these apps.
    request: async (t) => ({ method: 'POST', url: `/api/client/v1/batches/${await securityBatch(t, true)}/cancel` }),
  },
  { operation: 'GET /api/client/v1/batches/{batchId}/items', okStatus: 200, request: async (t) => ({ method: 'GET', url: `/api/client/v1/batches/${await securityBatch(t)}/items` }) },
  { operation: 'GET /api/client/v1/batches/{batchId}/results', okStatus: 200, request: async (t) => ({ method: 'GET', url: `/api/client/v1/batches/${await securityBatch(t)}/results` }) },
  {
    operation: 'POST /api/client/v1/guardrails/evaluate',
    okStatus: 200,
    request: async (t) => ({ method: 'POST', url: '/api/client/v1/guardrails/evaluate', payload: { guardrail_key: await securityGuardrail(t), text: 'hello' } }),
  },
  { operation: 'GET /api/client/v1/agents', okStatus: 200, request: () => ({ method: 'GET', url: '/api/client/v1/agents' }) },
  { operation: 'POST /api/client/v1/agents', okStatus: 201, request: () => ({ method: 'POST', url: '/api/client/v1/agents', payload: { name: `Agent ${unique()}`, config: { modelKey: 'local-chat' } } }) },
  { operation: 'GET /api/client/v1/agents/{agentKey}', okStatus: 200, request: async (t) => ({ method: 'GET', url: `/api/client/v1/agents/${await securityAgent(t)}` }) },
  { operation: 'PATCH /api/client/v1/agents/{agentKey}', okStatus: 200, request: async (t) => ({ method: 'PATCH', url: `/api/client/v1/agents/${await securityAgent(t)}`, payload: { description: 'patched' } }) },
  { operation: 'DELETE /api/client/v1/agents/{agentKey}', okStatus: 200, request: async (t) => ({ method: 'DELETE', url: `/api/client/v1/agents/${await securityAgent(t, true)}` }) },
  { operation: 'POST /api/client/v1/agents/{agentKey}/publish', okStatus: 201, request: async (t) => ({ method: 'POST', url: `/api/client/v1/agents/${await securityAgent(t)}/publish` }) },
  {
    operation: 'POST /api/client/v1/agents/responses',
    okStatus: 200,
    request: async (t) => ({ method: 'POST', url: '/api/client/v1/agents/responses', payload: { model: await securityAgent(t), input: 'hello' } }),
  },
  {
    operation: 'GET /api/client/v1/a2a/{agentKey}/.well-known/agent-card.json',
    okStatus: 200,
    request: async (t) => ({ method: 'GET', url: `/api/client/v1/a2a/${await securityAgent(t)}/.well-known/agent-card.json` }),
  },
  {
    operation: 'POST /api/client/v1/a2a/{agentKey}',
    okStatus: 200,
    request: async (t) => ({
      method: 'POST',
      url: `/api/client/v1/a2a/${await securityAgent(t)}`,
      payload: { jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: { kind: 'message', messageId: unique(), role: 'user', parts: [{ kind: 'text', text: 'hello' }] } } },
    }),
  },
];

const securityAgents = new WeakMap<TestApp, string>();

/** A published local-chat agent of project default (one per app; `fresh` makes a new one). */
async function securityAgent(t: TestApp, fresh = false): Promise<string> {
  const known = securityAgents.get(t);
  if (known && !fresh) return known;
  const created = await call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/agents', payload: { name: 'Security agent', config: { modelKey: 'local-chat' }, metadata: { a2a: { enabled: true } } } });
  if (created.statusCode !== 201) throw new Error(`agent create failed: ${created.statusCode} ${created.body}`);
  const key = created.json().agent.key as string;
  const published = await call(t.app, t.ownerToken, { method: 'POST', url: `/api/client/v1/agents/${key}/publish` });
  if (published.statusCode !== 201) throw new Error(`agent publish failed: ${published.statusCode} ${published.body}`);
  if (!fresh) securityAgents.set(t, key);
  return key;
}

/** A PII guardrail of project default for the guardrail cases (created once per app). */
async function securityGuardrail(t: TestApp): Promise<string> {
  const res = await call(t.app, t.adminSession, { method: 'POST', url: '/api/guardrails', payload: { key: 'security-cases', type: 'pii' } });
  if (res.statusCode !== 201 && res.statusCode !== 409) throw new Error(`guardrail create failed: ${res.statusCode} ${res.body}`);
  return 'security-cases';
}

function securityBatchBody() {
  return { endpoint: '/v1/chat/completions', requests: [{ custom_id: 'a', body: { model: 'local-chat', messages: [{ role: 'user', content: 'hi' }] } }] };
}

const securityBatches = new WeakMap<TestApp, string>();

/** A batch of project default for the batch cases (one per app; `fresh` makes a new one). */
async function securityBatch(t: TestApp, fresh = false): Promise<string> {
  const known = securityBatches.get(t);
  if (known && !fresh) return known;
  const res = await call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/batches', payload: securityBatchBody() });
  if (res.statusCode !== 201) throw new Error(`batch create failed: ${res.statusCode} ${res.body}`);
  if (!fresh) securityBatches.set(t, res.json().id);
  return res.json().id as string;
}

/** A bucket of project default for the document-store cases (created once per app). */
async function securityBucket(t: TestApp): Promise<string> {
  const res = await call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/files/buckets', payload: { key: 'security-cases' } });
  if (res.statusCode !== 201 && res.statusCode !== 409) throw new Error(`bucket create failed: ${res.statusCode} ${res.body}`);
  return 'security-cases';
}

/** A fresh object in that bucket: a positive DELETE removes it, so every request gets its own. */
async function securityObject(t: TestApp): Promise<string> {
  const key = `doc-${unique()}.txt`;
  const res = await call(t.app, t.ownerToken, { method: 'PUT', url: `/api/client/v1/files/buckets/${await securityBucket(t)}/objects/${key}`, payload: 'hello' });
  if (res.statusCode !== 201) throw new Error(`object put failed: ${res.statusCode} ${res.body}`);
  return key;
}

/** Registers a mock model with the given capabilities in project default and returns its key. */
function mockModel(t: TestApp, capabilities: string[]): Promise<string> {
  return registerModel(t, { provider: { type: 'mock' }, capabilities });
}

/** Every dashboard route (session JWT as Bearer or the `waygate_session` cookie). */
export const DASHBOARD_ROUTES: RouteSpec[] = [
  { operation: 'GET /api/auth/me', okStatus: 200, request: () => ({ method: 'GET', url: '/api/auth/me' }) },
  {
    operation: 'POST /api/tenants',
    okStatus: 201,
    request: () => {
      const id = unique();
      return { method: 'POST', url: '/api/tenants', payload: { name: `Tenant ${id}`, ownerEmail: `owner-${id}@example.test`, ownerPassword: 'tenant-owner-pw' } };
    },
  },
  { operation: 'GET /api/projects', okStatus: 200, request: () => ({ method: 'GET', url: '/api/projects' }) },
  { operation: 'POST /api/projects', okStatus: 201, request: () => ({ method: 'POST', url: '/api/projects', payload: { name: `Project ${unique()}` } }) },
  { operation: 'GET /api/users', okStatus: 200, request: () => ({ method: 'GET', url: '/api/users' }) },
  {
    operation: 'POST /api/users',
    okStatus: 201,
    request: () => ({ method: 'POST', url: '/api/users', payload: { email: `user-${unique()}@example.test`, password: 'user-password-1', role: 'viewer' } }),
  },
  { operation: 'GET /api/tokens', okStatus: 200, request: () => ({ method: 'GET', url: '/api/tokens' }) },
  {
    operation: 'POST /api/tokens',
    okStatus: 201,
    request: () => ({ method: 'POST', url: '/api/tokens', payload: { name: 'sec', projectId: 'default', role: 'viewer' } }),
  },
  { operation: 'PATCH /api/projects/{id}', okStatus: 200, request: () => ({ method: 'PATCH', url: '/api/projects/default', payload: { name: 'Default' } }) },
  { operation: 'GET /api/models', okStatus: 200, request: () => ({ method: 'GET', url: '/api/models' }) },
  {
    operation: 'POST /api/models',
    okStatus: 201,
    request: () => ({ method: 'POST', url: '/api/models', payload: { key: `m-${unique().toLowerCase()}`, provider: { type: 'mock' }, capabilities: ['chat'] } }),
  },
  {
    operation: 'PATCH /api/models/{key}',
    okStatus: 200,
    request: async (t) => ({ method: 'PATCH', url: `/api/models/${await mockModel(t, ['chat'])}`, payload: { name: 'Renamed' } }),
  },
  {
    operation: 'DELETE /api/models/{key}',
    okStatus: 200,
    request: async (t) => ({ method: 'DELETE', url: `/api/models/${await mockModel(t, ['chat'])}` }),
  },
  { operation: 'GET /api/guardrails', okStatus: 200, request: () => ({ method: 'GET', url: '/api/guardrails' }) },
  { operation: 'POST /api/guardrails', okStatus: 201, request: () => ({ method: 'POST', url: '/api/guardrails', payload: { key: `g-${unique()}`, type: 'pii' } }) },
  { operation: 'PATCH /api/guardrails/{key}', okStatus: 200, request: async (t) => ({ method: 'PATCH', url: `/api/guardrails/${await securityGuardrail(t)}`, payload: { name: 'Security' } }) },
  {
    operation: 'DELETE /api/guardrails/{key}',
    okStatus: 200,
    request: async (t) => {
      const key = `g-${unique()}`;
      await call(t.app, t.adminSession, { method: 'POST', url: '/api/guardrails', payload: { key, type: 'pii' } });
      return { method: 'DELETE', url: `/api/guardrails/${key}` };
    },
  },
  { operation: 'GET /api/guardrails/{key}/evaluations', okStatus: 200, request: async (t) => ({ method: 'GET', url: `/api/guardrails/${await securityGuardrail(t)}/evaluations` }) },
  {
    operation: 'DELETE /api/tokens/{id}',
    okStatus: 200,
    request: async (t) => ({ method: 'DELETE', url: `/api/tokens/${(await createToken(t, { role: 'viewer' })).id}` }),
  },
];

/** The secured operations the app registers, read from its generated OpenAPI document. */
export function securedOperations(t: TestApp): { client: string[]; dashboard: string[] } {
  const doc = t.app.swagger() as { paths?: Record<string, Record<string, { security?: Record<string, unknown>[] }>> };
  const client: string[] = [];
  const dashboard: string[] = [];
  for (const [url, methods] of Object.entries(doc.paths ?? {})) {
    for (const [method, operation] of Object.entries(methods)) {
      const schemes = (operation.security ?? []).flatMap((s) => Object.keys(s));
      const name = `${method.toUpperCase()} ${url}`;
      if (schemes.includes('bearer')) client.push(name);
      if (schemes.includes('session')) dashboard.push(name);
    }
  }
  return { client: client.sort(), dashboard: dashboard.sort() };
}

/** Replaces (or removes, with null) the Authorization header of a request. */
export function withAuthorization(options: InjectOptions, authorization: string | null, cookies?: Record<string, string>): InjectOptions {
  const headers = { ...(options.headers ?? {}) } as Record<string, string>;
  delete headers.authorization;
  if (authorization !== null) headers.authorization = authorization;
  return { ...options, headers, ...(cookies ? { cookies } : {}) };
}

/** A 401 in the error envelope, with a request id like every response. */
export function expectUnauthenticated(res: LightMyRequestResponse): void {
  expect(res.statusCode, res.body).toBe(401);
  const body = res.json();
  expect(body.error.type).toBe('authentication_error');
  expect(typeof body.error.message).toBe('string');
  expect(body.error.message.length).toBeGreaterThan(0);
  expect(res.headers['x-request-id']).toBeTruthy();
}

/** The session signing secret: WAYGATE_SESSION_SECRET or the one generated in the data directory. */
export function sessionSecretOf(t: TestApp): string {
  return t.config.sessionSecret ?? fs.readFileSync(path.join(t.config.dataDir, 'session.key'), 'utf8').trim();
}

export async function signSession(
  secret: string,
  claims: { sub: string; tid: string; issuer?: string; expiresAtSeconds?: number; sessionVersion?: number },
): Promise<string> {
  return new SignJWT({ tid: claims.tid, sv: claims.sessionVersion ?? 0 })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(claims.sub)
    .setIssuer(claims.issuer ?? 'waygate')
    .setIssuedAt(Math.floor(Date.now() / 1000) - 120)
    .setExpirationTime(claims.expiresAtSeconds ?? Math.floor(Date.now() / 1000) + 3600)
    .sign(new TextEncoder().encode(secret));
}

/** The instance admin's user id (subject of its session). */
export async function adminUserId(t: TestApp): Promise<string> {
  const me = await call(t.app, t.adminSession, { method: 'GET', url: '/api/auth/me' });
  return me.json().user.id as string;
}

/** Registers the API-token cases for one client route. `getT` reads the app made in `beforeAll`. */
export function clientSecurityCases(getT: () => TestApp, route: RouteSpec): void {
  const send = async (authorization: string | null) => {
    const t = getT();
    return t.app.inject(withAuthorization(await route.request(t), authorization));
  };

  it(`${route.operation}: a valid owner token gets ${route.okStatus}`, async () => {
    const res = await send(`Bearer ${getT().ownerToken}`);
    expect(res.statusCode, res.body).toBe(route.okStatus);
  });

  it(`${route.operation}: no Authorization header -> 401`, async () => {
    const res = await send(null);
    expectUnauthenticated(res);
    expect(res.json().error.code).toBe('missing_token');
  });

  it.each(['Basic x', 'Bearer', 'Bearer ', 'Token wgt_abc', 'Bearer a b'])(`${route.operation}: malformed header "%s" -> 401`, async (header) => {
    expectUnauthenticated(await send(header));
  });

  it(`${route.operation}: unknown wgt_ token and non-wgt_ value -> 401`, async () => {
    const unknown = await send(`Bearer wgt_${randomBase32(43)}`);
    expectUnauthenticated(unknown);
    expect(unknown.json().error.code).toBe('invalid_token');
    expectUnauthenticated(await send(`Bearer sk_${randomBase32(43)}`));
  });

  it(`${route.operation}: a session JWT is not an API token -> 401`, async () => {
    expectUnauthenticated(await send(`Bearer ${getT().adminSession}`));
  });

  it(`${route.operation}: revoked token -> 401`, async () => {
    const t = getT();
    const token = await createToken(t, { role: 'owner' });
    const revoked = await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/tokens/${token.id}` });
    expect(revoked.statusCode).toBe(200);
    const res = await send(`Bearer ${token.value}`);
    expectUnauthenticated(res);
    expect(res.json().error.code).toBe('invalid_token');
  });

  it(`${route.operation}: expired token -> 401`, async () => {
    const t = getT();
    const token = await createToken(t, { role: 'owner', expiresAt: new Date(Date.now() + 60_000).toISOString() });
    // Move the expiry into the past in the database rather than sleeping.
    await t.ctx.database.db.updateTable('api_tokens').set({ expires_at: Date.now() - 1_000 }).where('id', '=', token.id).execute();
    const res = await send(`Bearer ${token.value}`);
    expectUnauthenticated(res);
    expect(res.json().error.code).toBe('invalid_token');
  });
}

/** Registers the session cases for one dashboard route. */
export function dashboardSecurityCases(getT: () => TestApp, route: RouteSpec): void {
  const send = async (authorization: string | null, cookies?: Record<string, string>) => {
    const t = getT();
    return t.app.inject(withAuthorization(await route.request(t), authorization, cookies));
  };

  it(`${route.operation}: the admin session as Bearer gets ${route.okStatus}`, async () => {
    const res = await send(`Bearer ${getT().adminSession}`);
    expect(res.statusCode, res.body).toBe(route.okStatus);
  });

  it(`${route.operation}: the waygate_session cookie works like Bearer`, async () => {
    const res = await send(null, { waygate_session: getT().adminSession });
    expect(res.statusCode, res.body).toBe(route.okStatus);
  });

  it(`${route.operation}: no session -> 401`, async () => {
    const res = await send(null);
    expectUnauthenticated(res);
    expect(res.json().error.code).toBe('not_authenticated');
  });

  it(`${route.operation}: garbage JWT (header or cookie) and malformed headers -> 401`, async () => {
    expectUnauthenticated(await send('Bearer not.a.jwt'));
    expectUnauthenticated(await send(null, { waygate_session: 'garbage' }));
    expectUnauthenticated(await send('Basic x'));
    expectUnauthenticated(await send('Bearer'));
  });

  it(`${route.operation}: an API token is not a session -> 401`, async () => {
    expectUnauthenticated(await send(`Bearer ${getT().ownerToken}`));
  });

  it(`${route.operation}: JWT signed with another secret, expired, wrong issuer or unknown user -> 401`, async () => {
    const t = getT();
    const claims = { sub: await adminUserId(t), tid: t.ctx.bootstrap.tenantId };
    const secret = sessionSecretOf(t);
    // Positive control: the same claims signed with the real secret are accepted.
    expect((await send(`Bearer ${await signSession(secret, claims)}`)).statusCode).toBe(route.okStatus);
    expectUnauthenticated(await send(`Bearer ${await signSession(`other-${secret}`, claims)}`));
    expectUnauthenticated(await send(null, { waygate_session: await signSession(`other-${secret}`, claims) }));
    expectUnauthenticated(await send(`Bearer ${await signSession(secret, { ...claims, expiresAtSeconds: Math.floor(Date.now() / 1000) - 60 })}`));
    expectUnauthenticated(await send(`Bearer ${await signSession(secret, { ...claims, issuer: 'someone-else' })}`));
    expectUnauthenticated(await send(`Bearer ${await signSession(secret, { ...claims, sub: 'usr_nobody' })}`));
    const unsigned = new UnsecuredJWT({ tid: claims.tid }).setSubject(claims.sub).setIssuer('waygate').setExpirationTime('1h').encode();
    expectUnauthenticated(await send(`Bearer ${unsigned}`));
  });
}
