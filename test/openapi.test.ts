import { compileErrors, validate } from '@readme/openapi-parser';
import type * as FastifyModule from 'fastify';
import type { RouteOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ROUTE_PERMISSIONS } from '../src/http/rbac.js';
import { BACKENDS, createTestApp, type TestApp } from './helpers/app.js';

/**
 * Interface 9.1: GET /api/client/v1/openapi.json is an OpenAPI 3.1 document, version 1.0.0, generated from the route
 * schemas, listing every route the app serves. Routes are collected the only complete way Fastify offers, an
 * `onRoute` hook: the Fastify factory is wrapped so the hook exists before buildApp registers anything, and the
 * collected list is cross-checked against `printRoutes()`.
 */
const registered = vi.hoisted(() => [] as RouteOptions[]);
vi.mock('fastify', async (importOriginal) => {
  const mod = await importOriginal<typeof FastifyModule>();
  const factory = ((options?: object) => {
    const app = mod.default(options);
    app.addHook('onRoute', (route) => void registered.push(route));
    return app;
  }) as unknown as typeof mod.default;
  return { ...mod, default: factory };
});

const DOC_URL = '/api/client/v1/openapi.json';

interface RouteSchema {
  operationId?: string;
  hide?: boolean;
  body?: { properties?: Record<string, unknown>; required?: string[] };
  querystring?: { properties?: Record<string, unknown> };
  params?: { properties?: Record<string, unknown> };
  response?: Record<string, { required?: string[] }>;
}
interface Route {
  method: string;
  url: string;
  schema: RouteSchema;
}
interface JsonSchema {
  type?: string;
  properties?: Record<string, unknown>;
  required?: string[];
}
interface Operation {
  operationId?: string;
  security?: Record<string, string[]>[];
  parameters?: { in: string; name: string; required?: boolean; schema?: JsonSchema }[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: JsonSchema }> };
  responses?: Record<string, { content?: Record<string, { schema?: JsonSchema }> }>;
}
interface OpenApiDoc {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
}

// A trailing wildcard (`/objects/*`, the rest of the path) is `{*}` in the document, as @fastify/swagger writes it.
const toOpenApiPath = (url: string) => url.replace(/:(\w+)/g, '{$1}').replace(/\*$/, '{*}');
const toFastifyPath = (path: string) => path.replace(/\{(\w+)\}/g, ':$1').replace(/\{\*\}$/, '*');
const key = (method: string, url: string) => `${method.toUpperCase()} ${url}`;

/** `METHOD /path` for every node of `app.printRoutes({ commonPrefix: false })` (children print relative to parents). */
function parsePrintedRoutes(tree: string): Set<string> {
  const out = new Set<string>();
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const match = /^((?:│ {3}| {4})*)[├└]── (\S+)(?: \(([^)]*)\))?$/.exec(line);
    if (!match) continue;
    const depth = match[1]!.length / 4;
    const parent = depth > 0 ? (stack[depth - 1] ?? '') : '';
    // find-my-way prints a wildcard that follows a route without the "/" between them (`/objects` then `*`).
    const label = match[2] === '*' && !parent.endsWith('/') ? '/*' : match[2]!;
    const path = parent + label;
    stack[depth] = path;
    stack.length = depth + 1;
    for (const method of (match[3] ?? '').split(',').map((m) => m.trim())) {
      if (method && method !== '-') out.add(key(method, path));
    }
  }
  return out;
}

describe.each(BACKENDS)('OpenAPI description on %s', (backend) => {
  let t: TestApp;
  let routes: Route[];
  let doc: OpenApiDoc;
  let served: Awaited<ReturnType<TestApp['app']['inject']>>;

  beforeAll(async () => {
    registered.length = 0;
    t = await createTestApp({ backend });
    routes = registered
      .flatMap((r) => (Array.isArray(r.method) ? r.method : [r.method]).map((method) => ({ method: String(method), url: r.url, schema: (r.schema ?? {}) as RouteSchema })))
      .filter((r) => r.method !== 'HEAD');
    served = await t.app.inject({ method: 'GET', url: DOC_URL });
    doc = served.json() as OpenApiDoc;
  });
  afterAll(async () => t?.close());

  const apiRoutes = () => routes.filter((r) => r.url.startsWith('/api/') && r.url !== DOC_URL);
  const operationOf = (r: Route) => doc.paths[toOpenApiPath(r.url)]?.[r.method.toLowerCase()];

  it('is served without a token as an OpenAPI 3.1 document with info.version 1.0.0', () => {
    expect(served.statusCode).toBe(200);
    expect(served.headers['content-type']).toMatch(/^application\/json/);
    expect(served.headers['x-request-id']).toEqual(expect.any(String));
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.info.version).toBe('1.0.0');
    expect(doc.info.title).toBe('Waygate');
  });

  it('passes @readme/openapi-parser validation', async () => {
    const result = await validate(structuredClone(doc) as never);
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
    expect(result.specification).toBe('OpenAPI');
  });

  it('collects the same routes as printRoutes shows', () => {
    const printed = parsePrintedRoutes(t.app.printRoutes({ commonPrefix: false }));
    const collected = new Set(registered.flatMap((r) => (Array.isArray(r.method) ? r.method : [r.method]).map((m) => key(String(m), r.url))));
    expect([...printed].sort()).toEqual([...collected].sort());
    // The known surface of this issue is there, so an empty or broken collection cannot pass the checks below.
    for (const expected of ['GET /api/client/v1/token', 'GET /api/client/v1/audit/logs', 'POST /api/auth/login', 'POST /api/tokens', 'DELETE /api/tokens/:id', 'GET /api/health/ready']) {
      expect(collected).toContain(expected);
    }
  });

  it('documents every registered /api and /api/client/v1 route with its method, operation id and success schema', () => {
    expect(apiRoutes().length).toBeGreaterThanOrEqual(15);
    for (const route of apiRoutes()) {
      const label = key(route.method, route.url);
      const op = operationOf(route);
      expect(op, `${label} is missing from the document`).toBeDefined();
      // Letters and digits after a lower-case letter (`a2a.card`: the protocol's name has a digit).
      expect(op!.operationId, label).toMatch(/^[a-z][A-Za-z0-9]*\.[a-z][A-Za-z0-9]*$/);
      expect(op!.operationId, label).toBe(route.schema.operationId);
      const successCodes = Object.keys(op!.responses ?? {}).filter((code) => code === '200' || code === '201');
      expect(successCodes, `${label} documents no 200/201 response`).toHaveLength(1);
      // Raw bytes (a document-store object) are described as binary, batch results as JSONL, not as a JSON object.
      if (op!.responses![successCodes[0]!]!.content?.['application/octet-stream']) {
        expect(route.schema.operationId).toBe('files.getObject');
        continue;
      }
      if (op!.responses![successCodes[0]!]!.content?.['application/jsonl']) {
        expect(route.schema.operationId).toBe('batches.results');
        continue;
      }
      const schema = op!.responses![successCodes[0]!]!.content?.['application/json']?.schema;
      expect(schema?.type, `${label} ${successCodes[0]} has no JSON schema`).toBe('object');
      const declared = route.schema.response?.[successCodes[0]!];
      expect(schema!.required ?? [], label).toEqual(declared?.required ?? []);
    }
  });

  it('lists nothing the app does not serve, and hides the description route itself', () => {
    expect(doc.paths[DOC_URL]).toBeUndefined();
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const method of Object.keys(operations)) {
        expect(t.app.hasRoute({ method: method.toUpperCase() as 'GET', url: toFastifyPath(path) }), `${method} ${path}`).toBe(true);
      }
    }
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => key(m, toFastifyPath(path))));
    expect(documented.sort()).toEqual(apiRoutes().map((r) => key(r.method, r.url)).sort());
  });

  it('gives every route that takes a body a requestBody schema with the same fields', () => {
    const withBody = apiRoutes().filter((r) => r.schema.body);
    expect(withBody.map((r) => r.schema.operationId).sort()).toEqual(
      expect.arrayContaining(['auth.login', 'projects.create', 'tenants.create', 'tokens.create', 'users.create']),
    );
    for (const route of apiRoutes()) {
      const label = key(route.method, route.url);
      const requestBody = operationOf(route)!.requestBody;
      if (!route.schema.body) {
        expect(requestBody?.required ?? false, `${label} takes no body, so it must not require one`).toBe(false);
        continue;
      }
      const schema = requestBody?.content?.['application/json']?.schema;
      expect(schema, `${label} has no requestBody schema`).toBeDefined();
      expect(schema!.type, label).toBe('object');
      expect(Object.keys(schema!.properties ?? {}).sort(), label).toEqual(Object.keys(route.schema.body.properties ?? {}).sort());
      expect([...(schema!.required ?? [])].sort(), label).toEqual([...(route.schema.body.required ?? [])].sort());
    }
  });

  // Regression: answers every route can give were not listed (a non-JSON body's 415, an unreachable database's 503).
  it('lists 503 for every route and 415 for every method that carries a body, except where any media type is taken', () => {
    for (const route of apiRoutes()) {
      const codes = Object.keys(operationOf(route)!.responses ?? {});
      const label = key(route.method, route.url);
      expect(codes, label).toContain('503');
      const takesAnyType = (route.schema as { consumes?: string[] }).consumes?.includes('*/*') === true;
      if (['POST', 'PUT', 'PATCH', 'DELETE'].includes(route.method)) expect(codes.includes('415'), label).toBe(!takesAnyType);
    }
    // Regression: the document store's upload takes any bytes, yet was described as answering 415.
    const upload = apiRoutes().find((route) => route.method === 'PUT' && route.url.includes('/objects/'));
    expect(Object.keys(operationOf(upload!)!.responses ?? {})).not.toContain('415');
  });

  it('documents query and path parameters', () => {
    for (const route of apiRoutes()) {
      const label = key(route.method, route.url);
      const parameters = operationOf(route)!.parameters ?? [];
      for (const name of Object.keys(route.schema.querystring?.properties ?? {})) {
        expect(parameters.some((p) => p.in === 'query' && p.name === name), `${label} query ${name}`).toBe(true);
      }
      for (const name of [...route.url.matchAll(/:(\w+)/g)].map((m) => m[1]!)) {
        const param = parameters.find((p) => p.in === 'path' && p.name === name);
        expect(param?.required, `${label} path parameter ${name}`).toBe(true);
      }
    }
    const audit = doc.paths['/api/client/v1/audit/logs']!.get!.parameters!.map((p) => p.name).sort();
    expect(audit).toEqual(['action', 'actorUserId', 'from', 'limit', 'method', 'outcome', 'q', 'service', 'skip', 'to']);
  });

  it('declares the credential of every guarded route: API token on the client API, session on the dashboard', () => {
    for (const route of apiRoutes()) {
      const label = key(route.method, route.url);
      const op = operationOf(route)!;
      if (!ROUTE_PERMISSIONS[op.operationId!]) {
        expect(op.security ?? [], `${label} is public`).toEqual([]);
      } else if (route.url.startsWith('/api/client/v1/')) {
        expect(op.security, label).toEqual([{ bearer: [] }]);
      } else {
        expect(op.security, label).toEqual([{ session: [] }]);
      }
    }
  });

  it('describes failures with the { error: { message, type } } shape and keeps operation ids unique', () => {
    const ids = apiRoutes().map((r) => operationOf(r)!.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const route of apiRoutes()) {
      for (const [code, response] of Object.entries(operationOf(route)!.responses ?? {})) {
        if (!/^4\d\d$/.test(code)) continue;
        const schema = response.content?.['application/json']?.schema;
        expect(schema?.required, `${key(route.method, route.url)} ${code}`).toEqual(['error']);
        expect((schema!.properties!.error as JsonSchema).required).toEqual(['message', 'type']);
      }
    }
  });
});
