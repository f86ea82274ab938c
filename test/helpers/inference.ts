import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { ADMIN_EMAIL, call, createTestApp, createToken, type TestApp, type TestAppOptions } from './app.js';
import { startFakeOpenAi, type FakeUpstream } from './fake-upstream.js';
import { registerModel } from './models.js';
import type { Selectable } from 'kysely';
import type { UsageEventsTable } from '../../src/db/types.js';

/** Prefix of the OpenAI-compatible client endpoints. */
export const CLIENT = '/api/client/v1';

/** The provider key every fake-backed model is registered with; the fake sees it as `Authorization: Bearer ...`. */
export const UPSTREAM_KEY = 'sk-fake-upstream-key';

export interface InferenceSetup {
  t: TestApp;
  fake: FakeUpstream;
  /** A member API token of project `default`. */
  token: { id: string; value: string };
  close(): Promise<void>;
}

/** A test app, a fake OpenAI-compatible upstream and an API token to call the client endpoints with. */
export async function setupInference(options: TestAppOptions = {}): Promise<InferenceSetup> {
  const t = await createTestApp(options);
  const fake = await startFakeOpenAi();
  const token = await createToken(t, { name: 'inference' });
  return {
    t,
    fake,
    token,
    close: async () => {
      await t.close();
      await fake.close();
    },
  };
}

/**
 * Registers an `openai-compatible` model served by the fake (chat, embeddings and moderation unless told otherwise)
 * and returns its key; the upstream sees `upstreamModel` (default `gpt-upstream`).
 */
export function registerFakeModel(t: TestApp, fake: Pick<FakeUpstream, 'baseUrl'>, body: Record<string, unknown> = {}): Promise<string> {
  return registerModel(t, {
    provider: { type: 'openai-compatible', baseUrl: fake.baseUrl, apiKey: UPSTREAM_KEY },
    upstreamModel: 'gpt-upstream',
    capabilities: ['chat', 'embeddings', 'moderation'],
    ...body,
  });
}

/** POSTs JSON to a client endpoint (`/chat/completions`, ...) with an API token. */
export function post(t: TestApp, token: string, path: string, payload: unknown, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return call(t.app, token, { method: 'POST', url: `${CLIENT}${path}`, payload: payload as InjectOptions['payload'], headers });
}

/** The `data:` payloads of an SSE body, in order (`[DONE]` included). */
export function sseData(body: string): string[] {
  return body
    .split(/\n\n/)
    .map((event) => event.trim())
    .filter((event) => event !== '')
    .map((event) => {
      if (!event.startsWith('data: ')) throw new Error(`not an SSE data event: ${JSON.stringify(event)}`);
      return event.slice('data: '.length);
    });
}

/** The JSON events of an SSE body, `[DONE]` left out. */
export function sseJson(body: string): Record<string, unknown>[] {
  return sseData(body)
    .filter((data) => data !== '[DONE]')
    .map((data) => JSON.parse(data) as Record<string, unknown>);
}

/** Concatenated `choices[0].delta.content` of chat chunks. */
export function streamedText(events: Record<string, unknown>[]): string {
  let text = '';
  for (const event of events) {
    const choices = event.choices as { delta?: { content?: string } }[] | undefined;
    text += choices?.[0]?.delta?.content ?? '';
  }
  return text;
}

export type UsageRow = Selectable<UsageEventsTable>;

/** Flushes buffered usage and returns the usage events of one model (numbers as numbers on both backends). */
export async function usageRowsOf(t: TestApp, model: string): Promise<UsageRow[]> {
  await t.ctx.services.usage.flush();
  const rows = await t.ctx.database.db.selectFrom('usage_events').selectAll().where('model', '=', model).orderBy('created_at').orderBy('id').execute();
  return rows.map((row) => ({
    ...row,
    input_tokens: Number(row.input_tokens),
    output_tokens: Number(row.output_tokens),
    total_tokens: Number(row.total_tokens),
    cost: Number(row.cost),
    latency_ms: Number(row.latency_ms),
    upstream_latency_ms: Number(row.upstream_latency_ms),
    status: Number(row.status),
    streamed: Number(row.streamed),
    created_at: Number(row.created_at),
  }));
}

/** Tenant and project ids of project `default`, and the admin's user id (the creator of test tokens). */
export async function defaultScope(t: TestApp): Promise<{ tenantId: string; projectId: string; adminUserId: string }> {
  const db = t.ctx.database.db;
  const admin = await db.selectFrom('users').select(['id', 'tenant_id']).where('email', '=', ADMIN_EMAIL).executeTakeFirstOrThrow();
  const project = await db.selectFrom('projects').select('id').where('tenant_id', '=', admin.tenant_id).where('key', '=', 'default').executeTakeFirstOrThrow();
  return { tenantId: admin.tenant_id, projectId: project.id, adminUserId: admin.id };
}
