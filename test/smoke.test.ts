import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, call, createTestApp, createToken, type TestApp } from './helpers/app.js';

describe.each(BACKENDS)('smoke on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend });
  });
  afterAll(async () => t.close());

  it('serves readiness and authenticates the bootstrap token', async () => {
    const ready = await t.app.inject({ method: 'GET', url: '/api/health/ready' });
    expect(ready.statusCode).toBe(200);
    const self = await call(t.app, t.ownerToken, { method: 'GET', url: '/api/client/v1/token' });
    expect(self.statusCode).toBe(200);
    expect(self.json().data.role).toBe('owner');
  });

  it('creates a token whose value works once shown', async () => {
    const token = await createToken(t, { role: 'viewer' });
    const self = await call(t.app, token.value, { method: 'GET', url: '/api/client/v1/token' });
    expect(self.json().data.id).toBe(token.id);
  });
});
