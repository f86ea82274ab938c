import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { randomBase32 } from '../../src/platform/ids.js';
import { call, createToken, type TestApp } from './app.js';

/** A 4xx in the error envelope and nothing else: `{error: {message, type, code?}}`. */
export function expectClientError(res: LightMyRequestResponse, status: number, message?: RegExp | string): void {
  expect(res.statusCode, res.body).toBe(status);
  const body = res.json();
  expect(Object.keys(body)).toEqual(['error']);
  expect(typeof body.error.message).toBe('string');
  expect(typeof body.error.type).toBe('string');
  if (message) expect(body.error.message).toMatch(message);
}

/** A new tenant: its owner's session and an owner token of its default project. */
export async function otherTenant(t: TestApp): Promise<{ session: string; token: string }> {
  const email = `owner-${randomBase32(6).toLowerCase()}@example.test`;
  const tenant = await call(t.app, t.adminSession, { method: 'POST', url: '/api/tenants', payload: { name: `Tenant ${randomBase32(4)}`, ownerEmail: email, ownerPassword: 'tenant-b-password' } });
  expect(tenant.statusCode, tenant.body).toBe(201);
  const session = (await t.app.inject({ method: 'POST', url: '/api/auth/login', payload: { email, password: 'tenant-b-password' } })).json().token as string;
  const token = (await createToken(t, { role: 'owner', projectId: tenant.json().project.id }, session)).value;
  return { session, token };
}
