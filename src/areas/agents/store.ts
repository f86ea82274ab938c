import type { Selectable } from 'kysely';
import type { Transactor } from '../../db/index.js';
import { isUniqueViolation } from '../../db/errors.js';
import { fromJson, toJson } from '../../db/json.js';
import type { AgentsTable, AgentVersionsTable, Db, Dialect } from '../../db/types.js';
import type { ProjectScope } from '../../http/principal.js';
import { newId } from '../../platform/ids.js';

export const AGENT_STATUSES = ['active', 'inactive', 'draft'] as const;
export type AgentStatus = (typeof AGENT_STATUSES)[number];
export const CONNECTION_PROTOCOLS = ['a2a', 'openai-chat', 'openai-responses'] as const;
export type ConnectionProtocol = (typeof CONNECTION_PROTOCOLS)[number];

/** A connected (external) agent's endpoint; its API key and header values are sealed apart. */
export interface Connection {
  protocol: ConnectionProtocol;
  url: string;
  model: string | null;
  headerNames: string[];
  hasApiKey: boolean;
}

/** What an agent runs with. Native agents use the model settings; external ones their connection. */
export interface AgentConfig {
  kind: 'native' | 'external';
  modelKey: string | null;
  systemPrompt: string | null;
  temperature: number | null;
  topP: number | null;
  maxTokens: number | null;
  inputGuardrailKey: string | null;
  outputGuardrailKey: string | null;
  connection: Connection | null;
}

export interface AgentRecord {
  id: string;
  tenantId: string;
  projectId: string;
  key: string;
  name: string;
  description: string | null;
  status: AgentStatus;
  config: AgentConfig;
  /** Sealed JSON `{ apiKey?, headers? }` of the connection, or null. */
  secrets: string | null;
  metadata: Record<string, unknown>;
  createdAt: number;
  updatedAt: number;
  /** Bumped by every change. */
  revision: number;
}

/** An immutable snapshot of an agent's configuration (its connection secrets stay the agent's). */
export interface VersionRecord {
  id: string;
  agentId: string;
  number: number;
  name: string;
  description: string | null;
  config: AgentConfig;
  changelog: string | null;
  createdAt: number;
}

export interface ConversationRecord {
  id: string;
  tenantId: string;
  projectId: string;
  agentId: string;
  remoteContext: string | null;
  createdAt: number;
}

export interface MessageRecord {
  seq: number;
  role: 'user' | 'assistant' | 'system';
  content: string;
  usage: { inputTokens: number; outputTokens: number } | null;
  version: number | null;
  createdAt: number;
}

function toAgent(row: Selectable<AgentsTable>): AgentRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    key: row.key,
    name: row.name,
    description: row.description,
    status: row.status as AgentStatus,
    config: fromJson<AgentConfig>(row.config)!,
    secrets: row.secrets,
    metadata: fromJson<Record<string, unknown>>(row.metadata) ?? {},
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    revision: Number(row.revision),
  };
}

function toVersion(row: Selectable<AgentVersionsTable>): VersionRecord {
  return {
    id: row.id,
    agentId: row.agent_id,
    number: Number(row.number),
    name: row.name,
    description: row.description,
    config: fromJson<AgentConfig>(row.config)!,
    changelog: row.changelog,
    createdAt: Number(row.created_at),
  };
}

/** A live (not deleted) agent of the project, read through `db` (the store's handle or a transaction). */
async function findLive(db: Db, scope: ProjectScope, key: string): Promise<AgentRecord | null> {
  const row = await db
    .selectFrom('agents')
    .selectAll()
    .where('tenant_id', '=', scope.tenantId)
    .where('project_id', '=', scope.projectId)
    .where('key', '=', key)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  return row ? toAgent(row) : null;
}

const APPEND_ATTEMPTS = 5;
/** SQLite allows 32,766 bound values per statement; 11 columns x 500 rows stays well below. */
const INSERT_CHUNK = 500;

/** Agents, versions, conversations and their messages. Every method takes the project scope first. */
export class AgentStore {
  constructor(private readonly db: Db, private readonly dialect: Dialect, private readonly transaction: Transactor) {}

  /** Throws the database's unique violation when the project already has the key. */
  async insert(scope: ProjectScope, agent: AgentRecord): Promise<void> {
    await this.db
      .insertInto('agents')
      .values({
        id: agent.id,
        tenant_id: scope.tenantId,
        project_id: scope.projectId,
        key: agent.key,
        name: agent.name,
        description: agent.description,
        status: agent.status,
        config: toJson(this.dialect, agent.config),
        secrets: agent.secrets,
        metadata: toJson(this.dialect, agent.metadata),
        created_at: agent.createdAt,
        updated_at: agent.updatedAt,
        revision: agent.revision,
        deleted_at: null,
      })
      .execute();
  }

  /**
   * Stores a change made from the agent as read at `agent.revision - 1`. False when the agent changed (or was
   * deleted) since: the caller reads it again and makes the change again, so no change is lost.
   */
  async update(scope: ProjectScope, agent: AgentRecord): Promise<boolean> {
    const result = await this.db
      .updateTable('agents')
      .set({
        name: agent.name,
        description: agent.description,
        status: agent.status,
        config: toJson(this.dialect, agent.config),
        secrets: agent.secrets,
        metadata: toJson(this.dialect, agent.metadata),
        updated_at: agent.updatedAt,
        revision: agent.revision,
      })
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('id', '=', agent.id)
      .where('revision', '=', agent.revision - 1)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** A live (not deleted) agent of the project. */
  find(scope: ProjectScope, key: string): Promise<AgentRecord | null> {
    return findLive(this.db, scope, key);
  }

  async list(scope: ProjectScope, status?: AgentStatus): Promise<AgentRecord[]> {
    let query = this.db.selectFrom('agents').selectAll().where('tenant_id', '=', scope.tenantId).where('project_id', '=', scope.projectId).where('deleted_at', 'is', null);
    if (status) query = query.where('status', '=', status);
    return (await query.orderBy('created_at', 'desc').orderBy('key').execute()).map(toAgent);
  }

  /** Marks the agent deleted; its versions and conversations stay. */
  async softDelete(scope: ProjectScope, key: string, at: number): Promise<boolean> {
    const result = await this.db
      .updateTable('agents')
      .set({ deleted_at: at })
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('key', '=', key)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * Snapshots the agent as it is now as its next version. The transaction first locks the agent's row (a write, so
   * SQLite takes its write lock before reading), then reads it: concurrent publishes take their numbers one after
   * another, and each snapshots what was committed before it. Null when the agent is gone.
   */
  async publish(scope: ProjectScope, key: string, changelog: string | null, at: number): Promise<{ agent: AgentRecord; version: VersionRecord } | null> {
    return this.transaction(async (trx) => {
      const locked = await trx
        .updateTable('agents')
        .set((eb) => ({ updated_at: eb.ref('updated_at') }))
        .where('tenant_id', '=', scope.tenantId)
        .where('project_id', '=', scope.projectId)
        .where('key', '=', key)
        .where('deleted_at', 'is', null)
        .executeTakeFirst();
      if (Number(locked.numUpdatedRows) === 0) return null;
      const agent = (await findLive(trx, scope, key))!;
      const last = await trx
        .selectFrom('agent_versions')
        .select((eb) => eb.fn.max('number').as('n'))
        .where('tenant_id', '=', scope.tenantId)
        .where('project_id', '=', scope.projectId)
        .where('agent_id', '=', agent.id)
        .executeTakeFirst();
      const version: VersionRecord = {
        id: newId('agv'),
        agentId: agent.id,
        number: (last?.n === null || last?.n === undefined ? 0 : Number(last.n)) + 1,
        name: agent.name,
        description: agent.description,
        config: agent.config,
        changelog,
        createdAt: at,
      };
      await trx
        .insertInto('agent_versions')
        .values({
          id: version.id,
          tenant_id: scope.tenantId,
          project_id: scope.projectId,
          agent_id: agent.id,
          number: version.number,
          name: version.name,
          description: version.description,
          config: toJson(this.dialect, version.config),
          changelog,
          created_at: at,
        })
        .execute();
      return { agent, version };
    });
  }

  /** A published version by number, or the newest one when `number` is undefined. */
  async version(scope: ProjectScope, agentId: string, number?: number): Promise<VersionRecord | null> {
    let query = this.db.selectFrom('agent_versions').selectAll().where('tenant_id', '=', scope.tenantId).where('project_id', '=', scope.projectId).where('agent_id', '=', agentId);
    query = number === undefined ? query.orderBy('number', 'desc').limit(1) : query.where('number', '=', number);
    const row = await query.executeTakeFirst();
    return row ? toVersion(row) : null;
  }

  /** A conversation of the project held with this agent. */
  async conversation(scope: ProjectScope, agentId: string, id: string): Promise<ConversationRecord | null> {
    const row = await this.db
      .selectFrom('agent_conversations')
      .selectAll()
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('agent_id', '=', agentId)
      .where('id', '=', id)
      .executeTakeFirst();
    return row ? { id: row.id, tenantId: row.tenant_id, projectId: row.project_id, agentId: row.agent_id, remoteContext: row.remote_context, createdAt: Number(row.created_at) } : null;
  }

  async messages(scope: ProjectScope, conversationId: string): Promise<MessageRecord[]> {
    const rows = await this.db
      .selectFrom('agent_messages')
      .selectAll()
      .where('tenant_id', '=', scope.tenantId)
      .where('project_id', '=', scope.projectId)
      .where('conversation_id', '=', conversationId)
      .orderBy('seq')
      .execute();
    return rows.map((row) => ({
      seq: Number(row.seq),
      role: row.role as MessageRecord['role'],
      content: row.content,
      usage: row.input_tokens === null ? null : { inputTokens: Number(row.input_tokens), outputTokens: Number(row.output_tokens ?? 0) },
      version: row.version === null ? null : Number(row.version),
      createdAt: Number(row.created_at),
    }));
  }

  /**
   * Stores a turn after the conversation's last message, in one transaction; with no conversation, the turn starts
   * one in the same transaction (a failed turn leaves nothing). A turn racing another on the same conversation takes
   * the positions after it. A `remoteContext` (a connected A2A agent's contextId) replaces the stored one.
   * Returns the stored messages with their positions.
   */
  async append(
    scope: ProjectScope,
    target: { conversationId: string } | { agentId: string; newConversationId: string },
    messages: Omit<MessageRecord, 'seq'>[],
    remoteContext: string | undefined,
  ): Promise<MessageRecord[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.transaction(async (trx) => {
          const now = Date.now();
          let conversationId: string;
          if ('conversationId' in target) {
            conversationId = target.conversationId;
            // A write first: SQLite takes its write lock before reading, PostgreSQL locks the conversation's row.
            await trx
              .updateTable('agent_conversations')
              .set({ updated_at: now, ...(remoteContext === undefined ? {} : { remote_context: remoteContext }) })
              .where('tenant_id', '=', scope.tenantId)
              .where('project_id', '=', scope.projectId)
              .where('id', '=', conversationId)
              .execute();
          } else {
            conversationId = target.newConversationId;
            await trx
              .insertInto('agent_conversations')
              .values({ id: conversationId, tenant_id: scope.tenantId, project_id: scope.projectId, agent_id: target.agentId, remote_context: remoteContext ?? null, created_at: now, updated_at: now })
              .execute();
          }
          const last = await trx
            .selectFrom('agent_messages')
            .select((eb) => eb.fn.max('seq').as('seq'))
            .where('tenant_id', '=', scope.tenantId)
            .where('project_id', '=', scope.projectId)
            .where('conversation_id', '=', conversationId)
            .executeTakeFirst();
          const first = last?.seq === null || last?.seq === undefined ? 0 : Number(last.seq) + 1;
          const stored = messages.map((message, i) => ({ ...message, seq: first + i }));
          for (let start = 0; start < stored.length; start += INSERT_CHUNK) {
            await trx
              .insertInto('agent_messages')
              .values(
                stored.slice(start, start + INSERT_CHUNK).map((m) => ({
                  id: newId('msg'),
                  tenant_id: scope.tenantId,
                  project_id: scope.projectId,
                  conversation_id: conversationId,
                  seq: m.seq,
                  role: m.role,
                  content: m.content,
                  input_tokens: m.usage?.inputTokens ?? null,
                  output_tokens: m.usage?.outputTokens ?? null,
                  version: m.version,
                  created_at: m.createdAt,
                })),
              )
              .execute();
          }
          return stored;
        });
      } catch (err) {
        if (isUniqueViolation(err) && attempt < APPEND_ATTEMPTS) continue;
        throw err;
      }
    }
  }
}
