import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_EMAIL, ADMIN_PASSWORD, BACKENDS, call, createTestApp, createToken, flushAudit, type TestApp } from '../helpers/app.js';

/**
 * Property tests: random JSON bodies and random headers thrown at the identity and audit endpoints.
 * Whatever arrives, the answer is a clear 4xx (or a success), never a 5xx; failures carry `{ error: { message } }`;
 * every response has a sane X-Request-Id; no answer ever contains the admin password.
 */

const RUNS = 150;
/**
 * Bounded even when a property fails and shrinks. A busy machine may stop a property early: the cases it ran
 * still count, and only a counterexample fails it (no timing decides a result).
 */
const PARAMS = { numRuns: RUNS, interruptAfterTimeLimit: 8_000, markInterruptAsFailure: false };
const TIMEOUT_MS = 60_000;
const BODY_LIMIT = 256 * 1024;
const ROLES = ['owner', 'admin', 'member', 'viewer'] as const;

// ---------------------------------------------------------------- strings and JSON junk

const nasty = fc.constantFrom(
  '', ' ', '\u0000', 'a\u0000b', '\uD800', '\uDC00x', '\uFFFF', '\u202Eevil', '\u0301', '😀'.repeat(40), 'e\u0301'.repeat(30),
  "'; DROP TABLE users; --", "' OR '1'='1", '%00', '%', '_', '\\', '../../etc/passwd', '${jndi:ldap://127.0.0.1/x}',
  '<script>alert(1)</script>', 'null', 'true', '0', '-1', '1e309', 'NaN', '__proto__', 'constructor', 'prototype',
  'toString', 'hasOwnProperty', 'owner', 'default', 'wgt_', 'Bearer', 'admin@example.test', '9999-12-31T23:59:59Z',
);
const huge = fc
  .tuple(fc.constantFrom('a', 'é', '😀', '\u0000', '{', '"'), fc.integer({ min: 300, max: 300_000 }))
  .map(([c, n]) => c.repeat(n));
const text = fc
  .oneof(
    { weight: 4, arbitrary: fc.string({ unit: 'binary', maxLength: 64 }) },
    { weight: 3, arbitrary: nasty },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }).map((s) => `${s}\u0000${s}`) },
    { weight: 1, arbitrary: huge },
  )
  .filter((s) => !s.includes(ADMIN_PASSWORD));

function nest(depth: number): unknown {
  let value: unknown = 'bottom';
  for (let i = 0; i < depth; i++) value = i % 2 === 0 ? { a: value } : [value];
  return value;
}

const junk: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' }),
  text,
  fc.constantFrom(null, true, false, 0, -1, 1.5, 1e308, -1e308, 2 ** 53 + 2, [], {}, [[]], { '': '' }),
  fc.array(text, { maxLength: 5 }),
  fc.dictionary(text, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 5 }),
  fc.integer({ min: 50, max: 3000 }).map(nest),
);

const KNOWN_FIELDS = [
  'email', 'password', 'name', 'role', 'projectId', 'permissions', 'budget', 'rateLimit', 'expiresAt', 'grants', 'key',
  'request_id', 'ownerEmail', 'ownerPassword', 'isInstanceAdmin', 'tenantId',
];
const wrongTyped = fc.record(Object.fromEntries(KNOWN_FIELDS.map((f) => [f, junk])), { requiredKeys: [] });

const PROTO_KEYS = ['__proto__', 'constructor', 'prototype'] as const;
const pollution = fc
  .tuple(fc.constantFrom(...PROTO_KEYS), fc.constantFrom('{"polluted":"yes","isInstanceAdmin":true,"role":"owner"}', '{"prototype":{"polluted":"yes"}}', 'null', '"x"'))
  .map(([key, value]) => `"${key}":${value}`);

const malformed = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.constantFrom('{', '{"a":', 'nul', '[1,]', '\uFEFF{}', '{"a":1}{"b":2}', '{"email":"x"', '"\\ud800"', '{"a":01}', '\u0000', '{"a":1,}'),
);

/** A request body as sent on the wire: any JSON, wrong-typed known fields, near-valid shapes, pollution, garbage. */
function bodyText(nearValid: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { weight: 2, arbitrary: fc.jsonValue({ stringUnit: 'binary' }).map((v) => JSON.stringify(v)) },
    { weight: 3, arbitrary: wrongTyped.map((v) => JSON.stringify(v)) },
    { weight: 4, arbitrary: nearValid.map((v) => JSON.stringify(v)) },
    {
      weight: 2,
      arbitrary: fc.tuple(fc.array(pollution, { minLength: 1, maxLength: 3 }), nearValid).map(([keys, rest]) => {
        const tail = JSON.stringify(rest).slice(1);
        return `{${keys.join(',')}${tail === '}' ? '}' : `,${tail}`}`;
      }),
    },
    { weight: 1, arbitrary: malformed },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
}

// ---------------------------------------------------------------- headers

/** What a real HTTP server can receive in a header value: visible ASCII, space, tab and Latin-1 (obs-text). */
const headerChar = fc.oneof(
  fc.integer({ min: 0x20, max: 0x7e }),
  fc.integer({ min: 0xa0, max: 0xff }),
  fc.constant(0x09),
).map((c) => String.fromCharCode(c));
const headerText = fc.string({ unit: headerChar, maxLength: 200 });
const longHeader = fc
  .tuple(fc.constantFrom('x', 'é', 'ÿ', '-', ' '), fc.integer({ min: 129, max: 8000 }))
  .map(([c, n]) => c.repeat(n));
const SIMPLE_ID = /^[A-Za-z0-9_-]{1,128}$/;
const requestId = fc.oneof(fc.stringMatching(SIMPLE_ID), headerText, longHeader, fc.constantFrom('', 'äöü-id', 'id with spaces', 'a'.repeat(128), 'a'.repeat(129)));
const contentType = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      'application/json', 'application/json; charset=utf-8', 'APPLICATION/JSON', 'application/json;charset=latin1',
      'application/vnd.api+json', 'application/problem+json', 'text/plain', 'text/json', 'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=xyz', 'application/octet-stream', 'application/jsonx', 'application/', '*/*', ';', '',
    ),
  },
  { weight: 1, arbitrary: headerText },
);

/** Authorization values that are not valid credentials. */
const badAuthorization = fc.oneof(
  headerText,
  longHeader,
  headerText.map((s) => `Bearer ${s}`),
  fc.stringMatching(/^[A-Za-z0-9_-]{0,60}$/).map((s) => `Bearer wgt_${s}`),
  fc.tuple(fc.base64String({ maxLength: 40 }), fc.base64String({ maxLength: 80 }), fc.base64String({ maxLength: 40 }))
    .map(([a, b, c]) => `Bearer eyJ${a}.${b}.${c}`),
  fc.constantFrom('Bearer', 'Bearer ', 'bearer  ', 'Basic YWRtaW46cGFzcw==', 'Bearer a b', 'Token wgt_x', 'Bearer null'),
);

interface FuzzHeaders {
  'content-type'?: string;
  'x-request-id'?: string;
  'x-waygate-project'?: string;
}

const commonHeaders = (project: fc.Arbitrary<string>) =>
  fc.record<FuzzHeaders>(
    { 'content-type': contentType, 'x-request-id': requestId, 'x-waygate-project': project },
    { requiredKeys: [] },
  );

/** A valid credential most of the time (to reach validation and the services), a bad one or none otherwise. */
function authorization(valid: () => string): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { weight: 5, arbitrary: fc.constant('valid').map(() => `Bearer ${valid()}`) },
    { weight: 2, arbitrary: badAuthorization },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
}

// ---------------------------------------------------------------- URL parts

/** Percent-encodes the UTF-8 bytes of any string (lone surrogates become U+FFFD, as a browser would send). */
function percentEncode(value: string): string {
  let out = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9._~-]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

const rawPathJunk = fc.constantFrom('%', '%zz', '%E0%A4%A', '%C0%AF', '..', '.', '%2e%2e', '%2F', 'a%2Fb', '%00', '%FF', '~', '*', '%20', 'tok_%00');

const AUDIT_KEYS = ['action', 'actorUserId', 'from', 'to', 'method', 'outcome', 'q', 'service', 'limit', 'skip'] as const;
const auditValue = fc.oneof(
  text.filter((s) => s.length < 2000),
  fc.constantFrom(
    '1', '0', '-5', '1000', '1001', '1e20', '99999999999999999999', '9007199254740993', '1.5', 'NaN', 'Infinity', '-0', '0x10',
    '', 'success', 'failure', 'denied', 'get', 'POST', '2024-01-01', '2024-01-01T00:00:00Z', 'not-a-date', '+275760-09-13T00:00:00Z',
    '%', '_', '\\', "'", 'tokens.create', 'audit',
  ),
  fc.integer().map(String),
  fc.double().map(String),
);
const auditQuery = fc.oneof(
  {
    weight: 5,
    arbitrary: fc
      .array(fc.tuple(fc.oneof(fc.constantFrom(...AUDIT_KEYS), text.filter((s) => s.length < 200), fc.constantFrom(...PROTO_KEYS)), auditValue), { maxLength: 6 })
      .map((pairs) => pairs.map(([k, v]) => `${percentEncode(k)}=${percentEncode(v)}`).join('&')),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom('%', '&&&', '=', 'a=%zz', 'limit[]=1', 'limit=1&limit=2', 'q=%00', 'skip=1e400', 'limit', '__proto__[x]=1', 'q=a&q=b'),
  },
);

// ---------------------------------------------------------------- the invariants

const JSON_HEADERS: FuzzHeaders = { 'content-type': 'application/json' };
const SANE_RESPONSE_ID = /^[\x21-\x7e]{1,128}$/;
const snapshotPrototype = () => Object.getOwnPropertyNames(Object.prototype).sort().join(',');

function expectSane(res: LightMyRequestResponse, sentRequestId: string | undefined, allowed: readonly number[]): void {
  const where = `${res.statusCode} ${res.body.slice(0, 300)}`;
  expect(res.statusCode, where).toBeLessThan(500);
  expect(allowed, where).toContain(res.statusCode);
  const id = res.headers['x-request-id'];
  expect(typeof id, 'x-request-id header').toBe('string');
  expect(id as string).toMatch(SANE_RESPONSE_ID);
  if (sentRequestId !== undefined && SIMPLE_ID.test(sentRequestId)) expect(id).toBe(sentRequestId);
  if (res.statusCode < 200 || res.statusCode >= 300) {
    expect(String(res.headers['content-type']), where).toMatch(/^application\/json/);
    const body = JSON.parse(res.body) as { error?: { message?: unknown; type?: unknown } };
    expect(typeof body.error?.message, where).toBe('string');
    expect((body.error!.message as string).length, where).toBeGreaterThan(0);
    expect(typeof body.error?.type, where).toBe('string');
  }
  expect(res.body).not.toContain(ADMIN_PASSWORD);
  expect(JSON.stringify(res.headers)).not.toContain(ADMIN_PASSWORD);
}

// ---------------------------------------------------------------- the properties

describe.each(BACKENDS)('fuzzing the identity and audit endpoints on %s', (backend) => {
  let t: TestApp;
  let projectId: string;
  let prototypeBefore: string;
  const session = () => t.adminSession;

  beforeAll(async () => {
    prototypeBefore = snapshotPrototype();
    t = await createTestApp({
      backend,
      env: { WAYGATE_LOGIN_MAX_ATTEMPTS: '1000000', WAYGATE_BODY_LIMIT_BYTES: String(BODY_LIMIT) },
    });
    const projects = await call(t.app, t.adminSession, { method: 'GET', url: '/api/projects' });
    projectId = projects.json().projects[0].id;
  });
  afterAll(async () => t?.close());

  const project = () => fc.oneof(fc.constant('default'), fc.constant('').map(() => projectId), headerText, longHeader);

  async function send(method: 'POST' | 'DELETE' | 'GET', url: string, headers: FuzzHeaders, auth: string | undefined, body?: string) {
    const all: Record<string, string> = { ...headers } as Record<string, string>;
    if (auth !== undefined) all.authorization = auth;
    return t.app.inject({ method, url, headers: all, ...(body === undefined ? {} : { payload: body }) });
  }

  it('POST /api/auth/login never logs anyone in, never fails with 5xx', { timeout: TIMEOUT_MS }, async () => {
    const nearValid = fc.record(
      {
        email: fc.oneof(fc.constant(ADMIN_EMAIL), fc.constant(ADMIN_EMAIL.toUpperCase()), fc.emailAddress(), text),
        password: fc.oneof(text, fc.constant('wrong-password'), fc.constant(`${ADMIN_PASSWORD} `)),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(bodyText(nearValid), commonHeaders(headerText), fc.option(badAuthorization), async (body, headers, auth) => {
        const res = await send('POST', '/api/auth/login', headers, auth ?? undefined, body);
        expectSane(res, headers['x-request-id'], [400, 401, 413, 415]);
        expect(res.headers['set-cookie']).toBeUndefined();
      }),
      PARAMS,
    );
  });

  it('POST /api/projects answers 201 or a clear 4xx', { timeout: TIMEOUT_MS }, async () => {
    const nearValid = fc.record(
      { name: text, key: fc.oneof(text, fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,47}$/)) },
      { requiredKeys: ['name'] },
    );
    await fc.assert(
      fc.asyncProperty(bodyText(nearValid), commonHeaders(project()), authorization(session), async (body, headers, auth) => {
        const res = await send('POST', '/api/projects', headers, auth, body);
        expectSane(res, headers['x-request-id'], [201, 400, 401, 404, 409, 413, 415]);
        if (res.statusCode === 201) expect(res.json().project.id).toMatch(/^prj_/);
      }),
      { ...PARAMS, examples: [[JSON.stringify({ name: 'nul\u0000name' }), JSON_HEADERS, `Bearer ${t.adminSession}`]] },
    );
  });

  it('POST /api/tokens answers 201 or a clear 4xx', { timeout: TIMEOUT_MS }, async () => {
    const level = fc.oneof(fc.constantFrom('none', 'read', 'write'), junk);
    const nearValid = fc.record(
      {
        name: text,
        projectId: fc.oneof(fc.constant('default'), fc.constant(null), fc.constant('').map(() => projectId), text),
        role: fc.oneof(fc.constantFrom(...ROLES), text),
        permissions: fc.oneof(fc.dictionary(fc.constantFrom('agents', 'audit', 'batches', 'self', 'auth', '__proto__', 'x'), level), junk),
        grants: fc.oneof(fc.constant(['audit:read']), fc.array(fc.oneof(text, fc.constant('audit:read')), { maxLength: 12 })),
        expiresAt: fc.oneof(fc.date({ noInvalidDate: true }).map((d) => d.toISOString()), text),
        budget: fc.oneof(
          fc.record(
            { maxTokens: fc.oneof(fc.integer(), fc.double(), junk), maxCostUsd: fc.oneof(fc.double(), junk), period: fc.oneof(fc.constantFrom('day', 'month', 'total'), text) },
            { requiredKeys: [] },
          ),
          junk,
        ),
        rateLimit: fc.oneof(fc.record({ rpm: fc.oneof(fc.integer(), junk), tpm: fc.oneof(fc.integer(), junk) }, { requiredKeys: [] }), junk),
      },
      { requiredKeys: ['name', 'projectId', 'role'] },
    );
    await fc.assert(
      fc.asyncProperty(bodyText(nearValid), commonHeaders(project()), authorization(session), async (body, headers, auth) => {
        const res = await send('POST', '/api/tokens', headers, auth, body);
        expectSane(res, headers['x-request-id'], [201, 400, 401, 404, 413, 415]);
        if (res.statusCode === 201) expect(res.json().value).toMatch(/^wgt_[A-Za-z0-9_-]{43}$/);
      }),
      {
        ...PARAMS,
        examples: [
          [JSON.stringify({ name: 'nul\u0000name', projectId: 'default', role: 'viewer' }), JSON_HEADERS, `Bearer ${t.adminSession}`],
          [JSON.stringify({ name: 'x', projectId: 'nul\u0000project', role: 'viewer' }), JSON_HEADERS, `Bearer ${t.adminSession}`],
        ],
      },
    );
  });

  it('DELETE /api/tokens/<random> revokes nothing and answers a clear 4xx', { timeout: TIMEOUT_MS }, async () => {
    const segment = fc.oneof(
      text.filter((s) => s.length > 0 && s.length < 3000).map(percentEncode),
      fc.stringMatching(/^[a-z2-7]{24}$/).map((s) => `tok_${s}`),
      rawPathJunk,
    );
    await fc.assert(
      fc.asyncProperty(segment, commonHeaders(project()), authorization(session), async (id, headers, auth) => {
        const res = await send('DELETE', `/api/tokens/${id}`, headers, auth);
        expectSane(res, headers['x-request-id'], [400, 401, 404, 414, 415]);
      }),
      {
        ...PARAMS,
        examples: [
          ['%00', {}, undefined],
          ['%', {}, `Bearer ${t.adminSession}`],
          [`tok_${'a'.repeat(120)}`, {}, `Bearer ${t.adminSession}`],
          ['%00', {}, `Bearer ${t.adminSession}`],
        ],
      },
    );
    const self = await call(t.app, t.ownerToken, { method: 'GET', url: '/api/client/v1/token' });
    expect(self.statusCode).toBe(200);
  });

  it('POST /api/users answers 201 or a clear 4xx', { timeout: TIMEOUT_MS }, async () => {
    const nearValid = fc.record(
      {
        email: fc.oneof(fc.emailAddress(), fc.constant(ADMIN_EMAIL), text),
        password: fc.oneof(text, fc.constant('a-long-enough-password')),
        role: fc.oneof(fc.constantFrom(...ROLES), text),
        name: text,
      },
      { requiredKeys: ['email', 'password', 'role'] },
    );
    await fc.assert(
      fc.asyncProperty(bodyText(nearValid), commonHeaders(project()), authorization(session), async (body, headers, auth) => {
        const res = await send('POST', '/api/users', headers, auth, body);
        expectSane(res, headers['x-request-id'], [201, 400, 401, 404, 409, 413, 415]);
        if (res.statusCode === 201) expect(JSON.stringify(res.json())).not.toMatch(/scrypt\$|passwordHash|password/);
      }),
      {
        ...PARAMS,
        numRuns: Math.round(RUNS / 2),
        examples: [[JSON.stringify({ email: 'nul@example.test', password: 'password-123', role: 'viewer', name: 'a\u0000' }), JSON_HEADERS, `Bearer ${t.adminSession}`]],
      },
    );
  });

  it('GET /api/client/v1/audit/logs with random query strings answers a list or a clear 4xx', { timeout: TIMEOUT_MS }, async () => {
    await fc.assert(
      fc.asyncProperty(auditQuery, commonHeaders(headerText), authorization(() => t.ownerToken), async (query, headers, auth) => {
        const res = await send('GET', `/api/client/v1/audit/logs?${query}`, headers, auth);
        expectSane(res, headers['x-request-id'], [200, 400, 401]);
        if (res.statusCode === 200) {
          const body = res.json();
          expect(body.object).toBe('list');
          expect(Array.isArray(body.data)).toBe(true);
          expect(body.data.length).toBeLessThanOrEqual(1000);
        }
      }),
      {
        ...PARAMS,
        examples: ['skip=1e20', 'skip=1e400', 'skip=9223372036854775808', 'q=%00', 'action=a%00b'].map((q): [string, FuzzHeaders, string] => [q, {}, `Bearer ${t.ownerToken}`]),
      },
    );
  });

  it('GET /api/client/v1/token answers 200 only to a real token and 401 to anything else', { timeout: TIMEOUT_MS }, async () => {
    const other = await createToken(t, { role: 'viewer', projectId: null });
    const credential = fc.oneof(
      fc.constantFrom({ ok: true, value: `Bearer ${t.ownerToken}` }, { ok: true, value: `bearer   ${other.value}  ` }),
      badAuthorization.map((value) => ({ ok: false, value })),
      fc.constant({ ok: false, value: `Bearer ${t.adminSession}` }),
      fc.constant({ ok: false, value: `Bearer ${t.ownerToken}x` }),
      fc.constant({ ok: false, value: `Bearer ${t.ownerToken.toUpperCase()}` }),
    );
    await fc.assert(
      fc.asyncProperty(credential, commonHeaders(headerText), async ({ ok, value }, headers) => {
        const res = await send('GET', '/api/client/v1/token', headers, value);
        expectSane(res, headers['x-request-id'], ok ? [200] : [401]);
        if (ok) expect(res.json().data.id).toMatch(/^tok_/);
      }),
      PARAMS,
    );
  });

  it('leaves the instance intact: no prototype pollution, admin and owner token still work, audit buffer drains', async () => {
    expect(snapshotPrototype()).toBe(prototypeBefore);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const login = await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
    expect(login.statusCode).toBe(200);
    expect(login.json().user.isInstanceAdmin).toBe(true);
    const self = await call(t.app, t.ownerToken, { method: 'GET', url: '/api/client/v1/token' });
    expect(self.json().data.role).toBe('owner');
    const users = await call(t.app, t.adminSession, { method: 'GET', url: '/api/users' });
    for (const user of users.json().users as { email: string; isInstanceAdmin: boolean }[]) {
      expect(user.isInstanceAdmin, user.email).toBe(user.email === ADMIN_EMAIL);
    }
    const marker = `fuzz-after-${backend}-check`;
    const failed = await t.app.inject({
      method: 'POST', url: '/api/auth/login', headers: { 'x-request-id': marker }, payload: { email: ADMIN_EMAIL, password: 'not-the-password' },
    });
    expect(failed.statusCode).toBe(401);
    await flushAudit(t);
    expect(t.ctx.services.audit.pending).toBe(0);
    const failures = await call(t.app, t.ownerToken, { method: 'GET', url: `/api/client/v1/audit/logs?q=${marker}` });
    expect(failures.statusCode).toBe(200);
    expect(failures.json().data.map((e: { action: string; outcome: string }) => `${e.action}:${e.outcome}`)).toEqual(['auth.login:failure']);
    expect(failures.body).not.toContain(ADMIN_PASSWORD);
  });
});
