import type { Generated, Kysely } from 'kysely';

/** JSON columns: TEXT in SQLite, JSONB in PostgreSQL; always read through `fromJson`. */
export type JsonColumn = unknown;

export interface TenantsTable {
  id: string;
  name: string;
  created_at: number;
}

export interface ProjectsTable {
  id: string;
  tenant_id: string;
  key: string;
  name: string;
  budget: JsonColumn | null;
  rate_limit: JsonColumn | null;
  limits_updated_at: Generated<number>;
  created_at: number;
}

export interface UsersTable {
  id: string;
  tenant_id: string;
  email: string;
  name: string | null;
  password_hash: string;
  role: string;
  is_instance_admin: number;
  session_version: Generated<number>;
  created_at: number;
}

export interface ApiTokensTable {
  id: string;
  tenant_id: string;
  project_id: string | null;
  name: string;
  role: string;
  permissions: JsonColumn | null;
  grants: JsonColumn;
  display_prefix: string;
  token_hash: string;
  expires_at: number | null;
  revoked_at: number | null;
  budget: JsonColumn | null;
  rate_limit: JsonColumn | null;
  created_by_user_id: string | null;
  created_at: number;
}

export interface AuditEventsTable {
  seq: Generated<number>;
  id: string;
  tenant_id: string | null;
  project_id: string | null;
  request_id: string | null;
  actor_type: string;
  actor_user_id: string | null;
  api_token_id: string | null;
  service: string;
  action: string;
  method: string;
  path: string;
  status_code: number;
  outcome: string;
  ip_address: string | null;
  user_agent: string | null;
  resource_type: string | null;
  resource_id: string | null;
  created_at: number;
}

export interface ModelsTable {
  id: string;
  tenant_id: string;
  project_id: string;
  key: string;
  name: string;
  provider_type: string;
  provider: JsonColumn;
  provider_secrets: string | null;
  upstream_model: string;
  capabilities: JsonColumn;
  pricing: JsonColumn | null;
  guardrails: JsonColumn;
  fallbacks: JsonColumn;
  created_at: number;
  updated_at: number;
}

export interface UsageEventsTable {
  id: string;
  tenant_id: string;
  project_id: string;
  token_id: string | null;
  user_id: string | null;
  model: string;
  provider: string;
  service: string;
  endpoint: string;
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  cost: number;
  currency: string;
  latency_ms: number;
  upstream_latency_ms: number;
  status: number;
  request_id: string;
  session_id: string | null;
  streamed: number;
  created_at: number;
}

/** usage_hourly (`hour`) and usage_daily (`day`) share every other column. */
interface UsageRollupColumns {
  tenant_id: string;
  project_id: string;
  model: string;
  service: string;
  token_id: string;
  user_id: string;
  requests: number;
  errors: number;
  input_tokens: number;
  output_tokens: number;
  cost: number;
  latency_ms: number;
  upstream_latency_ms: number;
}

export interface UsageHourlyTable extends UsageRollupColumns {
  hour: number;
}

export interface UsageDailyTable extends UsageRollupColumns {
  day: number;
}

export interface FileBucketsTable {
  id: string;
  tenant_id: string;
  project_id: string;
  key: string;
  name: string;
  created_at: number;
}

export interface FileObjectsTable {
  id: string;
  bucket_id: string;
  object_key: string;
  size: number;
  content_type: string;
  sha256: string;
  storage: string;
  blob_id: string;
  created_at: number;
}

export interface FileBlobsTable {
  blob_id: string;
  seq: number;
  data: Buffer;
}

export interface BatchesTable {
  id: string;
  tenant_id: string;
  project_id: string;
  endpoint: string;
  status: string;
  completion_window: string;
  input_bucket_key: string | null;
  input_object_key: string | null;
  output_bucket_key: string | null;
  output_object_key: string | null;
  error_message: string | null;
  metadata: JsonColumn;
  token_id: string | null;
  user_id: string | null;
  total: number;
  completed: number;
  failed: number;
  cancelled: number;
  input_tokens: number;
  output_tokens: number;
  finalizer: string | null;
  finalizer_until: number | null;
  created_at: number;
  started_at: number | null;
  completed_at: number | null;
  cancelled_at: number | null;
}

export interface BatchItemsTable {
  id: string;
  batch_id: string;
  tenant_id: string;
  project_id: string;
  idx: number;
  custom_id: string | null;
  request_body: string;
  status: string;
  attempts: number;
  run_after: number;
  locked_by: string | null;
  locked_until: number | null;
  response_status_code: number | null;
  response_body: string | null;
  error_message: string | null;
  input_tokens: number | null;
  output_tokens: number | null;
  started_at: number | null;
  ended_at: number | null;
}

export interface BatchWorkersTable {
  id: string;
  hostname: string;
  pid: number;
  concurrency: number;
  started_at: number;
  heartbeat_at: number;
}

export interface GuardrailsTable {
  id: string;
  tenant_id: string;
  project_id: string;
  key: string;
  name: string;
  type: string;
  action: string;
  target: string;
  config: JsonColumn;
  model_key: string | null;
  fail_mode: string;
  enabled: number;
  created_at: number;
  updated_at: number;
}

/** A guardrail a model names (either stage), held to both rows by foreign keys. */
export interface ModelGuardrailsTable {
  tenant_id: string;
  project_id: string;
  model_key: string;
  guardrail_key: string;
}

export interface GuardrailEvaluationsTable {
  id: string;
  tenant_id: string;
  project_id: string;
  guardrail_key: string;
  guardrail_type: string;
  stage: string;
  model: string | null;
  request_id: string;
  passed: number;
  action: string;
  outcome: string | null;
  categories: JsonColumn;
  masked_text: string;
  latency_ms: number;
  created_at: number;
}

export interface AgentsTable {
  id: string;
  tenant_id: string;
  project_id: string;
  key: string;
  name: string;
  description: string | null;
  status: string;
  config: JsonColumn;
  secrets: string | null;
  metadata: JsonColumn;
  created_at: number;
  updated_at: number;
  revision: number;
  deleted_at: number | null;
}

export interface AgentVersionsTable {
  id: string;
  tenant_id: string;
  project_id: string;
  agent_id: string;
  number: number;
  name: string;
  description: string | null;
  config: JsonColumn;
  changelog: string | null;
  created_at: number;
}

export interface ConversationsTable {
  id: string;
  tenant_id: string;
  project_id: string;
  agent_id: string;
  remote_context: string | null;
  created_at: number;
  updated_at: number;
}

export interface ConversationMessagesTable {
  id: string;
  tenant_id: string;
  project_id: string;
  conversation_id: string;
  seq: number;
  role: string;
  content: string;
  input_tokens: number | null;
  output_tokens: number | null;
  version: number | null;
  created_at: number;
}

export interface InstanceMetaTable {
  key: string;
  value: string;
}

export interface Database {
  tenants: TenantsTable;
  projects: ProjectsTable;
  users: UsersTable;
  api_tokens: ApiTokensTable;
  audit_events: AuditEventsTable;
  instance_meta: InstanceMetaTable;
  models: ModelsTable;
  usage_events: UsageEventsTable;
  usage_hourly: UsageHourlyTable;
  usage_daily: UsageDailyTable;
  file_buckets: FileBucketsTable;
  file_objects: FileObjectsTable;
  file_blobs: FileBlobsTable;
  batches: BatchesTable;
  batch_items: BatchItemsTable;
  batch_workers: BatchWorkersTable;
  guardrails: GuardrailsTable;
  model_guardrails: ModelGuardrailsTable;
  guardrail_evaluations: GuardrailEvaluationsTable;
  agents: AgentsTable;
  agent_versions: AgentVersionsTable;
  agent_conversations: ConversationsTable;
  agent_messages: ConversationMessagesTable;
}

export type Db = Kysely<Database>;
export type Dialect = 'sqlite' | 'postgres';
