import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { BACKENDS, call, createTestApp, createToken, flushAudit, type Backend, type TestApp } from '../helpers/app.js';
import { ORPHAN_AGE_MS } from '../../src/areas/files/service.js';
import { DatabaseBlobStorage } from '../../src/areas/files/storage/database.js';
import { DiskBlobStorage } from '../../src/areas/files/storage/disk.js';
import { timeOrderedId } from '../../src/platform/ids.js';

const FILES = '/api/client/v1/files/buckets';
const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');
const objectUrl = (bucket: string, key: string) => `${FILES}/${bucket}/objects/${key.split('/').map(encodeURIComponent).join('/')}`;
let counter = 0;
const freshBucket = () => `bucket-${Date.now().toString(36)}-${counter++}`;

/** Every file under a directory (recursively), for "nothing left behind" checks on disk storage. */
function filesUnder(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? filesUnder(path.join(dir, entry.name)) : [entry.name]));
}

async function storedBlobCount(t: TestApp, storage: string): Promise<number> {
  if (storage === 'disk') return filesUnder(path.join(t.config.dataDir, 'files', 'blobs')).length + filesUnder(path.join(t.config.dataDir, 'files', 'tmp')).length;
  const row = await t.ctx.database.db.selectFrom('file_blobs').select((eb) => eb.fn.count<number>('blob_id').distinct().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

const combos: [Backend, 'disk' | 'database'][] = BACKENDS.flatMap((backend) => [[backend, 'disk'], [backend, 'database']] as [Backend, 'disk' | 'database'][]);

describe.each(combos)('document store on %s with %s storage', (backend, storage) => {
  let t: TestApp;
  const put = (bucket: string, key: string, payload: Buffer | string, headers: Record<string, string> = {}, token = t.ownerToken) =>
    call(t.app, token, { method: 'PUT', url: objectUrl(bucket, key), payload, headers });
  const createBucket = async (key = freshBucket(), token = t.ownerToken) => {
    const res = await call(t.app, token, { method: 'POST', url: FILES, payload: { key } });
    expect(res.statusCode, res.body).toBe(201);
    return key;
  };

  beforeAll(async () => {
    t = await createTestApp({ backend, env: { WAYGATE_FILES_STORAGE: storage, WAYGATE_FILES_MAX_BYTES: String(4 * 1024 * 1024) } });
  });
  afterAll(async () => t?.close());

  it('creates buckets (201), refuses a duplicate key (409) and lists them by key', async () => {
    const res = await call(t.app, t.ownerToken, { method: 'POST', url: FILES, payload: { key: 'zz-docs', name: 'Documents' } });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual({ object: 'bucket', key: 'zz-docs', name: 'Documents', created_at: expect.any(Number) });
    expect(Math.abs(res.json().created_at - Date.now() / 1000)).toBeLessThan(60);
    const again = await call(t.app, t.ownerToken, { method: 'POST', url: FILES, payload: { key: 'zz-docs' } });
    expect(again.statusCode).toBe(409);
    expect(again.json().error.message).toContain('zz-docs');
    await createBucket('aa-first');
    const list = await call(t.app, t.ownerToken, { method: 'GET', url: FILES });
    expect(list.statusCode).toBe(200);
    const keys = list.json().data.map((b: { key: string }) => b.key);
    expect(keys).toEqual([...keys].sort());
    expect(keys).toEqual(expect.arrayContaining(['aa-first', 'zz-docs']));
    expect(list.json().data.find((b: { key: string }) => b.key === 'aa-first').name).toBe('aa-first');
  });

  it.each([
    ['an upper-case key', { key: 'Docs' }],
    ['a key starting with a dash', { key: '-docs' }],
    ['an empty key', { key: '' }],
    ['a key of 64 characters', { key: 'a'.repeat(64) }],
    ['a key with a slash', { key: 'a/b' }],
    ['no key', { name: 'x' }],
    ['an unknown field', { key: 'okay', public: true }],
    ['a name that is not text', { key: 'okay', name: 5 }],
  ])('refuses a bucket with %s (400)', async (_case, payload) => {
    const res = await call(t.app, t.ownerToken, { method: 'POST', url: FILES, payload });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/key|name|field|public/);
  });

  it.each([
    ['PUT', `${FILES}/Upper-Case/objects/a.txt`],
    ['GET', `${FILES}/Upper-Case/objects/a.txt`],
    ['DELETE', `${FILES}/-dash/objects/a.txt`],
    ['GET', `${FILES}/${'b'.repeat(64)}/objects`],
  ] as const)('answers %s %s, a bucket key that can never exist, with 400 naming it', async (method, url) => {
    const res = await call(t.app, t.ownerToken, { method, url, payload: method === 'PUT' ? 'x' : undefined });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toContain('bucketKey');
  });

  it('stores any bytes under a key with slashes and returns them unchanged, with type, length and hash', async () => {
    const bucket = await createBucket();
    const data = randomBytes(2.5 * 1024 * 1024); // crosses the database storage's 1 MiB rows
    const key = 'inputs/2026/naïve batch #1.bin';
    const res = await put(bucket, key, data, { 'content-type': 'application/x-custom' });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toEqual({ bucket_key: bucket, object_key: key, size: data.length, content_type: 'application/x-custom', sha256: sha256(data), created_at: expect.any(Number) });
    const got = await call(t.app, t.ownerToken, { method: 'GET', url: objectUrl(bucket, key) });
    expect(got.statusCode).toBe(200);
    expect(got.headers['content-type']).toBe('application/x-custom');
    expect(Number(got.headers['content-length'])).toBe(data.length);
    expect(got.headers.etag).toBe(`"${sha256(data)}"`);
    expect(got.rawPayload.equals(data)).toBe(true);
  });

  it('stores a JSON body as raw text (not parsed), an empty body, and a body without a content type', async () => {
    const bucket = await createBucket();
    const jsonl = '{"a": 1}\n{"b":  [2, 3]}\n';
    const json = await put(bucket, 'in.jsonl', jsonl, { 'content-type': 'application/json' });
    expect(json.statusCode, json.body).toBe(201);
    expect((await call(t.app, t.ownerToken, { method: 'GET', url: objectUrl(bucket, 'in.jsonl') })).body).toBe(jsonl);
    const empty = await put(bucket, 'empty', '');
    expect(empty.statusCode, empty.body).toBe(201);
    expect(empty.json()).toMatchObject({ size: 0, sha256: sha256('') });
    const emptyGot = await call(t.app, t.ownerToken, { method: 'GET', url: objectUrl(bucket, 'empty') });
    expect(emptyGot.statusCode).toBe(200);
    expect(emptyGot.rawPayload.length).toBe(0);
    const untyped = await t.app.inject({ method: 'PUT', url: objectUrl(bucket, 'untyped'), payload: Buffer.from('abc'), headers: { authorization: `Bearer ${t.ownerToken}` } });
    expect(untyped.statusCode, untyped.body).toBe(201);
    expect(untyped.json().content_type).toBe('application/octet-stream');
  });

  it('replaces an object put again under the same key and removes the old bytes', async () => {
    const bucket = await createBucket();
    const before = await storedBlobCount(t, storage);
    expect((await put(bucket, 'doc.txt', 'first version')).statusCode).toBe(201);
    const second = await put(bucket, 'doc.txt', 'second', { 'content-type': 'text/plain' });
    expect(second.statusCode).toBe(201);
    expect(second.json()).toMatchObject({ size: 6, sha256: sha256('second'), content_type: 'text/plain' });
    expect((await call(t.app, t.ownerToken, { method: 'GET', url: objectUrl(bucket, 'doc.txt') })).body).toBe('second');
    expect(await storedBlobCount(t, storage)).toBe(before + 1);
    const list = await call(t.app, t.ownerToken, { method: 'GET', url: `${FILES}/${bucket}/objects` });
    expect(list.json().data).toHaveLength(1);
  });

  it('keeps exactly one object when many uploads to one key race, and no orphaned bytes', async () => {
    const bucket = await createBucket();
    const before = await storedBlobCount(t, storage);
    const bodies = Array.from({ length: 8 }, (_, i) => `version ${i} `.repeat(100 + i));
    const results = await Promise.all(bodies.map((body) => put(bucket, 'contended.txt', body)));
    expect(results.map((r) => r.statusCode)).toEqual(bodies.map(() => 201));
    const got = await call(t.app, t.ownerToken, { method: 'GET', url: objectUrl(bucket, 'contended.txt') });
    expect(bodies).toContain(got.body);
    expect(got.headers.etag).toBe(`"${sha256(got.body)}"`);
    expect((await call(t.app, t.ownerToken, { method: 'GET', url: `${FILES}/${bucket}/objects` })).json().data).toHaveLength(1);
    expect(await storedBlobCount(t, storage)).toBe(before + 1);
  });

  it('answers HEAD with the headers alone, and 404 when the bytes are gone by the time they are opened', async () => {
    const bucket = await createBucket();
    expect((await put(bucket, 'head.txt', 'twelve bytes', { 'content-type': 'text/plain' })).statusCode).toBe(201);
    const head = await call(t.app, t.ownerToken, { method: 'HEAD', url: objectUrl(bucket, 'head.txt') });
    expect(head.statusCode).toBe(200);
    expect(head.headers['content-type']).toBe('text/plain');
    expect(Number(head.headers['content-length'])).toBe(12);
    expect(head.headers.etag).toBe(`"${sha256('twelve bytes')}"`);
    expect(head.rawPayload.length).toBe(0);
    // The bytes vanish between the look-up and the read (a replace or delete racing the download).
    const row = await t.ctx.database.db.selectFrom('file_objects').select(['blob_id', 'storage']).where('object_key', '=', 'head.txt').executeTakeFirstOrThrow();
    const storages = { disk: new DiskBlobStorage(path.join(t.config.dataDir, 'files')), database: new DatabaseBlobStorage(t.ctx.database.db, t.ctx.database.dialect) };
    await storages[row.storage as 'disk' | 'database'].remove(row.blob_id);
    const gone = await call(t.app, t.ownerToken, { method: 'GET', url: objectUrl(bucket, 'head.txt') });
    expect(gone.statusCode).toBe(404);
    expect(gone.json().error.message).toContain('head.txt');
  });

  it('never fails when uploads and deletes of one key race', async () => {
    const bucket = await createBucket();
    const statuses: number[] = [];
    for (let round = 0; round < 60; round++) {
      const results = await Promise.all([put(bucket, 'raced', `a${round}`), call(t.app, t.ownerToken, { method: 'DELETE', url: objectUrl(bucket, 'raced') }), put(bucket, 'raced', `b${round}`), call(t.app, t.ownerToken, { method: 'DELETE', url: objectUrl(bucket, 'raced') })]);
      statuses.push(...results.map((r) => r.statusCode));
    }
    expect(statuses.filter((status) => ![200, 201, 404].includes(status))).toEqual([]);
    const list = (await call(t.app, t.ownerToken, { method: 'GET', url: `${FILES}/${bucket}/objects` })).json().data;
    expect(list.length).toBeLessThanOrEqual(1);
  });

  it('filters by a prefix outside the Basic Multilingual Plane, and refuses an overlong content type', async () => {
    const bucket = await createBucket();
    expect((await put(bucket, '😀a', 'smile')).statusCode).toBe(201);
    expect((await put(bucket, 'plain', 'plain')).statusCode).toBe(201);
    const res = await call(t.app, t.ownerToken, { method: 'GET', url: `${FILES}/${bucket}/objects?prefix=${encodeURIComponent('😀')}` });
    expect(res.json().data.map((o: { object_key: string }) => o.object_key)).toEqual(['😀a']);
    const long = await put(bucket, 'typed', 'x', { 'content-type': `text/${'x'.repeat(300)}` });
    expect(long.statusCode).toBe(400);
    expect(long.json().error.message).toContain('Content-Type');
  });

  it('sweeps the bytes of uploads a crash left behind once they are a day old, and nothing else', async () => {
    const bucket = await createBucket();
    expect((await put(bucket, 'kept.txt', 'still here')).statusCode).toBe(201);
    const now = Date.now();
    const stale = now - ORPHAN_AGE_MS - 60_000;
    // What a crash leaves: bytes of an upload whose object row was never written, one old and one recent.
    const storages = { disk: new DiskBlobStorage(path.join(t.config.dataDir, 'files')), database: new DatabaseBlobStorage(t.ctx.database.db, t.ctx.database.dialect) };
    const orphan = async (startedAt: number) => {
      const blobId = timeOrderedId('blob', startedAt);
      if (storage === 'database') {
        await t.ctx.database.db.insertInto('file_blobs').values({ blob_id: blobId, seq: 0, data: Buffer.from('orphan') }).execute();
      } else {
        const temp = path.join(t.config.dataDir, 'files', 'tmp', `${blobId}.part`);
        fs.writeFileSync(temp, 'orphan');
        fs.utimesSync(temp, new Date(startedAt), new Date(startedAt));
      }
    };
    await orphan(stale);
    await orphan(now - 60_000);
    const before = await storedBlobCount(t, storage);
    expect(await storages[storage].sweep(now - ORPHAN_AGE_MS)).toBe(1);
    expect(await storedBlobCount(t, storage)).toBe(before - 1);
    expect(await t.ctx.services.files.sweepOrphans(now)).toBe(0);
    expect((await call(t.app, t.ownerToken, { method: 'GET', url: objectUrl(bucket, 'kept.txt') })).body).toBe('still here');
    // A day later the recent one goes too, and stored objects still stay.
    expect(await t.ctx.services.files.sweepOrphans(now + ORPHAN_AGE_MS)).toBe(1);
    expect((await call(t.app, t.ownerToken, { method: 'GET', url: objectUrl(bucket, 'kept.txt') })).body).toBe('still here');
  });

  it('close() waits for a sweep under way, so the database is not closed under it', async () => {
    const files = t.ctx.services.files;
    const events: string[] = [];
    const original = files.sweepOrphans.bind(files);
    files.sweepOrphans = async (at?: number) => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      events.push('swept');
      return original(at);
    };
    try {
      await files.close(); // the sweeping the app started
      files.start();
      await files.close();
      events.push('closed');
      expect(events).toEqual(['swept', 'closed']);
    } finally {
      files.sweepOrphans = original;
    }
  });

  it('refuses an object over the size limit with 413 and keeps nothing', async () => {
    const bucket = await createBucket();
    const before = await storedBlobCount(t, storage);
    const res = await put(bucket, 'big.bin', Buffer.alloc(4 * 1024 * 1024 + 1));
    expect(res.statusCode).toBe(413);
    expect(res.json().error.message).toContain(String(4 * 1024 * 1024));
    expect((await call(t.app, t.ownerToken, { method: 'GET', url: objectUrl(bucket, 'big.bin') })).statusCode).toBe(404);
    expect(await storedBlobCount(t, storage)).toBe(before);
    const exact = await put(bucket, 'exact.bin', Buffer.alloc(4 * 1024 * 1024));
    expect(exact.statusCode).toBe(201);
  });

  it('answers 404 for a missing bucket or object, naming it', async () => {
    const bucket = await createBucket();
    for (const [method, url] of [
      ['PUT', objectUrl('no-such-bucket', 'a')],
      ['GET', objectUrl('no-such-bucket', 'a')],
      ['DELETE', objectUrl('no-such-bucket', 'a')],
      ['GET', `${FILES}/no-such-bucket/objects`],
    ] as const) {
      const res = await call(t.app, t.ownerToken, { method, url, payload: method === 'PUT' ? 'x' : undefined });
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json().error.message).toContain('no-such-bucket');
    }
    for (const method of ['GET', 'DELETE'] as const) {
      const res = await call(t.app, t.ownerToken, { method, url: objectUrl(bucket, 'missing.txt') });
      expect(res.statusCode).toBe(404);
      expect(res.json().error.message).toContain('missing.txt');
    }
  });

  it.each([
    ['a control character', 'bad%01key'],
    ['a key of 1,025 characters', 'k'.repeat(1025)],
    // Regressions: 1,000 CJK characters (3,000 bytes) did not fit PostgreSQL's unique index on keys (a 500), and C1
    // control characters (U+0085, next line) were stored.
    ['a key of 1,025 bytes in UTF-8', encodeURIComponent('é'.repeat(512)) + 'k'],
    ['1,000 CJK characters', encodeURIComponent(Array.from({ length: 1000 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20000))).join(''))],
    ['a C1 control character', 'bad%C2%85key'],
    ['a trailing slash', 'dir/'],
    ['a leading slash', '/dir'],
    ['a double slash', 'a//b'],
  ])('refuses an object key with %s (400)', async (_case, key) => {
    const bucket = await createBucket();
    const res = await call(t.app, t.ownerToken, { method: 'PUT', url: `${FILES}/${bucket}/objects/${key}`, payload: 'x' });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/object key/);
  });

  it('takes a key of exactly 1,024 bytes in UTF-8', async () => {
    const bucket = await createBucket();
    const key = 'é'.repeat(512);
    expect((await call(t.app, t.ownerToken, { method: 'PUT', url: `${FILES}/${bucket}/objects/${encodeURIComponent(key)}`, payload: 'x' })).statusCode).toBe(201);
    expect((await call(t.app, t.ownerToken, { method: 'GET', url: `${FILES}/${bucket}/objects/${encodeURIComponent(key)}` })).body).toBe('x');
  });

  // Regression: Latin-1 bytes in a Content-Type were stored as characters and sent back as their UTF-8 bytes.
  it('refuses a Content-Type with characters beyond visible ASCII (400)', async () => {
    const bucket = await createBucket();
    const res = await call(t.app, t.ownerToken, { method: 'PUT', url: `${FILES}/${bucket}/objects/typed`, payload: 'x', headers: { 'content-type': 'text/plain; charset=\u00e9\u00ff' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toContain('Content-Type');
    expect((await call(t.app, t.ownerToken, { method: 'GET', url: `${FILES}/${bucket}/objects/typed` })).statusCode).toBe(404);
  });

  it('lists objects by key with prefix, pagination after a key, and a clamped limit', async () => {
    const bucket = await createBucket();
    for (const key of ['b/2', 'a/1', 'b/1', 'c', 'b/3']) expect((await put(bucket, key, key)).statusCode).toBe(201);
    const list = (query: string) => call(t.app, t.ownerToken, { method: 'GET', url: `${FILES}/${bucket}/objects${query}` });
    const all = await list('');
    expect(all.json().data.map((o: { object_key: string }) => o.object_key)).toEqual(['a/1', 'b/1', 'b/2', 'b/3', 'c']);
    expect(all.json().has_more).toBe(false);
    expect(all.json().data[0]).toEqual({ bucket_key: bucket, object_key: 'a/1', size: 3, content_type: 'application/octet-stream', sha256: sha256('a/1'), created_at: expect.any(Number) });
    const prefixed = await list('?prefix=b/');
    expect(prefixed.json().data.map((o: { object_key: string }) => o.object_key)).toEqual(['b/1', 'b/2', 'b/3']);
    const page1 = await list('?limit=2');
    expect(page1.json().data.map((o: { object_key: string }) => o.object_key)).toEqual(['a/1', 'b/1']);
    expect(page1.json().has_more).toBe(true);
    const page2 = await list('?limit=2&after=b/1');
    expect(page2.json().data.map((o: { object_key: string }) => o.object_key)).toEqual(['b/2', 'b/3']);
    const clamped = await list('?limit=0');
    expect(clamped.json().data).toHaveLength(1);
    expect((await list('?limit=5000')).json().data).toHaveLength(5);
    expect((await list('?limit=abc')).statusCode).toBe(400);
    expect((await list('?sort=desc')).statusCode).toBe(400);
  });

  it('deletes an object and its bytes', async () => {
    const bucket = await createBucket();
    const before = await storedBlobCount(t, storage);
    expect((await put(bucket, 'gone.txt', 'bye')).statusCode).toBe(201);
    const res = await call(t.app, t.ownerToken, { method: 'DELETE', url: objectUrl(bucket, 'gone.txt') });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ deleted: true, bucket_key: bucket, object_key: 'gone.txt' });
    expect((await call(t.app, t.ownerToken, { method: 'GET', url: objectUrl(bucket, 'gone.txt') })).statusCode).toBe(404);
    expect(await storedBlobCount(t, storage)).toBe(before);
  });

  it("keeps projects apart: another project's bucket is a 404 and its keys are its own", async () => {
    const bucket = await createBucket();
    expect((await put(bucket, 'secret.txt', 'mine')).statusCode).toBe(201);
    const projectKey = `files-${Date.now().toString(36)}${counter++}`;
    const project = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: { name: projectKey, key: projectKey } });
    expect(project.statusCode, project.body).toBe(201);
    const other = await createToken(t, { projectId: projectKey, role: 'owner' });
    for (const [method, url] of [
      ['GET', objectUrl(bucket, 'secret.txt')],
      ['DELETE', objectUrl(bucket, 'secret.txt')],
      ['PUT', objectUrl(bucket, 'secret.txt')],
      ['GET', `${FILES}/${bucket}/objects`],
    ] as const) {
      expect((await call(t.app, other.value, { method, url, payload: method === 'PUT' ? 'theirs' : undefined })).statusCode, `${method} ${url}`).toBe(404);
    }
    expect((await call(t.app, other.value, { method: 'GET', url: FILES })).json().data).toEqual([]);
    await createBucket(bucket, other.value);
    expect((await put(bucket, 'secret.txt', 'theirs', {}, other.value)).statusCode).toBe(201);
    expect((await call(t.app, t.ownerToken, { method: 'GET', url: objectUrl(bucket, 'secret.txt') })).body).toBe('mine');
  });

  it('lets a viewer read but not write (403), and audits writes without their content', async () => {
    const bucket = await createBucket();
    expect((await put(bucket, 'read-me.txt', 'top secret body')).statusCode).toBe(201);
    const viewer = await createToken(t, { role: 'viewer' });
    expect((await call(t.app, viewer.value, { method: 'GET', url: objectUrl(bucket, 'read-me.txt') })).statusCode).toBe(200);
    expect((await call(t.app, viewer.value, { method: 'GET', url: `${FILES}/${bucket}/objects` })).statusCode).toBe(200);
    expect((await put(bucket, 'x.txt', 'x', {}, viewer.value)).statusCode).toBe(403);
    expect((await call(t.app, viewer.value, { method: 'DELETE', url: objectUrl(bucket, 'read-me.txt') })).statusCode).toBe(403);
    expect((await call(t.app, viewer.value, { method: 'POST', url: FILES, payload: { key: freshBucket() } })).statusCode).toBe(403);
    await flushAudit(t);
    const logs = await call(t.app, t.ownerToken, { method: 'GET', url: '/api/client/v1/audit/logs?action=files.putObject&limit=100' });
    expect(logs.statusCode).toBe(200);
    const events = JSON.stringify(logs.json());
    expect(events).toContain(`${bucket}/read-me.txt`);
    expect(events).not.toContain('top secret body');
  });
});

describe('document store over real HTTP', () => {
  let t: TestApp;
  let base: string;

  beforeAll(async () => {
    t = await createTestApp({ env: { WAYGATE_FILES_MAX_BYTES: String(2 * 1024 * 1024) } });
    base = await t.app.listen({ port: 0, host: '127.0.0.1' });
    const res = await call(t.app, t.ownerToken, { method: 'POST', url: FILES, payload: { key: 'stream' } });
    expect(res.statusCode).toBe(201);
  });
  afterAll(async () => t?.close());

  /** A chunked upload (no Content-Length) of `total` bytes in 64 KiB writes. */
  function chunkedPut(key: string, total: number): Promise<{ status: number; body: string; sent: Buffer }> {
    const sent = randomBytes(total);
    return new Promise((resolve, reject) => {
      // agent: false, so no keep-alive socket is left for app.close() to wait on.
      const headers = { authorization: `Bearer ${t.ownerToken}`, 'content-type': 'application/jsonl' };
      const req = http.request(`${base}${objectUrl('stream', key)}`, { method: 'PUT', headers, agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, sent }));
      });
      req.on('error', (err) => ((err as NodeJS.ErrnoException).code === 'EPIPE' || (err as NodeJS.ErrnoException).code === 'ECONNRESET' ? undefined : reject(err)));
      let offset = 0;
      const pump = () => {
        while (offset < total) {
          const chunk = sent.subarray(offset, Math.min(total, offset + 64 * 1024));
          offset += chunk.length;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
        req.end();
      };
      pump();
    });
  }

  it('streams a chunked upload to storage and back', async () => {
    const { status, body, sent } = await chunkedPut('big.jsonl', 1.5 * 1024 * 1024);
    expect(status, body).toBe(201);
    expect(JSON.parse(body)).toMatchObject({ size: sent.length, sha256: sha256(sent), content_type: 'application/jsonl' });
    const download = await new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
      http
        .get(`${base}${objectUrl('stream', 'big.jsonl')}`, { headers: { authorization: `Bearer ${t.ownerToken}` }, agent: false }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        })
        .on('error', reject);
    });
    expect(download.status).toBe(200);
    expect(download.body.equals(sent)).toBe(true);
  });

  it.each(['a/../b', './b', 'a/%2E%2E/b'])('refuses the object key %s, which HTTP clients would rewrite (400)', async (key) => {
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const { hostname, port } = new URL(base);
      // A path option (not a URL string, which new URL() would normalise) goes out exactly as written.
      const options = { hostname, port, path: `${FILES}/stream/objects/${key}`, method: 'PUT', headers: { authorization: `Bearer ${t.ownerToken}` }, agent: false };
      const req = http.request(options, (r) => {
        let body = '';
        r.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
        r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end('x');
    });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body).error.message).toContain('segment');
  });

  it('keeps nothing of an upload the client abandons halfway', async () => {
    const blobsBefore = filesUnder(path.join(t.config.dataDir, 'files', 'blobs')).length;
    const errorsBefore = t.logs.filter((text) => (JSON.parse(text) as { level: number }).level >= 50).length;
    const req = http.request(`${base}${objectUrl('stream', 'abandoned.bin')}`, { method: 'PUT', headers: { authorization: `Bearer ${t.ownerToken}` }, agent: false });
    req.on('error', () => undefined); // the destroy below
    req.write(randomBytes(256 * 1024));
    // The upload is under way: its bytes are going to a temporary file.
    await vi.waitFor(() => expect(filesUnder(path.join(t.config.dataDir, 'files', 'tmp'))).toHaveLength(1), { timeout: 5_000, interval: 10 });
    req.destroy();
    await vi.waitFor(() => expect(filesUnder(path.join(t.config.dataDir, 'files', 'tmp'))).toEqual([]), { timeout: 5_000, interval: 20 });
    expect((await call(t.app, t.ownerToken, { method: 'GET', url: objectUrl('stream', 'abandoned.bin') })).statusCode).toBe(404);
    expect(filesUnder(path.join(t.config.dataDir, 'files', 'blobs'))).toHaveLength(blobsBefore);
    // The client's doing (a 499 nobody receives), not a server failure: no error is logged once the handler is done.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(t.logs.filter((text) => (JSON.parse(text) as { level: number }).level >= 50).length).toBe(errorsBefore);
  });

  it('stops a chunked upload that passes the limit with 413 and keeps nothing', async () => {
    const { status, body } = await chunkedPut('too-big.jsonl', 3 * 1024 * 1024);
    expect(status).toBe(413);
    expect(JSON.parse(body).error.message).toContain(String(2 * 1024 * 1024));
    const res = await call(t.app, t.ownerToken, { method: 'GET', url: objectUrl('stream', 'too-big.jsonl') });
    expect(res.statusCode).toBe(404);
    expect(filesUnder(path.join(t.config.dataDir, 'files', 'tmp'))).toEqual([]);
  });
});
