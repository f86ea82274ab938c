import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTestApp, type TestApp } from '../helpers/app.js';

const FILES = '/api/client/v1/files/buckets';

describe('document store uploads with a Content-Type that is no media type', () => {
  let t: TestApp;
  const bucket = 'typeless';

  beforeAll(async () => {
    t = await createTestApp();
    expect((await call(t.app, t.ownerToken, { method: 'POST', url: FILES, payload: { key: bucket } })).statusCode).toBe(201);
  });
  afterAll(async () => t?.close());

  it.each(['', ' ', 'foo', 'text', ';charset=utf-8', 'text/', '/plain', 'text/plain garbage'])(
    'stores the raw body of a PUT with Content-Type %j as application/octet-stream',
    async (contentType) => {
      const key = `obj-${Buffer.from(contentType).toString('hex')}`;
      const put = await call(t.app, t.ownerToken, { method: 'PUT', url: `${FILES}/${bucket}/objects/${key}`, payload: '{"not": parsed', headers: { 'content-type': contentType } });
      expect(put.statusCode, put.body).toBe(201);
      expect(put.json()).toMatchObject({ size: 14, content_type: 'application/octet-stream' });
      const got = await call(t.app, t.ownerToken, { method: 'GET', url: `${FILES}/${bucket}/objects/${key}` });
      expect(got.headers['content-type']).toBe('application/octet-stream');
      expect(got.body).toBe('{"not": parsed');
    },
  );

  it('keeps a real media type as sent, parameters included', async () => {
    const put = await call(t.app, t.ownerToken, { method: 'PUT', url: `${FILES}/${bucket}/objects/typed`, payload: 'x', headers: { 'content-type': 'Text/Plain ; charset=utf-8' } });
    expect(put.statusCode, put.body).toBe(201);
    expect(put.json().content_type).toBe('Text/Plain ; charset=utf-8');
  });

  it('still answers a JSON route a Content-Type that is no media type with 415', async () => {
    const res = await call(t.app, t.ownerToken, { method: 'POST', url: FILES, payload: '{"key":"other"}', headers: { 'content-type': 'text' } });
    expect(res.statusCode).toBe(415);
  });
});
