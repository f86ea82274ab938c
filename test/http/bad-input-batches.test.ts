import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, call, createTestApp, createToken, type TestApp } from '../helpers/app.js';
import { registerModel } from '../helpers/models.js';
import { BATCHES, CHAT, chatLines, chatRequest, postBatch } from '../batches/support.js';

const FILES = '/api/client/v1/files/buckets';

/** A 400 in the error envelope and nothing else, with the message of the same reference when it is missing. */
function expectRefused(res: LightMyRequestResponse, message: RegExp): void {
  expect(res.statusCode, res.body).toBe(400);
  const body = res.json();
  expect(Object.keys(body)).toEqual(['error']);
  expect(body.error.message).toMatch(message);
}

/**
 * References in a batch create body to another project's bucket, object or model are refused exactly like missing
 * ones (400 naming the reference, as the README says), and nothing is read from the other project.
 */
describe.each(BACKENDS)('batches: references to another project on %s', (backend) => {
  let t: TestApp;
  let otherToken: string;
  let otherModel: string;

  beforeAll(async () => {
    t = await createTestApp({ backend, noWorkers: true });
    const other = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: 'Other batches' } });
    expect(other.statusCode, other.body).toBe(201);
    const projectId = other.json().project.id as string;
    otherToken = (await createToken(t, { role: 'owner', projectId })).value;
    // A bucket and a valid input file that exist only in the other project.
    expect((await call(t.app, otherToken, { method: 'POST', url: FILES, payload: { key: 'theirs' } })).statusCode).toBe(201);
    const line = JSON.stringify({ custom_id: 'a', body: chatRequest('local-chat') });
    const put = await call(t.app, otherToken, { method: 'PUT', url: `${FILES}/theirs/objects/input.jsonl`, payload: `${line}\n`, headers: { 'content-type': 'application/jsonl' } });
    expect(put.statusCode, put.body).toBe(201);
    otherModel = await registerModel(t, { provider: { type: 'mock' }, capabilities: ['chat'] }, { project: projectId });
  });
  afterAll(async () => t?.close());

  const noBatches = async () => expect((await call(t.app, t.ownerToken, { method: 'GET', url: BATCHES })).json().data).toEqual([]);

  it("another project's bucket as input_file is refused like a missing bucket", async () => {
    expectRefused(await postBatch(t, { endpoint: CHAT, input_file: { bucket_key: 'theirs', object_key: 'input.jsonl' } }), /input_file is unreadable: Bucket "theirs" not found/);
    await noBatches();
    // The same request works in the project that owns the bucket.
    expect((await postBatch(t, { endpoint: CHAT, input_file: { bucket_key: 'theirs', object_key: 'input.jsonl' } }, otherToken)).statusCode).toBe(201);
  });

  it("another project's bucket as output_bucket_key is refused like a missing one", async () => {
    expectRefused(await postBatch(t, { endpoint: CHAT, requests: chatLines('local-chat', 1), output_bucket_key: 'theirs' }), /output_bucket_key: bucket "theirs" not found/);
    await noBatches();
  });

  it("another project's model in a line is refused like an unknown model", async () => {
    expectRefused(await postBatch(t, { endpoint: CHAT, requests: [{ body: chatRequest(otherModel) }] }), new RegExp(`^Line 1: model "${otherModel}" is not a model of this project`));
    await noBatches();
  });
});
