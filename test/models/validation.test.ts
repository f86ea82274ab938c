import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toJson } from '../../src/db/json.js';
import { randomBase32 } from '../../src/platform/ids.js';
import { BACKENDS, call, createTestApp, type TestApp } from '../helpers/app.js';

/** Every invalid model body is a 400 with `{ error: { message } }` that creates or changes nothing; no body gives a 5xx. */

const newKey = () => `m-${randomBase32(8).toLowerCase()}`;
const PROVIDER_TYPES = ['openai-compatible', 'azure-openai', 'anthropic', 'local', 'mock'];
const CAPABILITIES = ['chat', 'embeddings', 'moderation', 'tts', 'stt'];

function expect400(res: LightMyRequestResponse, what: string): void {
  expect(res.statusCode, `${what}: ${res.body}`).toBe(400);
  const body = res.json();
  expect(Object.keys(body), what).toEqual(['error']);
  expect(typeof body.error.message, what).toBe('string');
  expect(body.error.message.length, what).toBeGreaterThan(0);
}

type Body = { [field: string]: unknown; provider: Record<string, unknown> };

/** A valid create body with `mutate` applied. */
function body(mutate: (b: Body) => void = () => undefined): Record<string, unknown> {
  const b: Body = { key: newKey(), provider: { type: 'openai-compatible', baseUrl: 'http://127.0.0.1:9/v1' }, capabilities: ['chat'] };
  mutate(b);
  return b;
}

const INVALID_CREATES: [string, Record<string, unknown>][] = [
  ['key with a slash', body((b) => (b.key = 'openai/gpt-4o'))],
  ['key with spaces', body((b) => (b.key = 'my model'))],
  ['key of 101 characters', body((b) => (b.key = 'k'.repeat(101)))],
  ['key starting with a dash', body((b) => (b.key = '-model'))],
  ['empty key', body((b) => (b.key = ''))],
  ['missing key', body((b) => delete b.key)],
  ['unknown provider type', body((b) => (b.provider.type = 'openai'))],
  ['missing provider', body((b) => Reflect.deleteProperty(b, 'provider'))],
  ['baseUrl that is not a URL', body((b) => (b.provider.baseUrl = 'not a url'))],
  ['ftp:// baseUrl', body((b) => (b.provider.baseUrl = 'ftp://example.com/v1'))],
  ['file: baseUrl', body((b) => (b.provider.baseUrl = 'file:///etc/passwd'))],
  ['baseUrl with user and password', body((b) => (b.provider.baseUrl = 'http://user:secret@127.0.0.1:9/v1'))],
  ['baseUrl with a user only', body((b) => (b.provider.baseUrl = 'https://sk-abc@api.example.com/v1'))],
  ['baseUrl with a query', body((b) => (b.provider.baseUrl = 'https://res.openai.azure.com/?x=1'))],
  ['baseUrl with a fragment', body((b) => (b.provider.baseUrl = 'https://api.example.com/v1#x'))],
  // Regression: an empty query or fragment parses as none, and calls then went to `/v1?/chat/completions`.
  ['baseUrl ending in a bare ?', body((b) => (b.provider.baseUrl = 'http://127.0.0.1:9/v1?'))],
  ['baseUrl ending in a bare #', body((b) => (b.provider.baseUrl = 'http://127.0.0.1:9/v1#'))],
  // The parser drops these, so the URL it checked would not be the text calls are sent to.
  ['baseUrl with a line break', body((b) => (b.provider.baseUrl = 'http://127.0.0.1:9/v\n1'))],
  ['baseUrl with a tab', body((b) => (b.provider.baseUrl = 'http://127.0.0.1:9/\tv1'))],
  ['baseUrl with a trailing space', body((b) => (b.provider.baseUrl = 'http://127.0.0.1:9/v1 '))],
  ['azure-openai without baseUrl', body((b) => (b.provider = { type: 'azure-openai', apiKey: 'k' }))],
  ['azure-openai with baseUrl null', body((b) => (b.provider = { type: 'azure-openai', baseUrl: null }))],
  ['local provider with a foreign upstreamModel', body((b) => ((b.provider = { type: 'local' }), (b.upstreamModel = 'gpt-4o')))],
  ['local provider whose key is its upstreamModel', body((b) => (b.provider = { type: 'local' }))],
  ['empty capabilities', body((b) => (b.capabilities = []))],
  ['local-chat with moderation', body((b) => ((b.provider = { type: 'local' }), (b.upstreamModel = 'local-chat'), (b.capabilities = ['chat', 'moderation'])))],
  ['local-embed with chat', body((b) => ((b.provider = { type: 'local' }), (b.upstreamModel = 'local-embed'), (b.capabilities = ['chat'])))],
  ['azure-openai with moderation', body((b) => ((b.provider = { type: 'azure-openai', baseUrl: 'https://r.openai.azure.com' }), (b.capabilities = ['moderation'])))],
  ['anthropic with embeddings', body((b) => ((b.provider = { type: 'anthropic' }), (b.capabilities = ['chat', 'embeddings'])))],
  ['mock with tts', body((b) => ((b.provider = { type: 'mock' }), (b.capabilities = ['tts'])))],
  ['apiVersion on an openai-compatible model', body((b) => (b.provider.apiVersion = '2024-10-21'))],
  ['deployment on an anthropic model', body((b) => (b.provider = { type: 'anthropic', deployment: 'd' }))],
  ['mock options on an openai-compatible model', body((b) => (b.provider.mock = { failureRate: 1 }))],
  ['unknown capability', body((b) => (b.capabilities = ['chat', 'images']))],
  ['missing capabilities', body((b) => delete b.capabilities)],
  ['unknown fallback key', body((b) => (b.fallbacks = ['no-such-model']))],
  ['self-fallback', body((b) => (b.fallbacks = [b.key]))],
  ['duplicate fallbacks', body((b) => (b.fallbacks = ['local-chat', 'local-chat']))],
  ['fallback key with a slash', body((b) => (b.fallbacks = ['a/b']))],
  ['Authorization header', body((b) => (b.provider.headers = { Authorization: 'Bearer x' }))],
  ['authorization header in lower case', body((b) => (b.provider.headers = { authorization: 'Bearer x' }))],
  ['api-key header', body((b) => (b.provider.headers = { 'api-key': 'x' }))],
  ['X-Api-Key header', body((b) => (b.provider.headers = { 'X-Api-Key': 'x' }))],
  ['Host header', body((b) => (b.provider.headers = { Host: 'evil.example' }))],
  ['Content-Length header', body((b) => (b.provider.headers = { 'Content-Length': '0' }))],
  ['Expect header', body((b) => (b.provider.headers = { Expect: '100-continue' }))],
  ['Keep-Alive header', body((b) => (b.provider.headers = { 'Keep-Alive': 'timeout=5' }))],
  ['Upgrade header', body((b) => (b.provider.headers = { Upgrade: 'h2c' }))],
  ['Accept-Encoding header', body((b) => (b.provider.headers = { 'Accept-Encoding': 'gzip' }))],
  // Regression: set per call by Waygate, these were sent twice (joined) when named in other letters than Waygate's.
  ['X-Request-Id header', body((b) => (b.provider.headers = { 'X-Request-Id': 'mine' }))],
  ['Accept header', body((b) => (b.provider.headers = { Accept: 'text/html' }))],
  ['Anthropic-Version header', body((b) => (b.provider = { type: 'anthropic', headers: { 'Anthropic-Version': '1999-01-01' } }))],
  ['one header named twice in different letters', body((b) => (b.provider.headers = { 'X-Team': 'a', 'x-team': 'b' }))],
  ['header name with a space', body((b) => (b.provider.headers = { 'X Team': 'x' }))],
  ['header name with a colon', body((b) => (b.provider.headers = { 'X-Team:': 'x' }))],
  ['empty header name', body((b) => (b.provider.headers = { '': 'x' }))],
  ['non-ASCII header name', body((b) => (b.provider.headers = { 'X-Équipe': 'x' }))],
  ['header name with a newline', body((b) => (b.provider.headers = { 'X-A\r\nX-B': 'x' }))],
  ['negative input price', body((b) => (b.pricing = { inputPer1M: -1, outputPer1M: 1, currency: 'USD' }))],
  ['negative output price', body((b) => (b.pricing = { inputPer1M: 1, outputPer1M: -0.01, currency: 'USD' }))],
  ['input price that makes costs overflow', body((b) => (b.pricing = { inputPer1M: 1e308, outputPer1M: 1, currency: 'USD' }))],
  ['output price past 10^12', body((b) => (b.pricing = { inputPer1M: 1, outputPer1M: 1.000001e12, currency: 'USD' }))],
  ['lower-case currency', body((b) => (b.pricing = { inputPer1M: 1, outputPer1M: 1, currency: 'usd' }))],
  ['two-letter currency', body((b) => (b.pricing = { inputPer1M: 1, outputPer1M: 1, currency: 'US' }))],
  ['currency word', body((b) => (b.pricing = { inputPer1M: 1, outputPer1M: 1, currency: 'DOLLAR' }))],
  ['pricing without currency', body((b) => (b.pricing = { inputPer1M: 1, outputPer1M: 1 }))],
  ['price as a string', body((b) => (b.pricing = { inputPer1M: '1', outputPer1M: 1, currency: 'USD' }))],
  ['unknown top-level field', body((b) => (b.apiKey = 'sk-top-level'))],
  ['unknown provider field', body((b) => (b.provider.secret = 'x'))],
  ['unknown pricing field', body((b) => (b.pricing = { inputPer1M: 1, outputPer1M: 1, currency: 'USD', per: 'token' }))],
  ['unknown guardrails field', body((b) => (b.guardrails = { input: [], both: [] }))],
  ['unknown mock field', body((b) => (b.provider = { type: 'mock', mock: { reply: 'x', speed: 2 } }))],
  ['builtIn set by the client', body((b) => (b.builtIn = true))],
  ['mock failureRate above 1', body((b) => (b.provider = { type: 'mock', mock: { failureRate: 1.5 } }))],
  ['empty name', body((b) => (b.name = ''))],
  ['empty upstreamModel', body((b) => (b.upstreamModel = ''))],
];

// ---------------------------------------------------------------- the property

/** Well-formed strings only: lone surrogates have their own (PostgreSQL-failing) tests below. */
const str = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.constantFrom('', ' ', '😀', '\u202E', "'; DROP TABLE models; --", 'local-chat', 'x'.repeat(2001), '__proto__', 'constructor'),
);
const junk = fc.oneof(fc.jsonValue({ maxDepth: 2 }), str);
const validKey = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,12}$/);
const validProvider = fc.oneof(
  fc.record({ type: fc.constantFrom('openai-compatible', 'anthropic'), baseUrl: fc.constantFrom('http://127.0.0.1:9/v1', 'https://api.example.com/v1', null), apiKey: fc.oneof(fc.string({ minLength: 1, maxLength: 20 }), fc.constant(null)) }, { requiredKeys: ['type'] }),
  fc.record({ type: fc.constant('azure-openai'), baseUrl: fc.constant('https://r.openai.azure.com'), apiVersion: fc.constantFrom('2024-10-21', null), deployment: fc.constantFrom('d', null) }, { requiredKeys: ['type', 'baseUrl'] }),
  fc.record({ type: fc.constant('mock'), mock: fc.record({ reply: fc.string({ maxLength: 20 }), latencyMs: fc.constant(0), failureRate: fc.double({ min: 0, max: 1, noNaN: true }) }, { requiredKeys: [] }) }, { requiredKeys: ['type'] }),
);
/** What the registry lets each provider type offer (models/service.ts offeredCapabilities). */
const OFFERED_CAPABILITIES: Record<string, readonly string[]> = {
  'openai-compatible': CAPABILITIES,
  anthropic: ['chat'],
  'azure-openai': ['chat', 'embeddings', 'tts', 'stt'],
  mock: ['chat', 'embeddings', 'moderation'],
};
const validBody = fc.record(
  {
    key: validKey,
    name: fc.string({ minLength: 1, maxLength: 20 }),
    provider: validProvider,
    capabilities: fc.subarray(CAPABILITIES, { minLength: 1 }),
    pricing: fc.oneof(fc.record({ inputPer1M: fc.double({ min: 0, max: 1e6, noNaN: true }), outputPer1M: fc.double({ min: 0, max: 1e6, noNaN: true }), currency: fc.constantFrom('USD', 'EUR') }), fc.constant(null)),
    // Named guardrails must exist in the project, and this one has none: a name is one of the mutations.
    guardrails: fc.record({ input: fc.constant([]), output: fc.constant([]) }, { requiredKeys: [] }),
    fallbacks: fc.subarray(['local-chat', 'local-embed']),
  },
  { requiredKeys: ['key', 'provider', 'capabilities'] },
).map((body) => {
  // Kept to what the provider type offers, so that most unmutated bodies are valid and the property reaches the
  // database; a capability the type lacks is one of the mutations.
  const offered = OFFERED_CAPABILITIES[body.provider.type]!;
  const capabilities = body.capabilities.filter((capability) => offered.includes(capability));
  return { ...body, capabilities: capabilities.length > 0 ? capabilities : ['chat'] };
});
/** Where a mutation lands: a top-level field, a provider field, or a field nobody knows. */
const FIELD_PATHS = [
  ['key'], ['name'], ['upstreamModel'], ['capabilities'], ['pricing'], ['guardrails'], ['fallbacks'], ['provider'],
  ['provider', 'type'], ['provider', 'baseUrl'], ['provider', 'apiKey'], ['provider', 'headers'], ['provider', 'mock'],
  ['provider', 'apiVersion'], ['provider', 'deployment'], ['extra'], ['provider', 'extra'],
] as const;
const fieldValue = fc.oneof(
  junk,
  fc.constantFrom(...PROVIDER_TYPES),
  fc.constantFrom(null, [], {}, 'ftp://h', 'http://u:p@h/v1', 'not a url', 'local', 'azure-openai', ['chat', 'chat'], ['local-chat', 'local-chat'], { Host: 'h' }, { 'x y': 'v' }, { 'X-Ok': 'v' }),
  fc.record({ inputPer1M: fc.double(), outputPer1M: fc.double(), currency: str }, { requiredKeys: [] }),
);
const mutation = fc.tuple(fc.constantFrom(...FIELD_PATHS), fieldValue);
const bodyArb = fc.oneof(
  { weight: 6, arbitrary: fc.tuple(validBody, fc.array(mutation, { maxLength: 3 })) },
  { weight: 1, arbitrary: fc.tuple(junk, fc.constant([] as [readonly string[], unknown][])) },
).map(([base, mutations]) => {
  if (base === null || typeof base !== 'object' || Array.isArray(base)) return base;
  const copy = JSON.parse(JSON.stringify(base)) as Record<string, unknown>;
  for (const [path, shared] of mutations) {
    // A copy: fc.constantFrom hands out the same object every time, and a later mutation writing into it (a provider
    // that is that object) would make it cyclic for every run after.
    const value = structuredClone(shared);
    const provider = copy.provider;
    if (path.length === 1) copy[path[0]!] = value;
    else if (provider && typeof provider === 'object' && !Array.isArray(provider)) (provider as Record<string, unknown>)[path[1]!] = value;
  }
  return copy;
});

/** Throws a property's counterexample; returns how many bodies were accepted and refused. */
async function checkCreateProperty(create: (payload: unknown) => Promise<LightMyRequestResponse>): Promise<{ created: number; refused: number }> {
  const counts = { created: 0, refused: 0 };
  await fc.assert(
    fc.asyncProperty(bodyArb, async (payload) => {
      const res = await create(payload);
      const where = `${res.statusCode} ${res.body.slice(0, 300)}`;
      expect(res.statusCode, where).toBeLessThan(500);
      if (res.statusCode === 201) {
        counts.created++;
        expect(res.json().model.key, where).toBe((payload as { key: unknown }).key);
      } else {
        counts.refused++;
        expect([400, 409], where).toContain(res.statusCode);
        expect(typeof res.json().error?.message, where).toBe('string');
      }
    }),
    { numRuns: 150, interruptAfterTimeLimit: 10_000, markInterruptAsFailure: false },
  );
  return counts;
}

describe.each(BACKENDS)('model validation on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend });
  });
  afterAll(async () => t?.close());

  const create = (payload: unknown) => call(t.app, t.adminSession, { method: 'POST', url: '/api/models', payload: payload as Record<string, unknown> });
  const patch = (key: string, payload: unknown) => call(t.app, t.adminSession, { method: 'PATCH', url: `/api/models/${key}`, payload: payload as Record<string, unknown> });
  const keys = async () => ((await call(t.app, t.adminSession, { method: 'GET', url: '/api/models' })).json().models as { key: string }[]).map((m) => m.key);

  it('the valid base body is accepted (positive control for the cases below)', async () => {
    const res = await create(body());
    expect(res.statusCode, res.body).toBe(201);
    const local = await create(body((b) => ((b.provider = { type: 'local' }), (b.upstreamModel = 'local-embed'), (b.capabilities = ['embeddings']))));
    expect(local.statusCode, local.body).toBe(201);
    const azure = await create(body((b) => (b.provider = { type: 'azure-openai', baseUrl: 'https://r.openai.azure.com' })));
    expect(azure.statusCode, azure.body).toBe(201);
    const headers = await create(body((b) => (b.provider.headers = { 'X-Org_1.a~b': 'v', 'OpenAI-Organization': 'org' })));
    expect(headers.statusCode, headers.body).toBe(201);
  });

  it.each(INVALID_CREATES)('POST with %s is 400 and creates nothing', async (what, payload) => {
    const res = await create(payload);
    expect400(res, what);
    if (typeof payload.key === 'string') expect(await keys()).not.toContain(payload.key);
  });

  it('the error message names the problem', async () => {
    const messageOf = async (edit: (b: Body) => void) => (await create(body(edit))).json().error.message as string;
    expect(await messageOf((b) => (b.provider.baseUrl = 'http://127.0.0.1:9/v1?'))).toMatch(/query .*fragment/);
    expect(await messageOf((b) => (b.provider.baseUrl = 'http://127.0.0.1:9/v1#'))).toMatch(/query .*fragment/);
    expect(await messageOf((b) => (b.provider.baseUrl = 'http://127.0.0.1:9/v1 '))).toMatch(/white space/);
    expect(await messageOf((b) => (b.provider.headers = { 'X-Request-Id': 'x' }))).toMatch(/may not set X-Request-Id; Waygate sets it/);
    expect(await messageOf((b) => (b.provider.headers = { 'X-Team': 'a', 'x-team': 'b' }))).toMatch(/names x-team twice/);
    expect((await create(body((b) => (b.apiKey = 'x')))).json().error.message).toContain('apiKey');
    expect((await create(body((b) => (b.provider.headers = { Authorization: 'x' })))).json().error.message).toContain('Authorization');
    expect((await create(body((b) => (b.fallbacks = ['no-such-model'])))).json().error.message).toContain('no-such-model');
    expect((await create(body((b) => (b.provider = { type: 'azure-openai' })))).json().error.message).toContain('baseUrl');
    // A key pasted into baseUrl is not echoed back.
    const pasted = await create(body((b) => (b.provider.baseUrl = 'sk-proj-SECRETKEY123')));
    expect(pasted.statusCode).toBe(400);
    expect(pasted.json().error.message).toContain('baseUrl');
    expect(pasted.body).not.toContain('SECRETKEY123');
  });

  it('invalid PATCH bodies are 400 and leave the model unchanged', async () => {
    const key = newKey();
    const created = await create({ key, name: 'Original', provider: { type: 'mock' }, capabilities: ['chat'], fallbacks: ['local-chat'] });
    expect(created.statusCode, created.body).toBe(201);
    const original = created.json().model;
    const cases: [string, Record<string, unknown>][] = [
      ['unknown field', { name: 'x', colour: 'red' }],
      ['key in a patch', { key: 'renamed' }],
      ['empty capabilities', { capabilities: [] }],
      ['unknown capability', { capabilities: ['vision'] }],
      ['self-fallback', { fallbacks: [key] }],
      ['unknown fallback', { fallbacks: ['missing-model'] }],
      ['duplicate fallbacks', { fallbacks: ['local-embed', 'local-embed'] }],
      ['unknown provider type', { provider: { type: 'gemini' } }],
      ['azure-openai without baseUrl', { provider: { type: 'azure-openai' } }],
      ['local with its own key as upstreamModel', { provider: { type: 'local' } }],
      ['ftp baseUrl', { provider: { baseUrl: 'ftp://example.com' } }],
      ['credentials in baseUrl', { provider: { baseUrl: 'http://a:b@example.com/v1' } }],
      ['reserved header', { provider: { headers: { 'API-KEY': 'x' } } }],
      ['invalid header name', { provider: { headers: { 'a b': 'x' } } }],
      ['negative price', { pricing: { inputPer1M: -5, outputPer1M: 0, currency: 'USD' } }],
      ['bad currency', { pricing: { inputPer1M: 1, outputPer1M: 0, currency: 'usd' } }],
      ['unknown provider field', { provider: { region: 'eu' } }],
    ];
    for (const [what, payload] of cases) expect400(await patch(key, payload), what);
    const now = (await call(t.app, t.adminSession, { method: 'GET', url: '/api/models' })).json().models.find((m: { key: string }) => m.key === key);
    expect(now).toEqual(original);
  });

  // Regression: settings of one provider type stayed on a model moved to another, shown and unused, and came back
  // into force on a move back (a mock failure rate of 1, say).
  it("a model moved to another provider type drops the old type's own settings", async () => {
    const key = newKey();
    const created = await create({ key, provider: { type: 'mock', mock: { failureRate: 1 } }, capabilities: ['chat'] });
    expect(created.statusCode, created.body).toBe(201);
    const moved = await patch(key, { provider: { type: 'azure-openai', baseUrl: 'https://r.openai.azure.com', apiVersion: '2024-06-01', deployment: 'd' } });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(moved.json().model.provider).toMatchObject({ type: 'azure-openai', apiVersion: '2024-06-01', deployment: 'd', mock: null });
    const back = await patch(key, { provider: { type: 'mock', baseUrl: null } });
    expect(back.statusCode, back.body).toBe(200);
    expect(back.json().model.provider).toMatchObject({ type: 'mock', apiVersion: null, deployment: null, mock: null });
    // A capability the new type does not offer is named.
    const refused = await patch(key, { provider: { type: 'anthropic', baseUrl: null }, capabilities: ['embeddings'] });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error.message).toContain('embeddings');
  });

  it('a model stored before these checks (a capability its provider lacks, another type\'s settings) stays editable', async () => {
    const key = newKey();
    expect((await create({ key, provider: { type: 'anthropic' }, capabilities: ['chat'] })).statusCode).toBe(201);
    const { dialect, db } = t.ctx.database;
    await db
      .updateTable('models')
      .set({ capabilities: toJson(dialect, ['chat', 'embeddings']) as string, provider: toJson(dialect, { type: 'anthropic', baseUrl: null, apiVersion: '2024-06-01', deployment: 'old', mock: { failureRate: 1 }, headerNames: [], hasApiKey: false }) as string })
      .where('key', '=', key)
      .execute();
    // Another type's settings are not read: they neither show nor come back on a move to that type.
    const shown = (await call(t.app, t.adminSession, { method: 'GET', url: '/api/models' })).json().models.find((m: { key: string }) => m.key === key);
    expect(shown.provider).toMatchObject({ type: 'anthropic', apiVersion: null, deployment: null, mock: null });
    const priced = await patch(key, { pricing: { inputPer1M: 1, outputPer1M: 2, currency: 'USD' } });
    expect(priced.statusCode, priced.body).toBe(200);
    expect(priced.json().model.capabilities).toEqual(['chat', 'embeddings']);
    // Sent back as shown, the provider is accepted.
    expect((await patch(key, { provider: shown.provider.type === 'anthropic' ? { type: 'anthropic', baseUrl: null, apiVersion: null, deployment: null, mock: null } : {} })).statusCode).toBe(200);
    const toMock = await patch(key, { provider: { type: 'mock' }, capabilities: ['chat'] });
    expect(toMock.statusCode, toMock.body).toBe(200);
    expect(toMock.json().model.provider.mock).toBeNull();
    // Changing the capabilities checks them.
    expect((await patch(key, { capabilities: ['chat', 'tts'] })).statusCode).toBe(400);
  });

  it('switching a model to local needs a local upstreamModel in the same patch', async () => {
    const key = newKey();
    expect((await create({ key, provider: { type: 'mock' }, capabilities: ['chat'] })).statusCode).toBe(201);
    const res = await patch(key, { provider: { type: 'local' }, upstreamModel: 'local-chat' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().model).toMatchObject({ provider: { type: 'local' }, upstreamModel: 'local-chat' });
  });

  it('property: arbitrary create bodies never give a 5xx, and failures are {error:{message}}', async () => {
    const counts = await checkCreateProperty((payload) =>
      call(t.app, t.adminSession, { method: 'POST', url: '/api/models', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(payload) }),
    );
    // The generator reaches the database (some bodies are valid), and the registry still answers afterwards.
    expect(counts.created).toBeGreaterThan(0);
    expect(counts.refused).toBeGreaterThan(0);
    expect((await call(t.app, t.adminSession, { method: 'GET', url: '/api/models' })).statusCode).toBe(200);
  }, 60_000);

  // Regression: a lone UTF-16 surrogate in a string bound for a JSONB column made PostgreSQL refuse the insert (500).
  // The body parser now refuses such bodies with 400 on every backend.
  const SURROGATE_CASES: [string, Record<string, unknown>][] = [
    ['a guardrail name', body((b) => (b.guardrails = { input: ['\uD800'] }))],
    ['the mock reply', body((b) => (b.provider = { type: 'mock', mock: { reply: 'a\uDC00b' } }))],
    ['the baseUrl path', body((b) => (b.provider.baseUrl = 'http://127.0.0.1:9/\uD800'))],
  ];
  it.each(SURROGATE_CASES)('a lone surrogate in %s is stored or refused, never a 5xx', async (_what, payload) => {
    const res = await create(payload);
    expect(res.statusCode, res.body).toBeLessThan(500);
  });

  // Regression: header values and API keys undici refuses (CR/LF, characters above U+00FF) were stored with 201, and
  // every call through the model then failed with 502.
  const BAD_VALUES: [string, Record<string, unknown>][] = [
    ['a header value with CR/LF', body((b) => (b.provider.headers = { 'X-Team': 'a\r\nX-Injected: yes' }))],
    ['a header value beyond Latin-1', body((b) => (b.provider.headers = { 'X-Team': 'team €' }))],
    ['an API key with a newline', body((b) => (b.provider.apiKey = 'sk-abc\nX-Injected: yes'))],
  ];
  it.each(BAD_VALUES)('POST with %s is 400 (it cannot be sent as an HTTP header)', async (what, payload) => {
    expect400(await create(payload), what);
  });

  it('a lone surrogate in a text column (name) is stored or refused, never a 5xx', async () => {
    const res = await create(body((b) => (b.name = 'n\uD800')));
    expect(res.statusCode, res.body).toBeLessThan(500);
  });
});
