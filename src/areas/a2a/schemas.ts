import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../http/schemas.js';
import { AgentParams } from '../agents/schemas.js';

const VersionHeaders = Type.Object({
  'a2a-version': Type.Optional(
    Type.String({ description: 'A2A protocol version: 1.0 (also 1 or 1.0.x) or 0.3 (also 0.3.x); absent means 0.3. Any other version: JSON-RPC error -32009' }),
  ),
});

const AgentInterface = Type.Object({ url: Type.String(), protocolBinding: Type.String(), protocolVersion: Type.String() });

const AgentCard = Type.Object(
  {
    name: Type.String(),
    description: Type.String(),
    version: Type.String({ description: "The agent's published version number ('0' before the first publish)" }),
    supportedInterfaces: Type.Array(AgentInterface, { description: 'JSON-RPC for A2A 1.0 and 0.3, both on this agent\'s endpoint' }),
    capabilities: Type.Object({ streaming: Type.Boolean(), pushNotifications: Type.Boolean() }, { additionalProperties: true }),
    defaultInputModes: Type.Array(Type.String()),
    defaultOutputModes: Type.Array(Type.String()),
    skills: Type.Array(Type.Object({ id: Type.String(), name: Type.String(), description: Type.String(), tags: Type.Array(Type.String()) }, { additionalProperties: true })),
    securitySchemes: Type.Record(Type.String(), Type.Object({}, { additionalProperties: true })),
    url: Type.Optional(Type.String({ description: '0.3 card: the JSON-RPC endpoint' })),
    protocolVersion: Type.Optional(Type.String({ description: '0.3 card: 0.3.0' })),
    preferredTransport: Type.Optional(Type.String({ description: '0.3 card: JSONRPC' })),
    security: Type.Optional(Type.Array(Type.Record(Type.String(), Type.Array(Type.String())), { description: '0.3 card: security requirements' })),
    securityRequirements: Type.Optional(Type.Array(Type.Object({}, { additionalProperties: true }), { description: '1.0 card: security requirements' })),
  },
  {
    additionalProperties: true,
    description:
      'The A2A Agent Card. With A2A-Version: 1.0, the 1.0 card (proto JSON: supportedInterfaces, httpAuthSecurityScheme, securityRequirements); ' +
      'otherwise the 0.3 card (url, protocolVersion, preferredTransport JSONRPC, additionalInterfaces, security) with supportedInterfaces kept alongside.',
  },
);

export const agentCardSchema = {
  operationId: 'a2a.card',
  tags: ['client'],
  summary: "An agent's A2A Agent Card (404 unless metadata.a2a.enabled is true)",
  params: AgentParams,
  headers: VersionHeaders,
  response: { 200: AgentCard, ...errorResponses(400, 401, 403, 404) },
};

const RpcId = Type.Union([Type.String(), Type.Number(), Type.Null()]);

const RpcRequest = Type.Object(
  {
    jsonrpc: Type.Literal('2.0'),
    id: Type.Optional(RpcId),
    method: Type.String({
      description: 'A2A 0.3: message/send, tasks/get, tasks/cancel. A2A 1.0 (header A2A-Version: 1.0): SendMessage, GetTask, CancelTask',
    }),
    params: Type.Optional(
      Type.Object({}, {
        additionalProperties: true,
        description:
          'message/send and SendMessage: { message: { role, parts (text parts are the input), contextId? (a conversation id: continues it), metadata?: { runtime_context?: object } }, configuration?: { historyLength? } }. ' +
          'tasks/get and GetTask: { id, historyLength? }.',
      }),
    ),
  },
  { additionalProperties: true, description: 'A JSON-RPC 2.0 request. Protocol failures are HTTP 200 with a JSON-RPC error, not a 4xx.' },
);

const RpcResponse = Type.Object(
  {
    jsonrpc: Type.Literal('2.0'),
    id: RpcId,
    result: Type.Optional(
      Type.Unknown({
        description:
          'message/send: the completed task (0.3: kind "task", state "completed"); SendMessage: { task } (state TASK_STATE_COMPLETED); tasks/get, GetTask: the task. ' +
          'Task id: task_<the conversation id without conv_>_<seq of the reply>; contextId: the conversation id.',
      }),
    ),
    error: Type.Optional(
      Type.Object(
        { code: Type.Integer(), message: Type.String(), data: Type.Optional(Type.Object({}, { additionalProperties: true })) },
        {
          description:
            '-32700 parse error, -32600 invalid request, -32601 method not found, -32602 invalid params (no text, a contextId that is not a conversation of this agent, a guardrail block), ' +
            '-32603 internal error (data.status: 429, 502, 504...), -32001 task not found, -32003 push notifications not supported, -32004 unsupported (tasks/cancel, streaming), -32009 unsupported A2A-Version',
        },
      ),
    ),
  },
  { description: 'A JSON-RPC 2.0 response with result or error' },
);

export const rpcSchema = {
  operationId: 'a2a.rpc',
  tags: ['client'],
  summary: 'A2A JSON-RPC endpoint of an exposed agent: A2A 0.3 (default) or 1.0 (A2A-Version: 1.0)',
  params: AgentParams,
  headers: VersionHeaders,
  body: RpcRequest,
  response: { 200: RpcResponse, ...errorResponses(400, 401, 403, 404) },
};
