import { randomBase32 } from '../../src/platform/ids.js';
import { call, type TestApp } from './app.js';

/** Registers a model in the session's project (default: the admin's, project `default`) and returns its key. */
export async function registerModel(
  t: Pick<TestApp, 'app' | 'adminSession'>,
  body: Record<string, unknown>,
  options: { session?: string; project?: string } = {},
): Promise<string> {
  const payload = { key: `m-${randomBase32(8).toLowerCase()}`, capabilities: ['chat'], ...body };
  const headers = options.project ? { 'x-waygate-project': options.project } : undefined;
  const res = await call(t.app, options.session ?? t.adminSession, { method: 'POST', url: '/api/models', payload, headers });
  if (res.statusCode !== 201) throw new Error(`model create failed: ${res.statusCode} ${res.body}`);
  return payload.key as string;
}

/** A chat request body for a model. */
export function chatBody(model: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model, messages: [{ role: 'user', content: 'Say hello' }], ...extra };
}
