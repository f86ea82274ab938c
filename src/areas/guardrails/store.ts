import type { Selectable } from 'kysely';
import { fromJson, toJson } from '../../db/json.js';
import type { Db, Dialect, GuardrailEvaluationsTable, GuardrailsTable } from '../../db/types.js';
import type { ProjectScope } from '../../http/principal.js';

export const GUARDRAIL_TYPES = ['pii', 'moderation', 'prompt_shield', 'custom_prompt'] as const;
export type GuardrailType = (typeof GUARDRAIL_TYPES)[number];
export const GUARDRAIL_ACTIONS = ['block', 'flag', 'redact'] as const;
export type GuardrailAction = (typeof GUARDRAIL_ACTIONS)[number];
export const GUARDRAIL_TARGETS = ['input', 'output', 'both'] as const;
export type GuardrailTarget = (typeof GUARDRAIL_TARGETS)[number];
export const FAIL_MODES = ['open', 'closed'] as const;
export type FailMode = (typeof FAIL_MODES)[number];

export interface GuardrailRecord {
  id: string;
  tenantId: string;
  projectId: string;
  key: string;
  name: string;
  type: GuardrailType;
  action: GuardrailAction;
  target: GuardrailTarget;
  /** Type-specific settings, validated by the service. */
  config: Record<string, unknown>;
  modelKey: string | null;
  failMode: FailMode;
  enabled: boolean;
  createdAt: number;
  updatedAt: number;
}

/** One evaluation, as recorded: never the text itself, only its start with PII redacted. */
export interface EvaluationRecord {
  id: string;
  tenantId: string;
  projectId: string;
  guardrailKey: string;
  guardrailType: GuardrailType;
  stage: 'evaluate' | 'input' | 'output';
  model: string | null;
  requestId: string;
  passed: boolean;
  action: GuardrailAction;
  outcome: 'blocked' | 'redacted' | 'flagged' | null;
  categories: string[];
  maskedText: string;
  latencyMs: number;
  createdAt: number;
}

function toRecord(row: Selectable<GuardrailsTable>): GuardrailRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    key: row.key,
    name: row.name,
    type: row.type as GuardrailType,
    action: row.action as GuardrailAction,
    target: row.target as GuardrailTarget,
    config: fromJson<Record<string, unknown>>(row.config) ?? {},
    modelKey: row.model_key,
    failMode: row.fail_mode as FailMode,
    enabled: Number(row.enabled) === 1,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

function toEvaluation(row: Selectable<GuardrailEvaluationsTable>): EvaluationRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    guardrailKey: row.guardrail_key,
    guardrailType: row.guardrail_type as GuardrailType,
    stage: row.stage as EvaluationRecord['stage'],
    model: row.model,
    requestId: row.request_id,
    passed: Number(row.passed) === 1,
    action: row.action as GuardrailAction,
    outcome: row.outcome as EvaluationRecord['outcome'],
    categories: fromJson<string[]>(row.categories) ?? [],
    maskedText: row.masked_text,
    latencyMs: Number(row.latency_ms),
    createdAt: Number(row.created_at),
  };
}

/** SQLite allows 32,766 bound values per statement; 15 columns x 500 rows stays well below. */
const INSERT_CHUNK = 500;

/** Guardrail configurations and evaluation records. */
export class GuardrailStore {
  constructor(private readonly db: Db, private readonly dialect: Dialect) {}

  private row(record: GuardrailRecord): GuardrailsTable {
    return {
      id: record.id,
      tenant_id: record.tenantId,
      project_id: record.projectId,
      key: record.key,
      name: record.name,
      type: record.type,
      action: record.action,
      target: record.target,
      config: toJson(this.dialect, record.config),
      model_key: record.modelKey,
      fail_mode: record.failMode,
      enabled: record.enabled ? 1 : 0,
      created_at: record.createdAt,
      updated_at: record.updatedAt,
    };
  }

  /** Inserts through `trx`; throws the database's unique violation when the project already has the key. */
  async insert(trx: Db, record: GuardrailRecord): Promise<void> {
    await trx.insertInto('guardrails').values(this.row(record)).execute();
  }

  /**
   * Holds the guardrail's row until the transaction `trx` ends (locked on PostgreSQL; SQLite's one connection runs one
   * transaction at a time) and answers its updatedAt; null when it is gone.
   */
  async hold(trx: Db, scope: ProjectScope, id: string): Promise<number | null> {
    const row = await trx
      .selectFrom('guardrails')
      .select('updated_at')
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('id', '=', id)
      .$if(this.dialect === 'postgres', (q) => q.forUpdate())
      .executeTakeFirst();
    return row ? Number(row.updated_at) : null;
  }

  /** Writes the record through `trx`, which holds its row (hold). */
  async update(trx: Db, scope: ProjectScope, record: GuardrailRecord): Promise<void> {
    const { id: _id, tenant_id: _tenant, project_id: _project, key: _key, created_at: _created, ...changes } = this.row(record);
    await trx.updateTable('guardrails').set(changes).where('tenant_id', '=', scope.tenantId).where('project_id', '=', scope.projectId).where('id', '=', record.id).execute();
  }

  /**
   * The guardrails with these keys, held against change and deletion until the transaction `trx` ends (FOR SHARE on
   * PostgreSQL): what a model that names them is checked against.
   */
  async findShared(trx: Db, scope: ProjectScope, keys: string[]): Promise<GuardrailRecord[]> {
    if (keys.length === 0) return [];
    const rows = await trx
      .selectFrom('guardrails')
      .selectAll()
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('key', 'in', keys)
      .$if(this.dialect === 'postgres', (q) => q.forShare())
      .execute();
    return rows.map(toRecord);
  }

  /** The guardrails that name the model as their judge, by key, as `trx` reads them. */
  async judgedBy(trx: Db, scope: ProjectScope, modelKey: string): Promise<GuardrailRecord[]> {
    const rows = await trx
      .selectFrom('guardrails')
      .selectAll()
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('model_key', '=', modelKey)
      .orderBy('key')
      .execute();
    return rows.map(toRecord);
  }

  async find(scope: ProjectScope, key: string): Promise<GuardrailRecord | null> {
    const row = await this.db
      .selectFrom('guardrails')
      .selectAll()
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('key', '=', key)
      .executeTakeFirst();
    return row ? toRecord(row) : null;
  }

  async list(scope: ProjectScope): Promise<GuardrailRecord[]> {
    const rows = await this.db.selectFrom('guardrails').selectAll().where('tenant_id', '=', scope.tenantId).where('project_id', '=', scope.projectId).orderBy('key').execute();
    return rows.map(toRecord);
  }

  /** The models that name the guardrail, by key; what keeps it from being deleted. */
  async namedBy(scope: ProjectScope, key: string): Promise<string[]> {
    const rows = await this.db
      .selectFrom('model_guardrails')
      .select('model_key')
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('guardrail_key', '=', key)
      .orderBy('model_key')
      .execute();
    return rows.map((row) => row.model_key);
  }

  /** Fails with a foreign-key violation while a model names the guardrail (namedBy). */
  async delete(scope: ProjectScope, key: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('guardrails')
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('key', '=', key)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  async insertEvaluations(records: EvaluationRecord[]): Promise<void> {
    for (let start = 0; start < records.length; start += INSERT_CHUNK) {
      const rows = records.slice(start, start + INSERT_CHUNK).map((r) => ({
        id: r.id,
        tenant_id: r.tenantId,
        project_id: r.projectId,
        guardrail_key: r.guardrailKey,
        guardrail_type: r.guardrailType,
        stage: r.stage,
        model: r.model,
        request_id: r.requestId,
        passed: r.passed ? 1 : 0,
        action: r.action,
        outcome: r.outcome,
        categories: toJson(this.dialect, r.categories),
        masked_text: r.maskedText,
        latency_ms: r.latencyMs,
        created_at: r.createdAt,
      }));
      await this.db.insertInto('guardrail_evaluations').values(rows).execute();
    }
  }

  /** The newest evaluations of a guardrail, made since `since`. */
  async recentEvaluations(scope: ProjectScope, key: string, limit: number, since: number): Promise<EvaluationRecord[]> {
    const rows = await this.db
      .selectFrom('guardrail_evaluations')
      .selectAll()
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('guardrail_key', '=', key)
      .where('created_at', '>=', since)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.map(toEvaluation);
  }

  /** Evaluations and failed ones since a moment: the fail rate that analytics and alert rules read. */
  async counts(scope: ProjectScope, key: string, since: number): Promise<{ evaluations: number; failed: number }> {
    const row = await this.db
      .selectFrom('guardrail_evaluations')
      .select((eb) => [eb.fn.countAll<number>().as('evaluations'), eb.fn.sum<number>(eb.case().when('passed', '=', 0).then(1).else(0).end()).as('failed')])
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('guardrail_key', '=', key)
      .where('created_at', '>=', since)
      .executeTakeFirstOrThrow();
    return { evaluations: Number(row.evaluations), failed: Number(row.failed ?? 0) };
  }
}
