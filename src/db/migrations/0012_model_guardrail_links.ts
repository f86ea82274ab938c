import type { Kysely, Migration } from 'kysely';
import { fromJson } from '../json.js';

type LinkTables = {
  models: { tenant_id: string; project_id: string; key: string; guardrails: unknown };
  guardrails: { tenant_id: string; project_id: string; key: string };
  model_guardrails: { tenant_id: string; project_id: string; model_key: string; guardrail_key: string };
};

/**
 * The guardrails each model names, as rows the database holds to its guardrails: a guardrail a model names cannot be
 * deleted, and a model cannot name a deleted guardrail, even when the two changes run at once on two instances (each
 * checked the other's old state, and the model then failed every call with `guardrail_missing`). The model's
 * `guardrails` column keeps the order and the stages; these rows only hold the references. Existing names are copied,
 * except a guardrail that no longer exists (a row removed behind Waygate's back). SQLite runs migrations outside a
 * transaction, so a start that died half-way through this one must be able to run it again.
 */
export const migration0012ModelGuardrailLinks: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('model_guardrails')
      .ifNotExists()
      .addColumn('tenant_id', 'text', (c) => c.notNull())
      .addColumn('project_id', 'text', (c) => c.notNull())
      .addColumn('model_key', 'text', (c) => c.notNull())
      .addColumn('guardrail_key', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('model_guardrails_pk', ['tenant_id', 'project_id', 'model_key', 'guardrail_key'])
      .addForeignKeyConstraint('model_guardrails_model_fk', ['tenant_id', 'project_id', 'model_key'], 'models', ['tenant_id', 'project_id', 'key'], (c) => c.onDelete('cascade'))
      .addForeignKeyConstraint('model_guardrails_guardrail_fk', ['tenant_id', 'project_id', 'guardrail_key'], 'guardrails', ['tenant_id', 'project_id', 'key'])
      .execute();
    // Finding a guardrail's users (its delete) reads by guardrail key.
    await db.schema.createIndex('model_guardrails_guardrail_idx').ifNotExists().on('model_guardrails').columns(['tenant_id', 'project_id', 'guardrail_key']).execute();

    const tables = db as unknown as Kysely<LinkTables>;
    const existing = new Set((await tables.selectFrom('guardrails').select(['tenant_id', 'project_id', 'key']).execute()).map((g) => `${g.tenant_id}\n${g.project_id}\n${g.key}`));
    for (const model of await tables.selectFrom('models').select(['tenant_id', 'project_id', 'key', 'guardrails']).execute()) {
      const keys = namedKeys(model.guardrails).filter((key) => existing.has(`${model.tenant_id}\n${model.project_id}\n${key}`));
      if (keys.length === 0) continue;
      await tables
        .insertInto('model_guardrails')
        .values(keys.map((key) => ({ tenant_id: model.tenant_id, project_id: model.project_id, model_key: model.key, guardrail_key: key })))
        .onConflict((c) => c.doNothing())
        .execute();
    }
  },
};

/** The keys a stored `guardrails` value names, once each; a malformed value names none. */
function namedKeys(stored: unknown): string[] {
  let named: unknown;
  try {
    named = fromJson(stored);
  } catch {
    return [];
  }
  const stage = (value: unknown) => (Array.isArray(value) ? value.filter((key): key is string => typeof key === 'string') : []);
  const record = (named ?? {}) as { input?: unknown; output?: unknown };
  return [...new Set([...stage(record.input), ...stage(record.output)])];
}
