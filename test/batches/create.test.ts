import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, call, createTestApp, createToken, type TestApp } from '../helpers/app.js';
import { registerModel } from '../helpers/models.js';
import { BATCHES, CHAT, chatLines, chatRequest, createBatch, EMBEDDINGS, itemsOf, postBatch, storedCounts } from './support.js';

const MAX_LINES = 20;
const FILES = '/api/client/v1/files/buckets';

describe.each(BACKENDS)('POST /batches on %s', (backend) => {
  let t: TestApp;
  let embedOnly: string;
  const put = (key: string, payload: Buffer | string) =>
    call(t.app, t.ownerToken, { method: 'PUT', url: `${FILES}/inputs/objects/${key}`, payload, headers: { 'content-type': 'application/jsonl' } });
  const fileBatch = (objectKey: string, extra: Record<string, unknown> = {}) =>
    postBatch(t, { endpoint: CHAT, input_file: { bucket_key: 'inputs', object_key: objectKey }, ...extra });
  const jsonl = (lines: unknown[]) => lines.map((line) => (typeof line === 'string' ? line : JSON.stringify(line))).join('\n') + '\n';

  /** A 400 whose message matches, and not a row more in either table. */
  async function expectRejected(send: () => Promise<LightMyRequestResponse>, message: RegExp): Promise<void> {
    const before = await storedCounts(t);
    const res = await send();
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error.type).toBe('invalid_request_error');
    expect(res.json().error.message).toMatch(message);
    expect(await storedCounts(t)).toEqual(before);
  }

  beforeAll(async () => {
    // No worker: items stay pending, so what was stored can be read back as it was stored.
    t = await createTestApp({ backend, noWorkers: true, env: { WAYGATE_BATCH_MAX_LINES: String(MAX_LINES) } });
    embedOnly = await registerModel(t, { provider: { type: 'mock' }, capabilities: ['embeddings'] });
    const bucket = await call(t.app, t.ownerToken, { method: 'POST', url: FILES, payload: { key: 'inputs' } });
    expect(bucket.statusCode).toBe(201);
  });
  afterAll(async () => t?.close());

  describe('accepted', () => {
    it('inline lines: 201 with the batch object, in_progress, started, items queued in order', async () => {
      const before = Math.floor(Date.now() / 1000);
      const res = await postBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 3), metadata: { team: 'search', run: 7 } });
      expect(res.statusCode, res.body).toBe(201);
      const batch = res.json();
      expect(batch).toEqual({
        id: expect.stringMatching(/^batch_[a-z2-7]{24}$/),
        object: 'batch',
        endpoint: CHAT,
        status: 'in_progress',
        completion_window: '24h',
        input_file: null,
        output_file: null,
        error_message: null,
        request_counts: { total: 3, completed: 0, failed: 0, cancelled: 0 },
        usage: { input_tokens: 0, output_tokens: 0, total_tokens: 0 },
        metadata: { team: 'search', run: 7 },
        created_at: expect.any(Number),
        started_at: expect.any(Number),
        completed_at: null,
        cancelled_at: null,
      });
      expect(batch.created_at).toBeGreaterThanOrEqual(before);
      expect(batch.started_at).toBe(batch.created_at);
      const items = await itemsOf(t, batch.id);
      expect(items.map((i) => [i.index, i.custom_id, i.status, i.response_status_code, i.usage, i.started_at])).toEqual([
        [0, 'c0', 'pending', 0, null, null],
        [1, 'c1', 'pending', 0, null, null],
        [2, 'c2', 'pending', 0, null, null],
      ]);
      expect(items[0]).toMatchObject({ object: 'batch.item', response_body: null, error_message: null, ended_at: null, id: expect.stringMatching(/^item_/) });
    });

    it('an inline object without a body key is the body itself; its custom_id is taken out of what the model gets', async () => {
      const batch = await createBatch(t, { endpoint: CHAT, requests: [{ custom_id: 'x1', ...chatRequest('local-chat', 'one') }, chatRequest('local-chat', 'two')] });
      const rows = await t.ctx.database.db.selectFrom('batch_items').select(['idx', 'custom_id', 'request_body']).where('batch_id', '=', batch.id).orderBy('idx').execute();
      expect(rows.map((r) => [Number(r.idx), r.custom_id, JSON.parse(r.request_body)])).toEqual([
        [0, 'x1', chatRequest('local-chat', 'one')],
        [1, null, chatRequest('local-chat', 'two')],
      ]);
    });

    it('inline lines may spell out method POST and the batch endpoint as url', async () => {
      const batch = await createBatch(t, { endpoint: CHAT, requests: [{ custom_id: 'a', method: 'POST', url: CHAT, body: chatRequest('local-chat') }] });
      expect(batch.request_counts.total).toBe(1);
    });

    it('embeddings lines, stream: false, completion_window and metadata: null', async () => {
      const batch = await createBatch(t, {
        endpoint: EMBEDDINGS,
        completion_window: '48h',
        metadata: null,
        requests: [{ body: { model: 'local-embed', input: 'hello' } }, { body: { model: embedOnly, input: ['a', 'b'], stream: false } }],
      });
      expect(batch).toMatchObject({ endpoint: EMBEDDINGS, completion_window: '48h', metadata: {}, request_counts: { total: 2 } });
    });

    it(`exactly the maximum of ${MAX_LINES} lines is accepted`, async () => {
      const batch = await createBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', MAX_LINES) });
      expect(batch.request_counts.total).toBe(MAX_LINES);
    });

    it('a JSONL input file: blank lines (a trailing newline, CRLF, whitespace) are skipped and not counted', async () => {
      const text = `\uFEFF${JSON.stringify({ custom_id: 'f0', method: 'POST', url: CHAT, body: chatRequest('local-chat', 'zero') })}\r\n\r\n   \n${JSON.stringify({ body: chatRequest('local-chat', 'one') })}\n\t\n`;
      expect((await put('blank-lines.jsonl', text)).statusCode).toBe(201);
      const res = await fileBatch('blank-lines.jsonl');
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json()).toMatchObject({ input_file: { bucket_key: 'inputs', object_key: 'blank-lines.jsonl' }, request_counts: { total: 2 } });
      const items = await itemsOf(t, res.json().id);
      expect(items.map((i) => [i.index, i.custom_id])).toEqual([[0, 'f0'], [1, null]]);
    });

    it('a JSONL file read across many chunks, with multi-byte characters, gives the same lines', async () => {
      const lines = Array.from({ length: 15 }, (_, i) => ({ custom_id: `ü-${i}-😀`, body: chatRequest('local-chat', `línea ${i} ${'ß'.repeat(3000)}`) }));
      expect((await put('big.jsonl', jsonl(lines))).statusCode).toBe(201);
      const res = await fileBatch('big.jsonl');
      expect(res.statusCode, res.body).toBe(201);
      const rows = await t.ctx.database.db.selectFrom('batch_items').select(['custom_id', 'request_body']).where('batch_id', '=', res.json().id).orderBy('idx').execute();
      expect(rows.map((r) => r.custom_id)).toEqual(lines.map((l) => l.custom_id));
      expect(rows.map((r) => JSON.parse(r.request_body))).toEqual(lines.map((l) => l.body));
    });

    it('output_bucket_key of an existing bucket: output_file names it, object_key to come', async () => {
      const batch = await createBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 1), output_bucket_key: 'inputs' });
      expect(batch.output_file).toEqual({ bucket_key: 'inputs', object_key: null });
    });

    it('a request_id in the body is taken for correlation, not refused', async () => {
      const res = await postBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 1), request_id: 'req-batch-1' });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.headers['x-request-id']).toBe('req-batch-1');
    });
  });

  // Interface 7.1: each batch create 400 cause.
  describe('rejected (400) and nothing stored', () => {
    it.each([
      ['an unsupported endpoint', { endpoint: '/v1/completions', requests: chatLines('local-chat', 1) }, /endpoint must be one of: \/v1\/chat\/completions, \/v1\/embeddings/],
      ['an endpoint without /v1', { endpoint: '/chat/completions', requests: chatLines('local-chat', 1) }, /endpoint must be one of/],
      ['no endpoint', { requests: chatLines('local-chat', 1) }, /endpoint is required/],
    ])('bad endpoint: %s', async (_case, payload, message) => {
      await expectRejected(() => postBatch(t, payload), message);
    });

    it('both requests and input_file', async () => {
      await expectRejected(
        () => postBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 1), input_file: { bucket_key: 'inputs', object_key: 'blank-lines.jsonl' } }),
        /exactly one of requests .* and input_file/,
      );
    });

    it('neither requests nor input_file', async () => {
      await expectRejected(() => postBatch(t, { endpoint: CHAT }), /exactly one of requests .* and input_file/);
    });

    it('missing body.model (inline, and in a file)', async () => {
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: [...chatLines('local-chat', 2), { body: { messages: [{ role: 'user', content: 'x' }] } }] }), /^Line 3: body\.model is required/);
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: [{ body: { model: '', messages: [] } }] }), /^Line 1: body\.model is required/);
      expect((await put('no-model.jsonl', jsonl([{ body: chatRequest('local-chat') }, { custom_id: 'b', body: { messages: [] } }]))).statusCode).toBe(201);
      await expectRejected(() => fileBatch('no-model.jsonl'), /^Line 2: body\.model is required/);
    });

    it('missing messages on chat and missing input on embeddings', async () => {
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: [{ body: { model: 'local-chat' } }] }), /^Line 1: body\.messages is required/);
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: [{ body: { model: 'local-chat', messages: 'hi' } }] }), /^Line 1: body\.messages is required \(an array/);
      await expectRejected(() => postBatch(t, { endpoint: EMBEDDINGS, requests: [{ body: { model: 'local-embed', input: 'a' } }, { body: { model: 'local-embed' } }] }), /^Line 2: body\.input is required/);
    });

    it('streaming requested', async () => {
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: [{ body: chatRequest('local-chat', 'x', { stream: true }) }] }), /^Line 1: body\.stream: streaming is not supported/);
      expect((await put('stream.jsonl', jsonl([{ body: chatRequest('local-chat', 'x', { stream: true }) }]))).statusCode).toBe(201);
      await expectRejected(() => fileBatch('stream.jsonl'), /^Line 1: body\.stream/);
    });

    it('unreadable input file: a missing bucket or a missing object', async () => {
      await expectRejected(() => postBatch(t, { endpoint: CHAT, input_file: { bucket_key: 'no-such-bucket', object_key: 'a.jsonl' } }), /input_file is unreadable: Bucket "no-such-bucket" not found/);
      await expectRejected(() => fileBatch('missing.jsonl'), /input_file is unreadable: Object "missing.jsonl" not found/);
    });

    it('unreadable input file: not UTF-8', async () => {
      const bytes = Buffer.concat([Buffer.from(jsonl([{ body: chatRequest('local-chat') }])), Buffer.from([0xff, 0xfe, 0x41, 0x0a])]);
      expect((await put('latin.jsonl', bytes)).statusCode).toBe(201);
      await expectRejected(() => fileBatch('latin.jsonl'), /The input file is not valid UTF-8/);
    });

    it('an input_file reference with missing or unknown fields', async () => {
      await expectRejected(() => postBatch(t, { endpoint: CHAT, input_file: { bucket_key: 'inputs' } }), /input_file\.object_key is required/);
      await expectRejected(() => postBatch(t, { endpoint: CHAT, input_file: { bucket_key: 'inputs', object_key: 'a', id: 1 } }), /input_file\.id is not a known field/);
    });

    it('an empty batch: no inline lines, an empty file, a file of blank lines', async () => {
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: [] }), /The batch has no request lines/);
      expect((await put('empty.jsonl', '')).statusCode).toBe(201);
      await expectRejected(() => fileBatch('empty.jsonl'), /The batch has no request lines/);
      expect((await put('blanks.jsonl', '\n\n  \r\n')).statusCode).toBe(201);
      await expectRejected(() => fileBatch('blanks.jsonl'), /The batch has no request lines/);
    });

    it(`more lines than the maximum (${MAX_LINES}), inline and in a file`, async () => {
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', MAX_LINES + 1) }), new RegExp(`more than ${MAX_LINES} request lines`));
      const lines = chatLines('local-chat', MAX_LINES + 1).map((l) => ({ body: l.body }));
      expect((await put('too-many.jsonl', jsonl(lines))).statusCode).toBe(201);
      await expectRejected(() => fileBatch('too-many.jsonl'), new RegExp(`more than ${MAX_LINES} request lines`));
      // Blank lines do not count towards the maximum.
      expect((await put('max-with-blanks.jsonl', lines.slice(0, MAX_LINES).map((l) => JSON.stringify(l)).join('\n\n') + '\n\n')).statusCode).toBe(201);
      expect((await fileBatch('max-with-blanks.jsonl')).statusCode).toBe(201);
    });

    it.each([
      ['not JSON', '{"body": {"model": "local-chat", "messages": [', /^Line 2 is not valid JSON/],
      ['a JSON array', '[1, 2]', /^Line 2: must be a JSON object/],
      ['a JSON string', '"hello"', /^Line 2: must be a JSON object/],
      ['without body', JSON.stringify({ custom_id: 'x', model: 'local-chat' }), /^Line 2: body is required/],
      ['with another url', JSON.stringify({ url: EMBEDDINGS, body: chatRequest('local-chat') }), /^Line 2: url "\/v1\/embeddings" does not match the batch endpoint/],
      ['with method GET', JSON.stringify({ method: 'GET', body: chatRequest('local-chat') }), /^Line 2: method must be POST/],
      ['with a body that is not an object', JSON.stringify({ body: 'hi' }), /^Line 2: body must be a JSON object/],
      ['with a __proto__ key', '{"body": {"model": "local-chat", "messages": [], "__proto__": {"x": 1}}}', /^Line 2 is not valid JSON/],
    ])('a JSONL line %s names its line number', async (_case, line, message) => {
      const key = `bad-${Math.random().toString(36).slice(2)}.jsonl`;
      expect((await put(key, `${JSON.stringify({ body: chatRequest('local-chat') })}\n${line}\n${JSON.stringify({ body: chatRequest('local-chat') })}\n`)).statusCode).toBe(201);
      await expectRejected(() => fileBatch(key), message);
    });

    it('line numbers of a file count blank lines (they are the lines an editor shows)', async () => {
      expect((await put('numbered.jsonl', `${JSON.stringify({ body: chatRequest('local-chat') })}\n\n\n{oops}\n`)).statusCode).toBe(201);
      await expectRejected(() => fileBatch('numbered.jsonl'), /^Line 4 is not valid JSON/);
    });

    // Regressions found by fuzzing: bytes that are not UTF-8 were reported at the first line of their chunk, a lone
    // surrogate named no line, a later check's line was named before an earlier line's problem, and a refused url
    // was quoted whole into the answer.
    it('every refusal names the first line at fault, and quotes a refused value only in part', async () => {
      const good = JSON.stringify({ body: chatRequest('local-chat') });
      const badByte = Buffer.concat([Buffer.from(`${good}\n`.repeat(10)), Buffer.from([0xff]), Buffer.from(`${good}\n`)]);
      expect((await put('bad-byte.jsonl', badByte)).statusCode).toBe(201);
      await expectRejected(() => fileBatch('bad-byte.jsonl'), /The input file is not valid UTF-8 \(near line 11\)/);
      expect((await put('surrogate.jsonl', `${good}\n{"custom_id":"\\ud800","body":${JSON.stringify(chatRequest('local-chat'))}}\n`)).statusCode).toBe(201);
      await expectRejected(() => fileBatch('surrogate.jsonl'), /^Line 2: .*surrogate/);
      const requests = [{ body: chatRequest('no-such-model') }, { custom_id: 'b', body: chatRequest('local-chat') }, { custom_id: 'b', body: chatRequest('local-chat') }];
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests }), /^Line 1: model "no-such-model"/);
      const res = await postBatch(t, { endpoint: CHAT, requests: [{ url: `/v1/${'x'.repeat(100_000)}`, body: chatRequest('local-chat') }] });
      expect(res.statusCode).toBe(400);
      expect(res.body.length).toBeLessThan(1_000);
    });

    it.each([
      ['an array', ['a']],
      ['a string', 'tags'],
      ['a number', 5],
    ])('metadata that is %s', async (_case, metadata) => {
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 1), metadata }), /metadata/);
    });

    it('metadata larger than 16 KiB as JSON', async () => {
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 1), metadata: { note: 'x'.repeat(17 * 1024) } }), /metadata is larger than 16384 bytes/);
    });

    it('custom_id that is not a string, too long, or used twice', async () => {
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: [{ custom_id: 7, body: chatRequest('local-chat') }] }), /^Line 1: custom_id must be a string/);
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: [{ custom_id: 'x'.repeat(513), body: chatRequest('local-chat') }] }), /^Line 1: custom_id is longer than 512/);
      const requests = [{ custom_id: 'same', body: chatRequest('local-chat') }, { body: chatRequest('local-chat') }, { custom_id: 'same', body: chatRequest('local-chat') }];
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests }), /^Line 3: custom_id "same" is already used by line 1/);
    });

    it('a model the project does not have, or one without the endpoint capability', async () => {
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: [...chatLines('local-chat', 2), { body: chatRequest('no-such-model') }] }), /^Line 3: model "no-such-model" is not a model of this project/);
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: [{ body: chatRequest(embedOnly) }] }), new RegExp(`^Line 1: model "${embedOnly}" does not offer chat`));
      await expectRejected(() => postBatch(t, { endpoint: EMBEDDINGS, requests: [{ body: { model: 'local-chat', input: 'x' } }] }), /does not offer embeddings/);
    });

    it('a line the endpoint schema refuses (a bad role) names the field', async () => {
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: [{ body: { model: 'local-chat', messages: [{ role: 'wizard', content: 'x' }] } }] }), /^Line 1: body\.messages\.0\.role must be one of/);
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: [{ body: { model: 'local-chat', messages: [] } }] }), /^Line 1: body\.messages must NOT have fewer than 1 items/);
    });

    it('requests that is not an array, a line that is not an object, unknown top-level fields', async () => {
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: { body: chatRequest('local-chat') } }), /requests must be of type array/);
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: [chatRequest('local-chat'), 'hello'] }), /^Line 2: each request must be a JSON object/);
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 1), input_file_id: 'file-1' }), /input_file_id is not a known field/);
    });

    it('an output bucket that does not exist', async () => {
      await expectRejected(() => postBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 1), output_bucket_key: 'nowhere' }), /output_bucket_key: bucket "nowhere" not found/);
    });
  });

  describe('permissions', () => {
    it('a viewer token may read batches but not create one (403)', async () => {
      const viewer = await createToken(t, { role: 'viewer' });
      const res = await postBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 1) }, viewer.value);
      expect(res.statusCode).toBe(403);
      expect(res.json().error.message).toMatch(/write permission on the batches service/);
      expect((await call(t.app, viewer.value, { method: 'GET', url: BATCHES })).statusCode).toBe(200);
    });

    it('a token that may write batches but not call models cannot run models through a batch (403)', async () => {
      const token = await createToken(t, { role: 'member', permissions: { batches: 'write', models: 'none' } });
      const res = await postBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 1) }, token.value);
      expect(res.statusCode).toBe(403);
      expect(res.json().error.message).toMatch(/read permission on the models service/);
    });

    it('input_file needs read and output_bucket_key write permission on files, as the document store itself does (403)', async () => {
      const noFiles = await createToken(t, { role: 'member', permissions: { batches: 'write', models: 'read', files: 'none' } });
      const reader = await createToken(t, { role: 'member', permissions: { batches: 'write', models: 'read', files: 'read' } });
      const input = { endpoint: CHAT, input_file: { bucket_key: 'any', object_key: 'lines.jsonl' } };
      const refused = await postBatch(t, input, noFiles.value);
      expect(refused.statusCode).toBe(403);
      expect(refused.json().error.message).toMatch(/read permission on the files service/);
      const output = { endpoint: CHAT, requests: chatLines('local-chat', 1), output_bucket_key: 'any' };
      for (const token of [noFiles, reader]) {
        const res = await postBatch(t, output, token.value);
        expect(res.statusCode).toBe(403);
        expect(res.json().error.message).toMatch(/write permission on the files service/);
      }
    });

    it('a project-less token gets 400', async () => {
      const token = await createToken(t, { role: 'owner', projectId: null });
      const res = await postBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 1) }, token.value);
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe('project_required');
    });
  });
});

describe('POST /batches body limit', () => {
  it('a body over WAYGATE_BODY_LIMIT_BYTES is a 413, and nothing is stored', async () => {
    const t = await createTestApp({ noWorkers: true, env: { WAYGATE_BODY_LIMIT_BYTES: '4096' } });
    try {
      const res = await postBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 100) });
      expect(res.statusCode).toBe(413);
      expect(await storedCounts(t)).toEqual({ batches: 0, items: 0 });
    } finally {
      await t.close();
    }
  });
});
