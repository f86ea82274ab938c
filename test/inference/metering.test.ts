import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOUR_MS } from '../../src/platform/time.js';
import { BACKENDS } from '../helpers/app.js';
import { defaultScope, post, registerFakeModel, setupInference, usageRowsOf, type InferenceSetup, type UsageRow } from '../helpers/inference.js';
import { chatBody } from '../helpers/models.js';

/**
 * Usage metering of the client endpoints: one usage event per model call with its attribution, tokens, cost from the
 * model's pricing, latencies, status, request and session ids; and the hourly rollups that sum them.
 */

const PRICING = { inputPer1M: 2.5, outputPer1M: 10, currency: 'USD' };
const PROMPT = 1_200;
const COMPLETION = 300;
/** (1200 x 2.5 + 300 x 10) / 1e6; with the prices swapped it would be 0.01275. */
const CHAT_COST = 0.006;

describe.each(BACKENDS)('usage metering on %s', (backend) => {
  let s: InferenceSetup;
  let scope: { tenantId: string; projectId: string; adminUserId: string };
  let priced: string;
  let calls = 0;
  const requestId = () => `req-meter-${++calls}`;

  /** The one usage event of a request. */
  async function rowOf(model: string, id: string): Promise<UsageRow> {
    const rows = (await usageRowsOf(s.t, model)).filter((r) => r.request_id === id);
    expect(rows, `usage events of ${id}`).toHaveLength(1);
    return rows[0]!;
  }

  beforeAll(async () => {
    s = await setupInference({ backend, env: { WAYGATE_UPSTREAM_RETRIES: '0' } });
    s.fake.usage = { prompt: PROMPT, completion: COMPLETION };
    scope = await defaultScope(s.t);
    priced = await registerFakeModel(s.t, s.fake, { pricing: PRICING });
  });
  afterAll(async () => s.close());

  it('a chat call: attribution, upstream tokens, cost from pricing, latencies, status, request and session ids', async () => {
    const id = requestId();
    const before = Date.now();
    const res = await post(s.t, s.token.value, '/chat/completions', chatBody(priced), { 'x-request-id': id, 'x-waygate-session-id': 'session-alpha' });
    const after = Date.now();
    expect(res.statusCode, res.body).toBe(200);
    const row = await rowOf(priced, id);
    expect(row).toMatchObject({
      tenant_id: scope.tenantId,
      project_id: scope.projectId,
      token_id: s.token.id,
      user_id: scope.adminUserId,
      model: priced,
      provider: 'openai-compatible',
      service: 'chat',
      endpoint: '/chat/completions',
      input_tokens: PROMPT,
      output_tokens: COMPLETION,
      total_tokens: PROMPT + COMPLETION,
      currency: 'USD',
      status: 200,
      request_id: id,
      session_id: 'session-alpha',
      streamed: 0,
    });
    expect(row.id).toMatch(/^use_/);
    expect(row.cost).toBeCloseTo(CHAT_COST, 12);
    expect(row.upstream_latency_ms).toBeGreaterThan(0);
    expect(row.latency_ms).toBeGreaterThanOrEqual(row.upstream_latency_ms);
    expect(row.created_at).toBeGreaterThanOrEqual(before);
    expect(row.created_at).toBeLessThanOrEqual(after);
  });

  it('an upstream reporting billions of tokens is metered with counted tokens, not lost (PostgreSQL integer columns)', async () => {
    const id = requestId();
    s.fake.usage = { prompt: 3_000_000_000, completion: 3_000_000_000 };
    try {
      expect((await post(s.t, s.token.value, '/chat/completions', chatBody(priced), { 'x-request-id': id })).statusCode).toBe(200);
    } finally {
      s.fake.usage = { prompt: PROMPT, completion: COMPLETION };
    }
    const row = await rowOf(priced, id);
    expect(row.input_tokens).toBeGreaterThan(0);
    expect(row.input_tokens).toBeLessThan(1000);
  });

  it('a streamed call is metered once, streamed, with the usage the upstream reported (asked for by Waygate)', async () => {
    const id = requestId();
    const res = await post(s.t, s.token.value, '/chat/completions', chatBody(priced, { stream: true }), { 'x-request-id': id });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body).not.toContain('"usage"');
    const row = await rowOf(priced, id);
    expect(row).toMatchObject({ service: 'chat', endpoint: '/chat/completions', input_tokens: PROMPT, output_tokens: COMPLETION, status: 200, streamed: 1, session_id: null, token_id: s.token.id });
    expect(row.cost).toBeCloseTo(CHAT_COST, 12);
  });

  it('a stream without upstream usage is metered with counted tokens, never zero', async () => {
    s.fake.queue({ omitUsage: true });
    const id = requestId();
    const res = await post(s.t, s.token.value, '/chat/completions', chatBody(priced, { stream: true }), { 'x-request-id': id });
    expect(res.statusCode, res.body).toBe(200);
    const row = await rowOf(priced, id);
    // Estimator: prompt 3 + 4 + "Say" 1 + "hello" 2 = 10; reply "Hello from the fake upstream" = 2+1+1+1+2 = 7.
    expect(row).toMatchObject({ input_tokens: 10, output_tokens: 7, total_tokens: 17, status: 200, streamed: 1 });
    expect(row.cost).toBeCloseTo((10 * 2.5 + 7 * 10) / 1e6, 12);
  });

  it('embeddings: service embeddings, input tokens from the upstream, no output, input-priced', async () => {
    const id = requestId();
    const res = await post(s.t, s.token.value, '/embeddings', { model: priced, input: ['a', 'b'] }, { 'x-request-id': id, 'x-waygate-session-id': 'session-beta' });
    expect(res.statusCode, res.body).toBe(200);
    const row = await rowOf(priced, id);
    expect(row).toMatchObject({ service: 'embeddings', endpoint: '/embeddings', input_tokens: PROMPT, output_tokens: 0, total_tokens: PROMPT, status: 200, streamed: 0, session_id: 'session-beta' });
    expect(row.cost).toBeCloseTo((PROMPT * 2.5) / 1e6, 12);
  });

  it('moderations: service moderations; the upstream reports no usage, so the input is counted', async () => {
    const id = requestId();
    const res = await post(s.t, s.token.value, '/moderations', { model: priced, input: 'hello world' }, { 'x-request-id': id });
    expect(res.statusCode, res.body).toBe(200);
    const row = await rowOf(priced, id);
    // "hello" 2 + "world" 2.
    expect(row).toMatchObject({ service: 'moderations', endpoint: '/moderations', input_tokens: 4, output_tokens: 0, status: 200, streamed: 0 });
    expect(row.cost).toBeCloseTo((4 * 2.5) / 1e6, 12);
  });

  it('failed calls are metered with their status and no tokens or cost', async () => {
    const cases: { behaviour: Record<string, unknown>; body: Record<string, unknown>; status: number; streamed: number }[] = [
      { behaviour: { status: 503 }, body: chatBody(priced), status: 502, streamed: 0 },
      { behaviour: { status: 503 }, body: chatBody(priced, { stream: true }), status: 502, streamed: 1 },
      { behaviour: { status: 400, body: { error: { message: 'bad', type: 'invalid_request_error' } } }, body: chatBody(priced), status: 400, streamed: 0 },
      { behaviour: { status: 429, body: { error: { message: 'slow down', type: 'rate_limit_error' } } }, body: chatBody(priced), status: 429, streamed: 0 },
      { behaviour: { raw: 'not json' }, body: chatBody(priced), status: 502, streamed: 0 },
    ];
    for (const { behaviour, body, status, streamed } of cases) {
      s.fake.queue(behaviour);
      const id = requestId();
      const res = await post(s.t, s.token.value, '/chat/completions', body, { 'x-request-id': id });
      expect(res.statusCode).toBe(status);
      const row = await rowOf(priced, id);
      expect(row, JSON.stringify(behaviour)).toMatchObject({ status, streamed, input_tokens: 0, output_tokens: 0, total_tokens: 0, cost: 0, token_id: s.token.id, service: 'chat' });
      // The upstream was asked, and its answer took time: upstream time, within the call's.
      expect(row.upstream_latency_ms).toBeGreaterThan(0);
      expect(row.latency_ms).toBeGreaterThanOrEqual(row.upstream_latency_ms);
    }
  });

  it('a model without pricing costs nothing; a built-in local model is metered as provider local', async () => {
    const free = await registerFakeModel(s.t, s.fake);
    const id = requestId();
    expect((await post(s.t, s.token.value, '/chat/completions', chatBody(free), { 'x-request-id': id })).statusCode).toBe(200);
    expect(await rowOf(free, id)).toMatchObject({ input_tokens: PROMPT, output_tokens: COMPLETION, cost: 0, currency: 'USD' });

    const localId = requestId();
    const local = await post(s.t, s.token.value, '/chat/completions', chatBody('local-chat'), { 'x-request-id': localId });
    expect(local.statusCode).toBe(200);
    const usage = local.json().usage;
    const row = await rowOf('local-chat', localId);
    expect(row).toMatchObject({ provider: 'local', service: 'chat', input_tokens: usage.prompt_tokens, output_tokens: usage.completion_tokens, cost: 0, status: 200 });
    expect(row.input_tokens).toBeGreaterThan(0);
    expect(row.output_tokens).toBeGreaterThan(0);
  });

  it('the session id is cut to 200 characters; an empty header is no session', async () => {
    const long = 's'.repeat(300);
    const id = requestId();
    await post(s.t, s.token.value, '/embeddings', { model: priced, input: 'x' }, { 'x-request-id': id, 'x-waygate-session-id': long });
    expect((await rowOf(priced, id)).session_id).toBe('s'.repeat(200));
    const empty = requestId();
    await post(s.t, s.token.value, '/embeddings', { model: priced, input: 'x' }, { 'x-request-id': empty, 'x-waygate-session-id': '' });
    expect((await rowOf(priced, empty)).session_id).toBeNull();
  });

  it('usage_hourly sums the events per hour, model, service, token and user, across flushes', async () => {
    const model = await registerFakeModel(s.t, s.fake, { pricing: PRICING });
    const run = async (path: string, body: Record<string, unknown>) => {
      await post(s.t, s.token.value, path, body);
      await s.t.ctx.services.usage.flush(); // each call its own batch: later batches add to the rollup rows
    };
    await run('/chat/completions', chatBody(model));
    await run('/chat/completions', chatBody(model, { stream: true }));
    s.fake.queue({ status: 500 });
    await run('/chat/completions', chatBody(model));
    await run('/chat/completions', chatBody(model));
    await run('/embeddings', { model, input: 'x' });

    const events = await usageRowsOf(s.t, model);
    expect(events.map((e) => e.service).sort()).toEqual(['chat', 'chat', 'chat', 'chat', 'embeddings']);
    const hourly = (await s.t.ctx.database.db.selectFrom('usage_hourly').selectAll().where('model', '=', model).execute()).map((r) => ({
      ...r,
      hour: Number(r.hour),
      requests: Number(r.requests),
      errors: Number(r.errors),
      input_tokens: Number(r.input_tokens),
      output_tokens: Number(r.output_tokens),
      cost: Number(r.cost),
      latency_ms: Number(r.latency_ms),
      upstream_latency_ms: Number(r.upstream_latency_ms),
    }));

    // Expected rollups, from the events themselves.
    const expected = new Map<string, { requests: number; errors: number; input_tokens: number; output_tokens: number; cost: number; latency_ms: number; upstream_latency_ms: number }>();
    for (const e of events) {
      const key = JSON.stringify([Math.floor(e.created_at / HOUR_MS) * HOUR_MS, e.service, e.token_id ?? '', e.user_id ?? '']);
      const sum = expected.get(key) ?? { requests: 0, errors: 0, input_tokens: 0, output_tokens: 0, cost: 0, latency_ms: 0, upstream_latency_ms: 0 };
      sum.requests += 1;
      sum.errors += e.status >= 400 ? 1 : 0;
      sum.input_tokens += e.input_tokens;
      sum.output_tokens += e.output_tokens;
      sum.cost += e.cost;
      sum.latency_ms += e.latency_ms;
      sum.upstream_latency_ms += e.upstream_latency_ms;
      expected.set(key, sum);
    }
    expect(hourly).toHaveLength(expected.size);
    for (const row of hourly) {
      expect(row).toMatchObject({ tenant_id: scope.tenantId, project_id: scope.projectId, token_id: s.token.id, user_id: scope.adminUserId });
      expect(row.hour % HOUR_MS).toBe(0);
      const sum = expected.get(JSON.stringify([row.hour, row.service, row.token_id, row.user_id]));
      expect(sum, `rollup ${row.service}`).toBeDefined();
      expect({ requests: row.requests, errors: row.errors, input_tokens: row.input_tokens, output_tokens: row.output_tokens }).toEqual({
        requests: sum!.requests,
        errors: sum!.errors,
        input_tokens: sum!.input_tokens,
        output_tokens: sum!.output_tokens,
      });
      expect(row.cost).toBeCloseTo(sum!.cost, 9);
      expect(row.latency_ms).toBeCloseTo(sum!.latency_ms, 3);
      expect(row.upstream_latency_ms).toBeCloseTo(sum!.upstream_latency_ms, 3);
    }

    // And the totals, stated outright: 3 successful chats and a failed one; one embedding.
    const total = (service: string, field: 'requests' | 'errors' | 'input_tokens' | 'output_tokens' | 'cost') =>
      hourly.filter((r) => r.service === service).reduce((n, r) => n + r[field], 0);
    expect([total('chat', 'requests'), total('chat', 'errors'), total('chat', 'input_tokens'), total('chat', 'output_tokens')]).toEqual([4, 1, 3 * PROMPT, 3 * COMPLETION]);
    expect(total('chat', 'cost')).toBeCloseTo(3 * CHAT_COST, 12);
    expect([total('embeddings', 'requests'), total('embeddings', 'errors'), total('embeddings', 'input_tokens'), total('embeddings', 'output_tokens')]).toEqual([1, 0, PROMPT, 0]);
    expect(total('embeddings', 'cost')).toBeCloseTo((PROMPT * 2.5) / 1e6, 12);
  });

  it.runIf(backend === 'sqlite')('keeps the events of calls made while the database answers but takes no writes, and writes them later', async () => {
    const model = await registerFakeModel(s.t, s.fake, { pricing: PRICING });
    const db = s.t.ctx.database.db;
    await s.t.ctx.services.usage.flush();
    // A read-only database (a failover to a standby, a full disk) still answers `select 1`.
    await sql`pragma query_only = 1`.execute(db);
    try {
      for (let i = 0; i < 3; i++) expect((await post(s.t, s.token.value, '/chat/completions', chatBody(model))).statusCode).toBe(200);
      await s.t.ctx.services.usage.flush();
      expect(s.t.ctx.services.usage.pending).toBe(3);
    } finally {
      await sql`pragma query_only = 0`.execute(db);
    }
    await s.t.ctx.services.usage.flush();
    expect(await usageRowsOf(s.t, model)).toHaveLength(3);
  });
});
