import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../types.js';

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
 * except a guardrail that no longer exists (a row removed behind Waygate's back).
 */
export function migration0012ModelGuardrailLinks(dialect: Dialect): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('model_guardrails')
        .addColumn('tenant_id', 'text', (c) => c.notNull())
        .addColumn('project_id', 'text', (c) => c.notNull())
        .addColumn('model_key', 'text', (c) => c.notNull())
        .addColumn('guardrail_key', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('model_guardrails_pk', ['tenant_id', 'project_id', 'model_key', 'guardrail_key'])
        .addForeignKeyConstraint('model_guardrails_model_fk', ['tenant_id', 'project_id', 'model_key'], 'models', ['tenant_id', 'project_id', 'key'], (c) => c.onDelete('cascade'))
        .addForeignKeyConstraint('model_guardrails_guardrail_fk', ['tenant_id', 'project_id', 'guardrail_key'], 'guardrails', ['tenant_id', 'project_id', 'key'])
        .execute();
      // Finding a guardrail's users (its delete) reads by guardrail key.
      await db.schema.createIndex('model_guardrails_guardrail_idx').on('model_guardrails').columns(['tenant_id', 'project_id', 'guardrail_key']).execute();

      const tables = db as unknown as Kysely<LinkTables>;
      const existing = new Set((await tables.selectFrom('guardrails').select(['tenant_id', 'project_id', 'key']).execute()).map((g) => `${g.tenant_id}\n${g.project_id}\n${g.key}`));
      for (const model of await tables.selectFrom('models').select(['tenant_id', 'project_id', 'key', 'guardrails']).execute()) {
        const named = (dialect === 'postgres' ? model.guardrails : JSON.parse(model.guardrails as string)) as { input: string[]; output: string[] };
        const keys = [...new Set([...named.input, ...named.output])].filter((key) => existing.has(`${model.tenant_id}\n${model.project_id}\n${key}`));
        if (keys.length === 0) continue;
        await tables
          .insertInto('model_guardrails')
          .values(keys.map((key) => ({ tenant_id: model.tenant_id, project_id: model.project_id, model_key: model.key, guardrail_key: key })))
          .execute();
      }
    },
  };
}
