import type { Selectable } from 'kysely';
import { fromJson, toJson } from '../../db/json.js';
import type { Db, Dialect, ModelsTable } from '../../db/types.js';
import type { ProjectScope } from '../../http/principal.js';
import type { Capability, MockOptions, ProviderType } from '../../providers/types.js';

export interface Pricing {
  inputPer1M: number;
  outputPer1M: number;
  currency: string;
}

export interface ModelGuardrails {
  input: string[];
  output: string[];
}

/** Provider settings that may be shown; the API key and header values live sealed in `secrets`. */
export interface ProviderSettings {
  type: ProviderType;
  baseUrl: string | null;
  apiVersion: string | null;
  deployment: string | null;
  mock: MockOptions | null;
  headerNames: string[];
  hasApiKey: boolean;
}

export interface ModelRecord {
  id: string;
  tenantId: string;
  projectId: string;
  key: string;
  name: string;
  provider: ProviderSettings;
  /** Sealed `{ apiKey?, headers? }` (AES-256-GCM), or null when there is nothing secret. */
  secrets: string | null;
  upstreamModel: string;
  capabilities: Capability[];
  pricing: Pricing | null;
  guardrails: ModelGuardrails;
  fallbacks: string[];
  builtIn: boolean;
  createdAt: number;
  updatedAt: number;
}

/** Settings that only one provider type reads. */
export const TYPE_FIELDS = { apiVersion: 'azure-openai', deployment: 'azure-openai', mock: 'mock' } as const;

/**
 * The provider settings as stored, without those of another type: a model moved to another type before they were
 * dropped on a type change still holds them, and they must neither show nor come back into force.
 */
function providerOf(stored: ProviderSettings): ProviderSettings {
  const provider = { ...stored };
  for (const [field, type] of Object.entries(TYPE_FIELDS) as [keyof typeof TYPE_FIELDS, ProviderType][]) {
    if (provider.type !== type) provider[field] = null;
  }
  return provider;
}

function toRecord(row: Selectable<ModelsTable>): ModelRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    key: row.key,
    name: row.name,
    provider: providerOf(fromJson<ProviderSettings>(row.provider)!),
    secrets: row.provider_secrets,
    upstreamModel: row.upstream_model,
    capabilities: fromJson<Capability[]>(row.capabilities) ?? [],
    pricing: fromJson<Pricing>(row.pricing),
    guardrails: fromJson<ModelGuardrails>(row.guardrails) ?? { input: [], output: [] },
    fallbacks: fromJson<string[]>(row.fallbacks) ?? [],
    builtIn: false,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** The guardrail keys a model names at either stage, once each. */
export function namedGuardrails(model: Pick<ModelRecord, 'guardrails'>): string[] {
  return [...new Set([...model.guardrails.input, ...model.guardrails.output])];
}

export class ModelStore {
  constructor(private readonly db: Db, private readonly dialect: Dialect) {}

  private columns(model: ModelRecord) {
    return {
      name: model.name,
      provider_type: model.provider.type,
      provider: toJson(this.dialect, model.provider) as string,
      provider_secrets: model.secrets,
      upstream_model: model.upstreamModel,
      capabilities: toJson(this.dialect, model.capabilities) as string,
      pricing: toJson(this.dialect, model.pricing),
      guardrails: toJson(this.dialect, model.guardrails) as string,
      fallbacks: toJson(this.dialect, model.fallbacks) as string,
      updated_at: model.updatedAt,
    };
  }

  /** Inserts the model and its guardrail links through `trx`. */
  async insert(trx: Db, model: ModelRecord): Promise<void> {
    await trx
      .insertInto('models')
      .values({ id: model.id, tenant_id: model.tenantId, project_id: model.projectId, key: model.key, created_at: model.createdAt, ...this.columns(model) })
      .execute();
    await this.link(trx, model);
  }

  /**
   * Writes the model through `trx`, which holds its row (hold); false when it is gone. `relink`: its guardrails were
   * sent, so its links are written again. Otherwise they are left alone: a model naming a guardrail removed behind the
   * API stays editable.
   */
  async update(trx: Db, model: ModelRecord, relink: boolean): Promise<boolean> {
    const result = await trx.updateTable('models').set(this.columns(model)).where('tenant_id', '=', model.tenantId).where('project_id', '=', model.projectId).where('key', '=', model.key).executeTakeFirst();
    if (relink) {
      await trx.deleteFrom('model_guardrails').where('tenant_id', '=', model.tenantId).where('project_id', '=', model.projectId).where('model_key', '=', model.key).execute();
      await this.link(trx, model);
    }
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * Holds the model's row until the transaction `trx` ends (locked on PostgreSQL; SQLite's one connection runs one
   * transaction at a time) and answers its updatedAt; null when it is gone.
   */
  async hold(trx: Db, scope: ProjectScope, key: string): Promise<number | null> {
    const row = await trx
      .selectFrom('models')
      .select('updated_at')
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('key', '=', key)
      // SQLite has no row locks: one Waygate's connection runs one transaction at a time.
      .$if(this.dialect === 'postgres', (q) => q.forUpdate())
      .executeTakeFirst();
    return row ? Number(row.updated_at) : null;
  }

  private async link(trx: Db, model: ModelRecord): Promise<void> {
    const keys = namedGuardrails(model);
    if (keys.length === 0) return;
    await trx
      .insertInto('model_guardrails')
      .values(keys.map((key) => ({ tenant_id: model.tenantId, project_id: model.projectId, model_key: model.key, guardrail_key: key })))
      .execute();
  }

  async list(scope: ProjectScope): Promise<ModelRecord[]> {
    const rows = await this.db
      .selectFrom('models')
      .selectAll()
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .orderBy('key')
      .execute();
    return rows.map(toRecord);
  }

  /** Each model's key and guardrails, as `trx` reads them (what a guardrail's change of target is checked against). */
  async guardrailLists(trx: Db, scope: ProjectScope): Promise<Pick<ModelRecord, 'key' | 'guardrails'>[]> {
    const rows = await trx.selectFrom('models').select(['key', 'guardrails']).where('tenant_id', '=', scope.tenantId).where('project_id', '=', scope.projectId).orderBy('key').execute();
    return rows.map((row) => ({ key: row.key, guardrails: fromJson<ModelGuardrails>(row.guardrails) ?? { input: [], output: [] } }));
  }

  async find(scope: ProjectScope, key: string): Promise<ModelRecord | null> {
    const row = await this.db
      .selectFrom('models')
      .selectAll()
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('key', '=', key)
      .executeTakeFirst();
    return row ? toRecord(row) : null;
  }

  /**
   * The model, held against change and deletion until the transaction `trx` ends (FOR SHARE on PostgreSQL; SQLite's
   * one connection runs one transaction at a time): what a guardrail that relies on it is checked against.
   */
  async findShared(trx: Db, scope: ProjectScope, key: string): Promise<ModelRecord | null> {
    const row = await trx
      .selectFrom('models')
      .selectAll()
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('key', '=', key)
      .$if(this.dialect === 'postgres', (q) => q.forShare())
      .executeTakeFirst();
    return row ? toRecord(row) : null;
  }

  /** Deletes the model through `trx`; false when it is gone. */
  async delete(trx: Db, scope: ProjectScope, key: string): Promise<boolean> {
    const result = await trx.deleteFrom('models').where('tenant_id', '=', scope.tenantId).where('project_id', '=', scope.projectId).where('key', '=', key).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }
}
