import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Context } from '../../context.js';
import { ERRORS } from '../../http/errors.js';
import { principalOf, projectScope, requireApiToken } from '../../http/guards.js';
import { requireAccess } from '../../http/rbac.js';
import { unixSeconds } from '../../platform/time.js';
import { callerOf } from '../inference/caller.js';
import type { TurnMessage } from './connectors.js';
import type { TurnResult } from './runner.js';
import {
  createAgentSchema,
  deleteAgentSchema,
  getAgentSchema,
  listAgentsSchema,
  publishAgentSchema,
  responsesSchema,
  updateAgentSchema,
  type CreateAgentBody,
  type PublishBody,
  type ResponsesBody,
  type UpdateAgentBody,
} from './schemas.js';
import type { AgentRecord, VersionRecord } from './store.js';

type AgentParams = { agentKey: string };
const RESPONSE_PREFIX = 'resp_';

/** A Responses `input`: a text, or message items whose text parts are joined; developer messages count as system. */
function turnInput(input: Static<typeof ResponsesBody>['input']): TurnMessage[] {
  if (typeof input === 'string') return input.trim() === '' ? [] : [{ role: 'user', content: input }];
  return input.map((item) => ({
    role: item.role === 'developer' ? 'system' : item.role,
    content: typeof item.content === 'string' ? item.content : item.content.map((part) => part.text).join(''),
  }));
}

/** Interface 2.4: a list entry, with the model configuration the agent runs with. */
function agentSummary(agent: AgentRecord) {
  return {
    key: agent.key,
    name: agent.name,
    description: agent.description,
    status: agent.status,
    createdAt: new Date(agent.createdAt).toISOString(),
    modelKey: agent.config.modelKey,
    temperature: agent.config.temperature,
    topP: agent.config.topP,
    maxTokens: agent.config.maxTokens,
  };
}

/** The full view: never the connection's API key or header values (`hasApiKey`, `headerNames`). */
function agentView(agent: AgentRecord, publishedVersion: number | null) {
  return {
    ...agentSummary(agent),
    updatedAt: new Date(agent.updatedAt).toISOString(),
    kind: agent.config.kind,
    hasApiKey: agent.config.connection?.hasApiKey ?? false,
    config: agent.config,
    metadata: agent.metadata,
    publishedVersion,
  };
}

function versionView(agent: AgentRecord, version: VersionRecord) {
  return {
    agentKey: agent.key,
    number: version.number,
    name: version.name,
    description: version.description,
    changelog: version.changelog,
    config: version.config,
    createdAt: new Date(version.createdAt).toISOString(),
  };
}

/** Interface 2.5: one completed object in OpenAI Responses format; its id names the conversation. */
function responseView(agent: AgentRecord, turn: TurnResult) {
  const { reply } = turn;
  const usage = reply.usage ?? { inputTokens: 0, outputTokens: 0 };
  const config = turn.version.config;
  return {
    id: `${RESPONSE_PREFIX}${turn.conversationId}`,
    object: 'response' as const,
    created_at: unixSeconds(reply.createdAt),
    status: 'completed' as const,
    model: agent.key,
    output: [
      {
        type: 'message' as const,
        id: `msg_${turn.conversationId}_${reply.seq}`,
        status: 'completed' as const,
        role: 'assistant' as const,
        content: [{ type: 'output_text' as const, text: reply.content, annotations: [] }],
      },
    ],
    usage: {
      input_tokens: usage.inputTokens,
      output_tokens: usage.outputTokens,
      total_tokens: usage.inputTokens + usage.outputTokens,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens_details: { reasoning_tokens: 0 },
    },
    previous_response_id: turn.continued ? `${RESPONSE_PREFIX}${turn.conversationId}` : null,
    error: null,
    incomplete_details: null,
    instructions: null,
    metadata: {},
    parallel_tool_calls: false,
    temperature: config.temperature,
    top_p: config.topP,
    tool_choice: 'none',
    tools: [],
    text: { format: { type: 'text' } },
    version: turn.version.number,
  };
}

/** Agents in the client API (interface 4.1): CRUD, publish, and the Responses endpoint. */
export async function agentRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  const { agents, agentRunner } = ctx.services;
  requireApiToken(app, ctx.services.tokens);

  app.get<{ Querystring: { status?: 'active' | 'inactive' | 'draft' } }>('/api/client/v1/agents', { schema: listAgentsSchema }, async (request) => ({
    agents: (await agents.list(projectScope(request), request.query.status)).map(agentSummary),
  }));

  app.post<{ Body: Static<typeof CreateAgentBody> }>('/api/client/v1/agents', { schema: createAgentSchema }, async (request, reply) => {
    const { request_id: _requestId, ...input } = request.body;
    const agent = await agents.create(projectScope(request), input);
    request.auditResource = { type: 'agent', id: agent.key };
    return reply.status(201).send({ agent: agentView(agent, null) });
  });

  app.get<{ Params: AgentParams }>('/api/client/v1/agents/:agentKey', { schema: getAgentSchema }, async (request) => {
    const scope = projectScope(request);
    const agent = await agents.get(scope, request.params.agentKey);
    return { agent: agentView(agent, await agents.publishedVersion(scope, agent)) };
  });

  app.patch<{ Params: AgentParams; Body: Static<typeof UpdateAgentBody> }>('/api/client/v1/agents/:agentKey', { schema: updateAgentSchema }, async (request) => {
    request.auditResource = { type: 'agent', id: request.params.agentKey };
    const { request_id: _requestId, ...patch } = request.body;
    const scope = projectScope(request);
    const agent = await agents.update(scope, request.params.agentKey, patch);
    return { agent: agentView(agent, await agents.publishedVersion(scope, agent)) };
  });

  app.delete<{ Params: AgentParams }>('/api/client/v1/agents/:agentKey', { schema: deleteAgentSchema }, async (request) => {
    request.auditResource = { type: 'agent', id: request.params.agentKey };
    await agents.delete(projectScope(request), request.params.agentKey);
    return { success: true as const };
  });

  // The body is optional (interface 4.1): none is an empty one.
  const optionalBody = (request: { body: unknown }, _reply: unknown, done: () => void) => {
    request.body ??= {};
    done();
  };
  app.post<{ Params: AgentParams; Body: Static<typeof PublishBody> }>('/api/client/v1/agents/:agentKey/publish', { schema: publishAgentSchema, preValidation: optionalBody }, async (request, reply) => {
    request.auditResource = { type: 'agent', id: request.params.agentKey };
    const { agent, version } = await agents.publish(projectScope(request), request.params.agentKey, request.body.changelog ?? null);
    return reply.status(201).send({ version: versionView(agent, version) });
  });

  app.post<{ Body: Static<typeof ResponsesBody> }>('/api/client/v1/agents/responses', { schema: responsesSchema, config: { audited: false } }, async (request, reply) => {
    requireAccess(principalOf(request), 'models', 'read', 'running an agent');
    const body = request.body;
    if (body.stream === true) throw ERRORS.validation('stream: agent responses are not streamed; send stream false or leave it out');
    const scope = projectScope(request);
    const agent = await agents.get(scope, body.model);
    let conversationId: string | undefined;
    if (body.previous_response_id) {
      conversationId = body.previous_response_id.slice(RESPONSE_PREFIX.length);
      if (!body.previous_response_id.startsWith(RESPONSE_PREFIX) || conversationId === '') throw ERRORS.notFound('Response', body.previous_response_id);
    }
    const turn = await agentRunner.respond(callerOf(request, reply), agent, {
      input: turnInput(body.input),
      conversationId,
      version: body.version ?? undefined,
      endpoint: '/agents/responses',
    });
    return reply.header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(responseView(agent, turn)));
  });
}
