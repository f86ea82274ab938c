import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, call, otherProject } from '../helpers/app.js';
import { CLIENT, post, registerFakeModel, setupInference, UPSTREAM_KEY, type InferenceSetup } from '../helpers/inference.js';
import { registerModel } from '../helpers/models.js';

/**
 * The OpenAI-compatible client endpoints against a fake OpenAI-compatible upstream: what is forwarded upstream, what
 * comes back, the headers every answer carries, and how bad input is refused before any upstream call.
 */

function expectGatewayHeaders(res: LightMyRequestResponse): void {
  const overhead = res.headers['x-waygate-overhead-ms'];
  expect(typeof overhead, `x-waygate-overhead-ms on ${res.statusCode}`).toBe('string');
  expect(overhead).toMatch(/^\d+(\.\d+)?$/);
  expect(Number(overhead)).toBeGreaterThanOrEqual(0);
  expect(res.headers['x-request-id']).toMatch(/^[\w.:@/+=-]{1,128}$/);
}

function expectClientError(res: LightMyRequestResponse, status: number, type: string): { message: string; type: string; code?: string } {
  expect(res.statusCode, res.body).toBe(status);
  const error = res.json().error;
  expect(typeof error.message).toBe('string');
  expect(error.message.length).toBeGreaterThan(0);
  expect(error.type).toBe(type);
  return error;
}

describe.each(BACKENDS)('OpenAI-compatible client endpoints on %s', (backend) => {
  let s: InferenceSetup;
  let full: string;
  let chatOnly: string;
  let keyless: string;
  const lastUpstream = () => s.fake.requests.at(-1)!;

  beforeAll(async () => {
    s = await setupInference({ backend });
    full = await registerFakeModel(s.t, s.fake, { upstreamModel: 'gpt-upstream-full' });
    chatOnly = await registerFakeModel(s.t, s.fake, { upstreamModel: 'gpt-upstream-chat', capabilities: ['chat'] });
    keyless = await registerFakeModel(s.t, s.fake, { provider: { type: 'openai-compatible', baseUrl: s.fake.baseUrl, headers: { 'x-upstream-tenant': 'team-7' } } });
  });
  afterAll(async () => s.close());

  it('non-streamed chat: the upstream body comes back byte for byte; upstream gets upstreamModel, the key and the request id', async () => {
    // Odd spacing, key order and an extra field: anything but a verbatim copy would change it.
    const raw = '{ "id":"chatcmpl-raw","object":"chat.completion", "created":1700000001,"model":"gpt-upstream-full",\n"choices":[{"index":0,"message":{"role":"assistant","content":"Raw reply é"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5},"system_fingerprint":"fp_x" }';
    s.fake.queue({ raw });
    const res = await post(s.t, s.token.value, '/chat/completions', { model: full, messages: [{ role: 'user', content: 'Hi' }], temperature: 0.25, user: 'end-user-1', custom_field: { a: [1, 2] } }, { 'x-request-id': 'req-forward-1' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toBe(raw);
    expect(res.headers['x-request-id']).toBe('req-forward-1');
    expectGatewayHeaders(res);

    const upstream = lastUpstream();
    expect(upstream.method).toBe('POST');
    expect(upstream.path).toBe('/v1/chat/completions');
    expect(upstream.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(upstream.headers['x-request-id']).toBe('req-forward-1');
    expect(upstream.body).toEqual({ model: 'gpt-upstream-full', messages: [{ role: 'user', content: 'Hi' }], temperature: 0.25, user: 'end-user-1', custom_field: { a: [1, 2] } });
    // The client's own Waygate token never travels upstream.
    expect(JSON.stringify(upstream.headers)).not.toContain(s.token.value);
  });

  it('a body request_id becomes the request id when no header names one, and is not forwarded upstream', async () => {
    const res = await post(s.t, s.token.value, '/chat/completions', { model: full, messages: [{ role: 'user', content: 'Hi' }], request_id: 'req-from-body' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['x-request-id']).toBe('req-from-body');
    expect(lastUpstream().headers['x-request-id']).toBe('req-from-body');
    expect(lastUpstream().body).not.toHaveProperty('request_id');
  });

  it('a model without an apiKey sends no Authorization upstream; its extra headers are sent', async () => {
    const res = await post(s.t, s.token.value, '/chat/completions', { model: keyless, messages: [{ role: 'user', content: 'Hi' }] });
    expect(res.statusCode, res.body).toBe(200);
    expect(lastUpstream().headers.authorization).toBeUndefined();
    expect(lastUpstream().headers['x-upstream-tenant']).toBe('team-7');
    expect(lastUpstream().headers['content-type']).toBe('application/json');
  });

  it('without an X-Request-Id a fresh id is made, echoed to the client and sent upstream', async () => {
    const res = await post(s.t, s.token.value, '/chat/completions', { model: chatOnly, messages: [{ role: 'user', content: 'Hi' }] });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.object).toBe('chat.completion');
    expect(body.model).toBe('gpt-upstream-chat');
    expect(body.choices[0].message.content).toBe('Hello from the fake upstream');
    expect(body.usage).toEqual({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
    const id = res.headers['x-request-id'];
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(lastUpstream().headers['x-request-id']).toBe(id);
    expect(lastUpstream().body.model).toBe('gpt-upstream-chat');
    expectGatewayHeaders(res);
  });

  it('embeddings with float encoding are forwarded, and the answer is the upstream one', async () => {
    const res = await post(s.t, s.token.value, '/embeddings', { model: full, input: ['one', 'two'], encoding_format: 'float', dimensions: 3 });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      object: 'list',
      data: [
        { object: 'embedding', index: 0, embedding: [0.1, 0.2, 0.3] },
        { object: 'embedding', index: 1, embedding: [0.1, 0.2, 0.3] },
      ],
      model: 'gpt-upstream-full',
      usage: { prompt_tokens: 10, total_tokens: 10 },
    });
    expect(lastUpstream().path).toBe('/v1/embeddings');
    expect(lastUpstream().headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(lastUpstream().body).toEqual({ model: 'gpt-upstream-full', input: ['one', 'two'], encoding_format: 'float', dimensions: 3 });
    expectGatewayHeaders(res);
  });

  it('embeddings with base64 encoding (the openai SDK default) are forwarded as base64, not converted', async () => {
    const res = await post(s.t, s.token.value, '/embeddings', { model: full, input: 'hello', encoding_format: 'base64' });
    expect(res.statusCode, res.body).toBe(200);
    expect(lastUpstream().body.encoding_format).toBe('base64');
    const data = res.json().data as { embedding: unknown }[];
    expect(data).toHaveLength(1);
    expect(typeof data[0]!.embedding).toBe('string');
    const bytes = Buffer.from(data[0]!.embedding as string, 'base64');
    const floats = [...new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4)];
    expect(floats).toEqual([...new Float32Array([0.1, 0.2, 0.3])]);
  });

  it('moderations are forwarded with the upstream model and answered with the upstream result', async () => {
    const res = await post(s.t, s.token.value, '/moderations', { model: full, input: ['a friendly text', 'please flag me'] });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.id).toBe('modr-fake');
    expect(body.model).toBe('gpt-upstream-full');
    expect(body.results.map((r: { flagged: boolean }) => r.flagged)).toEqual([false, true]);
    expect(lastUpstream().path).toBe('/v1/moderations');
    expect(lastUpstream().body).toEqual({ model: 'gpt-upstream-full', input: ['a friendly text', 'please flag me'] });
    expectGatewayHeaders(res);
  });

  // OpenAI's SDKs leave `model` out of a moderation by default (OpenAI answers with its own default model).
  it("moderations without a model go to the project's one moderation model; none or several is a 400 saying so", async () => {
    const several = await post(s.t, s.token.value, '/moderations', { input: 'x' });
    expect(several.statusCode, several.body).toBe(400);
    expect(several.json().error.message).toMatch(/body\.model is required: the project has several moderation models \(.*\)/);

    const other = await otherProject(s.t, `Moderation ${Date.now()}`);
    const none = await post(s.t, other.token, '/moderations', { input: 'x' });
    expect(none.statusCode, none.body).toBe(400);
    expect(none.json().error.message).toMatch(/no model with the moderation capability/);
    await registerModel(s.t, { key: 'only-moderation', provider: { type: 'openai-compatible', baseUrl: s.fake.baseUrl }, upstreamModel: 'omni-upstream', capabilities: ['moderation'] }, { project: other.id });
    const one = await post(s.t, other.token, '/moderations', { input: ['a friendly text'] });
    expect(one.statusCode, one.body).toBe(200);
    expect(lastUpstream().body).toEqual({ model: 'omni-upstream', input: ['a friendly text'] });
  });

  it('GET /models lists the built-in and registered models as an OpenAI model list', async () => {
    const res = await call(s.t.app, s.token.value, { method: 'GET', url: `${CLIENT}/models` });
    expect(res.statusCode, res.body).toBe(200);
    expectGatewayHeaders(res);
    const body = res.json() as { object: string; data: { id: string; object: string; created: number; owned_by: string; capabilities: string[] }[] };
    expect(body.object).toBe('list');
    const byId = new Map(body.data.map((m) => [m.id, m]));
    expect([...byId.keys()].sort()).toEqual([chatOnly, full, keyless, 'local-chat', 'local-embed'].sort());
    expect(byId.get('local-chat')).toMatchObject({ object: 'model', owned_by: 'local', capabilities: ['chat'] });
    expect(byId.get('local-embed')).toMatchObject({ object: 'model', owned_by: 'local', capabilities: ['embeddings'] });
    expect(byId.get(full)).toMatchObject({ object: 'model', owned_by: 'openai-compatible', capabilities: ['chat', 'embeddings', 'moderation'] });
    expect(byId.get(chatOnly)).toMatchObject({ object: 'model', owned_by: 'openai-compatible', capabilities: ['chat'] });
    for (const model of body.data) expect(Number.isInteger(model.created)).toBe(true);
    expect(byId.get(full)!.created).toBeGreaterThan(1_600_000_000);
    expect(JSON.stringify(body)).not.toContain(UPSTREAM_KEY);
  });

  // OpenAI's SDK retrieves one model with client.models.retrieve(id): GET /models/{model}.
  it('GET /models/{model} answers the same entry as the list, and 404 for a model the project does not have', async () => {
    const list = (await call(s.t.app, s.token.value, { method: 'GET', url: `${CLIENT}/models` })).json() as { data: { id: string }[] };
    for (const entry of list.data) {
      const one = await call(s.t.app, s.token.value, { method: 'GET', url: `${CLIENT}/models/${entry.id}` });
      expect(one.statusCode, one.body).toBe(200);
      expect(one.json()).toEqual(entry);
    }
    const missing = await call(s.t.app, s.token.value, { method: 'GET', url: `${CLIENT}/models/no-such-model` });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error.message).toContain('no-such-model');
  });

  it("GET /models/{model}: another project's model is a 404; a key longer than any model key is a 414 from the router", async () => {
    const other = await call(s.t.app, s.t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: 'Other models', key: 'other-models' } });
    expect(other.statusCode, other.body).toBe(201);
    const foreign = await registerModel(s.t, { provider: { type: 'mock' } }, { project: 'other-models' });
    const res = await call(s.t.app, s.token.value, { method: 'GET', url: `${CLIENT}/models/${foreign}` });
    expect(res.statusCode, res.body).toBe(404);
    const long = await call(s.t.app, s.token.value, { method: 'GET', url: `${CLIENT}/models/${'m'.repeat(101)}` });
    expect(long.statusCode).toBe(414);
    expect(typeof long.json().error.message).toBe('string');
  });

  it('embeddings of an empty string (or an array holding one) are a 400, as OpenAI answers', async () => {
    for (const input of ['', ['a', '']]) {
      const res = await post(s.t, s.token.value, '/embeddings', { model: full, input });
      expect(res.statusCode, res.body).toBe(400);
    }
  });

  it('error answers carry x-waygate-overhead-ms and x-request-id too', async () => {
    const res = await post(s.t, s.token.value, '/chat/completions', { model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }, { 'x-request-id': 'req-err-1' });
    expect(res.statusCode).toBe(404);
    expect(res.headers['x-request-id']).toBe('req-err-1');
    expectGatewayHeaders(res);
    // Refused by the router before any hook runs: a malformed URL, an over-long path parameter.
    for (const url of ['/api/client/v1/models/%zz', `/api/client/v1/models/${'m'.repeat(2000)}`]) {
      const refused = await call(s.t.app, s.token.value, { method: 'GET', url });
      expect([400, 414], url).toContain(refused.statusCode);
      expectGatewayHeaders(refused);
    }
  });

  describe('bad input is refused before any upstream call', () => {
    it('unknown model: 404 not_found_error on every endpoint', async () => {
      const before = s.fake.requests.length;
      for (const [path, body] of [
        ['/chat/completions', { model: 'nope', messages: [{ role: 'user', content: 'x' }] }],
        ['/chat/completions', { model: 'nope', messages: [{ role: 'user', content: 'x' }], stream: true }],
        ['/embeddings', { model: 'nope', input: 'x' }],
        ['/moderations', { model: 'nope', input: 'x' }],
      ] as const) {
        const error = expectClientError(await post(s.t, s.token.value, path, body), 404, 'not_found_error');
        expect(error.message).toContain('nope');
      }
      expect(s.fake.requests.length).toBe(before);
    });

    it('a model without the capability: 400 naming it', async () => {
      const before = s.fake.requests.length;
      const cases = [
        ['/embeddings', { model: chatOnly, input: 'x' }, 'embeddings'],
        ['/moderations', { model: chatOnly, input: 'x' }, 'moderation'],
        ['/chat/completions', { model: 'local-embed', messages: [{ role: 'user', content: 'x' }] }, 'chat'],
        ['/chat/completions', { model: 'local-embed', messages: [{ role: 'user', content: 'x' }], stream: true }, 'chat'],
        ['/embeddings', { model: 'local-chat', input: 'x' }, 'embeddings'],
      ] as const;
      for (const [path, body, capability] of cases) {
        const error = expectClientError(await post(s.t, s.token.value, path, body), 400, 'invalid_request_error');
        expect(error.message).toContain(capability);
        expect(error.message).toContain(body.model);
      }
      expect(s.fake.requests.length).toBe(before);
    });

    it('missing fields, wrong types and empty messages: 400 invalid_request_error', async () => {
      const before = s.fake.requests.length;
      const message = [{ role: 'user', content: 'x' }];
      const cases: [string, unknown][] = [
        ['/chat/completions', { messages: message }],
        ['/chat/completions', { model: full }],
        ['/chat/completions', { model: full, messages: [] }],
        ['/chat/completions', { model: full, messages: 'hello' }],
        ['/chat/completions', { model: 42, messages: message }],
        ['/chat/completions', { model: '', messages: message }],
        ['/chat/completions', { model: full, messages: [{ content: 'no role' }] }],
        ['/chat/completions', { model: full, messages: [{ role: 'wizard', content: 'x' }] }],
        ['/chat/completions', { model: full, messages: [{ role: 'user', content: 42 }] }],
        ['/chat/completions', { model: full, messages: message, stream: 'yes' }],
        ['/chat/completions', { model: full, messages: message, max_tokens: 0 }],
        ['/chat/completions', { model: full, messages: message, stream: true, stream_options: { include_usage: 'yes' } }],
        ['/chat/completions', [message]],
        ['/embeddings', { model: full }],
        ['/embeddings', { model: full, input: [] }],
        ['/embeddings', { model: full, input: 42 }],
        ['/embeddings', { model: full, input: 'x', encoding_format: 'hex' }],
        ['/embeddings', { input: 'x' }],
        ['/moderations', { model: full }],
        ['/moderations', { model: full, input: [] }],
      ];
      for (const [path, body] of cases) {
        const res = await post(s.t, s.token.value, path, body);
        expectClientError(res, 400, 'invalid_request_error');
        expectGatewayHeaders(res);
      }
      expect(s.fake.requests.length).toBe(before);
    });

    it('JSON nested deeper than 100 levels: 400 naming the limit, for any field and the local model too; 100 levels pass', async () => {
      const before = s.fake.requests.length;
      const nest = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
      const message = '[{"role":"user","content":"x"}]';
      for (const payload of [
        `{"model":"${full}","messages":${message},"extra":${nest(20_000)}}`,
        `{"model":"${full}","messages":[{"role":"user","content":"x","tool_calls":${nest(5_000)}}]}`,
        `{"model":"local-chat","messages":${message},"tools":${nest(101)}}`,
      ]) {
        const res = await call(s.t.app, s.token.value, { method: 'POST', url: `${CLIENT}/chat/completions`, payload, headers: { 'content-type': 'application/json' } });
        expect(expectClientError(res, 400, 'invalid_request_error').message).toMatch(/deeper than 100 levels/);
      }
      expect(s.fake.requests.length).toBe(before);
      // Brackets inside strings are text, not nesting.
      const deepText = await post(s.t, s.token.value, '/chat/completions', { model: 'local-chat', messages: [{ role: 'user', content: '['.repeat(500) }], extra: JSON.parse(nest(99)) });
      expect(deepText.statusCode, deepText.body).toBe(200);
    });

    it('a body that is not JSON: 400; no token: 401', async () => {
      const notJson = await call(s.t.app, s.token.value, { method: 'POST', url: `${CLIENT}/chat/completions`, payload: '{"model":', headers: { 'content-type': 'application/json' } });
      expectClientError(notJson, 400, 'invalid_request_error');
      const anonymous = await call(s.t.app, null, { method: 'POST', url: `${CLIENT}/chat/completions`, payload: { model: full, messages: [{ role: 'user', content: 'x' }] } });
      expectClientError(anonymous, 401, 'authentication_error');
    });
  });

  it('property: random JSON bodies to /chat/completions and /embeddings never get a 5xx', { timeout: 60_000 }, async () => {
    // Mostly well-formed requests with a few odd fields, so that the success paths (local models and the fake) run
    // as often as the refusals; now and then a field, or the whole body, is arbitrary JSON.
    const odd = <T>(arbitrary: fc.Arbitrary<T>) => fc.oneof({ weight: 15, arbitrary }, { weight: 1, arbitrary: fc.jsonValue() });
    const maybe = <T>(arbitrary: fc.Arbitrary<T>) => fc.option(arbitrary, { nil: undefined, freq: 2 });
    const model = (...fitting: string[]) =>
      fc.oneof({ weight: 12, arbitrary: fc.constantFrom(...fitting) }, { weight: 1, arbitrary: fc.constantFrom('local-chat', 'local-embed', full, chatOnly, 'nope', '') }, { weight: 1, arbitrary: fc.jsonValue() });
    const content = odd(fc.oneof(fc.string(), fc.constant(null), fc.array(fc.record({ type: fc.constantFrom('text', 'image_url'), text: odd(fc.string()) }), { maxLength: 3 })));
    const message = odd(fc.record({ role: fc.constantFrom('system', 'developer', 'user', 'assistant', 'tool'), content, name: maybe(fc.string()) }));
    const chatBody = fc.record({
      model: model(full, chatOnly, 'local-chat'),
      messages: odd(fc.array(message, { minLength: 1, maxLength: 4 })),
      stream: maybe(odd(fc.oneof(fc.boolean(), fc.constant(null)))),
      stream_options: maybe(odd(fc.oneof(fc.record({ include_usage: maybe(odd(fc.boolean())) }), fc.constant(null)))),
      max_tokens: maybe(odd(fc.oneof(fc.integer({ min: -1, max: 100_000 }), fc.constant(null)))),
      max_completion_tokens: maybe(odd(fc.integer({ min: 0, max: 50 }))),
      temperature: maybe(fc.jsonValue()),
      tools: maybe(fc.jsonValue()),
    });
    const embedBody = fc.record({
      model: model(full, 'local-embed'),
      input: odd(fc.oneof(fc.string(), fc.array(fc.string(), { maxLength: 4 }), fc.array(fc.nat(), { maxLength: 4 }), fc.array(fc.array(fc.nat(), { maxLength: 3 }), { maxLength: 3 }))),
      encoding_format: maybe(odd(fc.constantFrom('float', 'base64'))),
      dimensions: maybe(odd(fc.integer({ min: -1, max: 4096 }))),
    });
    const request = fc.oneof(
      { weight: 5, arbitrary: fc.tuple(fc.constant('/chat/completions'), chatBody) },
      { weight: 4, arbitrary: fc.tuple(fc.constant('/embeddings'), embedBody) },
      { weight: 1, arbitrary: fc.tuple(fc.constantFrom('/chat/completions', '/embeddings'), fc.jsonValue()) },
    );
    const seen = new Set<string>();
    await fc.assert(
      fc.asyncProperty(request, async ([path, body]) => {
        const res = await post(s.t, s.token.value, path, body);
        seen.add(res.statusCode < 300 ? 'success' : 'refusal');
        expect(res.statusCode, `${path} ${JSON.stringify(body)} -> ${res.body.slice(0, 300)}`).toBeLessThan(500);
        if (res.statusCode >= 400) {
          expect(typeof res.json().error.message).toBe('string');
          expect(typeof res.json().error.type).toBe('string');
        }
        expectGatewayHeaders(res);
      }),
      { numRuns: 100, interruptAfterTimeLimit: 40_000, markInterruptAsFailure: false },
    );
    // Both kinds of answer were exercised (about half of the requests succeed).
    expect([...seen].sort()).toEqual(['refusal', 'success']);
  });
});
