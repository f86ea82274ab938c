import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toJson } from '../../src/db/json.js';
import { migrateToLatest, schemaMigrator } from '../../src/db/migrate.js';
import { migration0012ModelGuardrailLinks } from '../../src/db/migrations/0012_model_guardrail_links.js';
import { GuardrailStore } from '../../src/areas/guardrails/store.js';
import { ModelStore } from '../../src/areas/models/store.js';
import { randomBase32 } from '../../src/platform/ids.js';
import { BACKENDS, call, createTestApp } from '../helpers/app.js';
import { tempDatabases } from '../helpers/databases.js';
import { twoInstancesSignedIn, type SignedInInstances } from '../helpers/instances.js';
import { chatBody } from '../helpers/models.js';
import { redisReachable, TEST_REDIS_URL } from '../helpers/redis.js';

const hasRedis = await redisReachable();
if (!hasRedis) console.warn(`skipping guardrail link tests across instances: no Redis at ${TEST_REDIS_URL}`);

const ROUNDS = 20;
const newKey = (prefix: string) => `${prefix}-${randomBase32(8).toLowerCase()}`;

/**
 * A guardrail a model names cannot be deleted, and a deleted one cannot be named. Each instance checks against its
 * cached copy of the other area, so two such changes at once on two instances used to both succeed (on PostgreSQL, 1
 * to 3 rounds in 20):
 * the model then answered every call with `guardrail_missing`. The links' foreign key now decides.
 */
// PostgreSQL only: several instances share PostgreSQL, never a SQLite file. Two instances on one SQLite file in one
// process can also stall each other for busy_timeout (one holds the write lock across an await while the other's
// synchronous write blocks the shared event loop), which only this test set-up does.
const backend = 'postgres' as const;
describe.skipIf(!hasRedis || !BACKENDS.includes(backend))('a guardrail deleted on one instance while another names it, on PostgreSQL', () => {
  let t: SignedInInstances;
  beforeAll(async () => {
    t = await twoInstancesSignedIn(backend);
  });
  afterAll(() => t?.close());

  it(`never leaves a model naming a deleted guardrail (${ROUNDS} rounds)`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const guardrail = newKey('g');
      const model = newKey('m');
      expect((await call(t.a, t.session, { method: 'POST', url: '/api/guardrails', payload: { key: guardrail, type: 'pii', action: 'flag' } })).statusCode).toBe(201);
      expect((await call(t.a, t.session, { method: 'POST', url: '/api/models', payload: { key: model, provider: { type: 'mock', mock: { reply: 'ok' } }, capabilities: ['chat'] } })).statusCode).toBe(201);
      // Both instances have the project's guardrails and models cached, the new ones included.
      for (const app of [t.a, t.b]) {
        const listed = await call(app, t.session, { method: 'GET', url: '/api/guardrails' });
        expect(listed.json().guardrails.map((g: { key: string }) => g.key)).toContain(guardrail);
        expect((await call(app, t.token, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody(model) })).statusCode).toBe(200);
      }
      const [deleted, named] = await Promise.all([
        call(t.a, t.session, { method: 'DELETE', url: `/api/guardrails/${guardrail}` }),
        call(t.b, t.session, { method: 'PATCH', url: `/api/models/${model}`, payload: { guardrails: { input: [guardrail] } } }),
      ]);
      const outcome = `round ${round}: delete ${deleted.statusCode} ${deleted.body}, name ${named.statusCode} ${named.body}`;
      // One of them wins: the delete (the PATCH is a 400) or the PATCH (the delete is a 409 naming the model).
      expect([deleted.statusCode, named.statusCode].sort(), outcome).toSatisfy((codes: number[]) => codes.join() === '200,400' || codes.join() === '200,409');
      if (deleted.statusCode === 409) expect(deleted.json().error.message, outcome).toContain(`"${model}"`);
      if (named.statusCode === 400) expect(named.json().error.message, outcome).toContain(guardrail);
      // Whichever won, the model still answers.
      const chat = await call(t.a, t.token, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody(model) });
      expect(chat.statusCode, `${outcome}; chat ${chat.body}`).toBe(200);
    }
  });
  it(`a model naming a guardrail while the guardrail comes to rely on the model: one change lands, never a deadlock (${ROUNDS} rounds)`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const model = newKey('m');
      const guardrail = newKey('g');
      expect((await call(t.a, t.session, { method: 'POST', url: '/api/models', payload: { key: model, provider: { type: 'mock' }, capabilities: ['chat', 'embeddings'] } })).statusCode).toBe(201);
      const judged = { key: guardrail, type: 'custom_prompt', config: { rules: 'Be polite.' }, modelKey: model, target: 'both', enabled: false };
      expect((await call(t.a, t.session, { method: 'POST', url: '/api/guardrails', payload: judged })).statusCode).toBe(201);
      // Each change holds its own row and needs the other's: only one order of taking them, models first, keeps the two
      // from deadlocking. Each also breaks the other's rule (the stage, the judge's capability).
      const [attached, enabled] = await Promise.all([
        call(t.a, t.session, { method: 'PATCH', url: `/api/models/${model}`, payload: { guardrails: { output: [guardrail] }, capabilities: ['embeddings'] } }),
        call(t.b, t.session, { method: 'PATCH', url: `/api/guardrails/${guardrail}`, payload: { enabled: true, target: 'input' } }),
      ]);
      const outcome = `round ${round}: model ${attached.statusCode} ${attached.body}, guardrail ${enabled.statusCode} ${enabled.body}`;
      expect([attached.statusCode, enabled.statusCode].sort(), outcome).toEqual([200, 400]);
      const stored = (await call(t.a, t.session, { method: 'GET', url: '/api/models' })).json().models.find((m: { key: string }) => m.key === model);
      const guardrailNow = (await call(t.a, t.session, { method: 'GET', url: '/api/guardrails' })).json().guardrails.find((g: { key: string }) => g.key === guardrail);
      if (attached.statusCode === 200) expect({ stored, guardrailNow }, outcome).toMatchObject({ stored: { guardrails: { output: [guardrail] } }, guardrailNow: { enabled: false, target: 'both' } });
      else expect({ stored, guardrailNow }, outcome).toMatchObject({ stored: { capabilities: ['chat', 'embeddings'], guardrails: { output: [] } }, guardrailNow: { enabled: true, target: 'input' } });
    }
  });

  /** The project's scope, read from the database (both instances share it). */
  async function defaultScope() {
    const project = await t.contexts[0].database.db.selectFrom('projects').select(['id', 'tenant_id']).where('key', '=', 'default').executeTakeFirstOrThrow();
    return { tenantId: project.tenant_id, projectId: project.id };
  }

  // The same races made certain: each change is written behind the other instance's cache (no change notice).
  it('a guardrail named by a model the deleting instance has not heard of yet is kept (409)', async () => {
    const guardrail = newKey('g');
    const model = newKey('m');
    expect((await call(t.a, t.session, { method: 'POST', url: '/api/guardrails', payload: { key: guardrail, type: 'pii', action: 'flag' } })).statusCode).toBe(201);
    expect((await call(t.a, t.session, { method: 'POST', url: '/api/models', payload: { key: model, provider: { type: 'mock', mock: { reply: 'ok' } }, capabilities: ['chat'] } })).statusCode).toBe(201);
    expect((await call(t.a, t.session, { method: 'GET', url: '/api/models' })).statusCode).toBe(200); // instance a caches the models
    const { database } = t.contexts[1];
    const store = new ModelStore(database.db, database.dialect);
    const stored = (await store.find(await defaultScope(), model))!;
    // The guardrail exists and allows input: the other instance's checks would pass, so none are run here.
    expect(await database.transaction((trx) => store.update(trx, { ...stored, guardrails: { input: [guardrail], output: [] }, updatedAt: stored.updatedAt + 1 }, true))).toBe(true);
    const deleted = await call(t.a, t.session, { method: 'DELETE', url: `/api/guardrails/${guardrail}` });
    expect(deleted.statusCode, deleted.body).toBe(409);
    expect(deleted.json().error.message).toContain(`"${model}"`);
  });

  it('a model cannot name a guardrail deleted behind the naming instance\'s cache (400)', async () => {
    const guardrail = newKey('g');
    const model = newKey('m');
    expect((await call(t.a, t.session, { method: 'POST', url: '/api/guardrails', payload: { key: guardrail, type: 'pii', action: 'flag' } })).statusCode).toBe(201);
    expect((await call(t.a, t.session, { method: 'POST', url: '/api/models', payload: { key: model, provider: { type: 'mock', mock: { reply: 'ok' } }, capabilities: ['chat'] } })).statusCode).toBe(201);
    // A call through instance b of a model with a guardrail makes b cache the project's guardrails, this one included.
    const guarded = newKey('m');
    const pii = newKey('g');
    expect((await call(t.a, t.session, { method: 'POST', url: '/api/guardrails', payload: { key: pii, type: 'pii', action: 'flag' } })).statusCode).toBe(201);
    expect((await call(t.a, t.session, { method: 'POST', url: '/api/models', payload: { key: guarded, provider: { type: 'mock', mock: { reply: 'ok' } }, capabilities: ['chat'], guardrails: { input: [pii], output: [] } } })).statusCode).toBe(201);
    expect((await call(t.b, t.token, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody(guarded) })).statusCode).toBe(200);
    const { database } = t.contexts[0];
    expect(await new GuardrailStore(database.db, database.dialect).delete(await defaultScope(), guardrail)).toBe(true);
    const named = await call(t.b, t.session, { method: 'PATCH', url: `/api/models/${model}`, payload: { guardrails: { input: [guardrail] } } });
    expect(named.statusCode, named.body).toBe(400);
    expect(named.json().error.message).toContain(guardrail);
    const chat = await call(t.a, t.token, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody(model) });
    expect(chat.statusCode, chat.body).toBe(200);
  });
});

/** The database's word is mapped on each backend: its foreign-key error becomes the 409, naming the model. */
describe.each(BACKENDS)('a guardrail held by a link its instance did not know of, on %s', (backend) => {
  it('is not deleted: 409 naming the model that the link says names it', async () => {
    const t = await createTestApp({ backend });
    try {
      const guardrail = newKey('g');
      const model = newKey('m');
      expect((await call(t.app, t.adminSession, { method: 'POST', url: '/api/guardrails', payload: { key: guardrail, type: 'pii', action: 'flag' } })).statusCode).toBe(201);
      expect((await call(t.app, t.adminSession, { method: 'POST', url: '/api/models', payload: { key: model, provider: { type: 'mock' }, capabilities: ['chat'] } })).statusCode).toBe(201);
      // Only the link says so (as when another instance's change has not reached this one's cache).
      const project = await t.ctx.database.db.selectFrom('projects').select(['id', 'tenant_id']).where('key', '=', 'default').executeTakeFirstOrThrow();
      await t.ctx.database.db.insertInto('model_guardrails').values({ tenant_id: project.tenant_id, project_id: project.id, model_key: model, guardrail_key: guardrail }).execute();
      const deleted = await call(t.app, t.adminSession, { method: 'DELETE', url: `/api/guardrails/${guardrail}` });
      expect(deleted.statusCode, deleted.body).toBe(409);
      expect(deleted.json().error.message).toBe(`Guardrail "${guardrail}" is used by model "${model}"; remove it from the model first`);
    } finally {
      await t.close();
    }
  });
});

const database = tempDatabases();

/** Models stored before migration 0012 get links for the guardrails they name. */
describe.each(BACKENDS)('guardrail links of models stored before them, on %s', (backend) => {
  it('are made for each guardrail a model names, except one that no longer exists', async () => {
    const handle = await database(backend);
    expect((await schemaMigrator(handle.db, handle.dialect).migrateTo('0011_user_email_nfc')).error).toBeUndefined();
    const db = handle.db;
    const json = (value: unknown) => toJson(handle.dialect, value) as string;
    await db.insertInto('tenants').values({ id: 'ten_1', name: 'T', created_at: 1 }).execute();
    await db.insertInto('projects').values({ id: 'prj_1', tenant_id: 'ten_1', key: 'default', name: 'Default', created_at: 1 }).execute();
    const guardrail = (key: string) => ({ id: `grd_${key}`, tenant_id: 'ten_1', project_id: 'prj_1', key, name: key, type: 'pii', action: 'flag', target: 'both', config: json({}), model_key: null, fail_mode: 'closed', enabled: 1, created_at: 1, updated_at: 1 });
    await db.insertInto('guardrails').values([guardrail('pii'), guardrail('shield')]).execute();
    const model = (key: string, guardrails: { input: string[]; output: string[] }) => ({
      id: `mdl_${key}`, tenant_id: 'ten_1', project_id: 'prj_1', key, name: key, provider_type: 'mock', provider: json({ type: 'mock' }), provider_secrets: null,
      upstream_model: key, capabilities: json(['chat']), pricing: null, guardrails: json(guardrails), fallbacks: json([]), created_at: 1, updated_at: 1,
    });
    await db
      .insertInto('models')
      .values([
        model('both', { input: ['pii', 'shield'], output: ['pii'] }),
        model('gone', { input: ['deleted-long-ago'], output: ['shield'] }),
        model('none', { input: [], output: [] }),
        // Malformed: names nothing, and does not stop the migration.
        { ...model('odd', { input: [], output: [] }), guardrails: json({ input: 'pii', output: null }) },
      ])
      .execute();
    await migrateToLatest(handle.db, handle.dialect);
    // SQLite runs it outside a transaction: a start that died half-way runs it again without a failure.
    await migration0012ModelGuardrailLinks.up(db as never);
    const links = await db.selectFrom('model_guardrails').select(['model_key', 'guardrail_key']).orderBy('model_key').orderBy('guardrail_key').execute();
    expect(links).toEqual([
      { model_key: 'both', guardrail_key: 'pii' },
      { model_key: 'both', guardrail_key: 'shield' },
      { model_key: 'gone', guardrail_key: 'shield' },
    ]);
    // The database now holds the guardrail to the model that names it.
    await expect(db.deleteFrom('guardrails').where('key', '=', 'shield').execute()).rejects.toThrow();
  });
});
