import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Context } from '../../context.js';
import { principalOf, projectScope, requireApiToken } from '../../http/guards.js';
import { requireAccess } from '../../http/rbac.js';
import { callerOf } from '../inference/caller.js';
import { dialectOf, VERSION_HEADER } from './protocol.js';
import { agentCardSchema, rpcSchema } from './schemas.js';

type AgentParams = { agentKey: string };
const A2A_PREFIX = '/api/client/v1/a2a';

/** The agent's JSON-RPC endpoint as the caller reached this server (Host and protocol, forwarded ones when trusted). */
function endpointOf(request: FastifyRequest, key: string): string {
  return `${request.protocol}://${request.host}${A2A_PREFIX}/${encodeURIComponent(key)}`;
}

function versionHeader(request: FastifyRequest): string | string[] | undefined {
  return request.headers[VERSION_HEADER];
}

function sendJson(reply: { header(name: string, value: string): unknown; send(payload: string): unknown }, value: unknown) {
  reply.header('content-type', 'application/json; charset=utf-8');
  return reply.send(JSON.stringify(value));
}

/**
 * A2A server (interface 4.1): the Agent Card and the JSON-RPC endpoint of agents exposed through
 * `metadata.a2a.enabled`, in the token's project. The body is read raw, so that malformed JSON is a JSON-RPC
 * parse error (HTTP 200) rather than the app's 400.
 */
export async function a2aRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  const { a2a } = ctx.services;
  requireApiToken(app, ctx.services.tokens);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => done(null, body));

  app.get<{ Params: AgentParams }>(`${A2A_PREFIX}/:agentKey/.well-known/agent-card.json`, { schema: agentCardSchema }, async (request, reply) => {
    const agent = await a2a.exposedAgent(projectScope(request), request.params.agentKey);
    const card = await a2a.card(agent, dialectOf(versionHeader(request)), endpointOf(request, agent.key));
    reply.header('vary', 'A2A-Version');
    return sendJson(reply, card);
  });

  // Validation results are attached, not thrown: every protocol failure is a JSON-RPC error (the schema documents).
  app.post<{ Params: AgentParams }>(`${A2A_PREFIX}/:agentKey`, { schema: rpcSchema, attachValidation: true, config: { audited: false } }, async (request, reply) => {
    const agent = await a2a.invocableAgent(projectScope(request), request.params.agentKey);
    const header = versionHeader(request);
    const response = await a2a.handle({
      caller: callerOf(request, reply),
      agent,
      dialect: dialectOf(header),
      requestedVersion: Array.isArray(header) ? header.join(', ') : (header ?? ''),
      body: request.body,
      log: request.log,
      checkModelCalls: () => requireAccess(principalOf(request), 'models', 'read', 'running an agent'),
    });
    return sendJson(reply, response);
  });
}
