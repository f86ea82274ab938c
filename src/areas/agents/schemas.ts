import { Type } from '@sinclair/typebox';
import { errorResponses, IsoDateTime, Name, StringEnum } from '../../http/schemas.js';
import { AGENT_STATUSES, CONNECTION_PROTOCOLS } from './store.js';

const Nullable = <T extends ReturnType<typeof Type.String> | ReturnType<typeof Type.Number> | ReturnType<typeof Type.Integer>>(schema: T) => Type.Union([schema, Type.Null()]);
const Key = Type.String({ minLength: 1, maxLength: 200 });

const ConnectionInput = Type.Object(
  {
    protocol: StringEnum(CONNECTION_PROTOCOLS, { description: 'a2a (url: the agent\'s JSON-RPC endpoint), openai-chat or openai-responses (url: the base URL, as an OpenAI SDK takes it)' }),
    url: Type.String({ minLength: 1, maxLength: 2048 }),
    model: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 200 }))),
    headers: Type.Optional(
      Type.Union([Type.Record(Type.String(), Type.String({ maxLength: 4096 }), { maxProperties: 50 }), Type.Null()], {
        description: 'Sent on every call; values are stored encrypted and never shown. Omitted on PATCH keeps them (same origin only)',
      }),
    ),
    apiKey: Type.Optional(
      Type.Union([Type.String({ minLength: 1, maxLength: 4096 }), Type.Null()], {
        description: 'Sent as Authorization: Bearer; stored encrypted, never shown (hasApiKey). Omitted on PATCH keeps it while the URL keeps its origin',
      }),
    ),
  },
  { additionalProperties: false },
);

const ConfigInput = Type.Object(
  {
    kind: Type.Optional(StringEnum(['native', 'external'])),
    modelKey: Type.Optional(Nullable(Key)),
    systemPrompt: Type.Optional(Nullable(Type.String({ maxLength: 50_000 }))),
    temperature: Type.Optional(Nullable(Type.Number({ minimum: 0, maximum: 2 }))),
    topP: Type.Optional(Nullable(Type.Number({ minimum: 0, maximum: 1 }))),
    maxTokens: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 2_147_483_647 }))),
    inputGuardrailKey: Type.Optional(Nullable(Key)),
    outputGuardrailKey: Type.Optional(Nullable(Key)),
    connection: Type.Optional(Type.Union([ConnectionInput, Type.Null()])),
  },
  { additionalProperties: false },
);

const agentFields = {
  description: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))),
  status: Type.Optional(StringEnum(AGENT_STATUSES, { description: 'default active' })),
  config: Type.Optional(ConfigInput),
  metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'Free form; `a2a: { enabled: true }` exposes the agent over A2A' })),
  request_id: Type.Optional(Type.String({ maxLength: 200 })),
};

export const CreateAgentBody = Type.Object({ name: Name, ...agentFields }, { additionalProperties: false });
export const UpdateAgentBody = Type.Object({ name: Type.Optional(Name), ...agentFields }, { additionalProperties: false });
export const PublishBody = Type.Object(
  { changelog: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))), request_id: Type.Optional(Type.String({ maxLength: 200 })) },
  { additionalProperties: false, description: 'Optional: the body may be left out' },
);

const Connection = Type.Object({
  protocol: StringEnum(CONNECTION_PROTOCOLS),
  url: Type.String(),
  model: Type.Union([Type.String(), Type.Null()]),
  headerNames: Type.Array(Type.String()),
  hasApiKey: Type.Boolean(),
});

const Config = Type.Object({
  kind: StringEnum(['native', 'external']),
  modelKey: Type.Union([Type.String(), Type.Null()]),
  systemPrompt: Type.Union([Type.String(), Type.Null()]),
  temperature: Type.Union([Type.Number(), Type.Null()]),
  topP: Type.Union([Type.Number(), Type.Null()]),
  maxTokens: Type.Union([Type.Integer(), Type.Null()]),
  inputGuardrailKey: Type.Union([Type.String(), Type.Null()]),
  outputGuardrailKey: Type.Union([Type.String(), Type.Null()]),
  connection: Type.Union([Connection, Type.Null()]),
});

const summaryFields = {
  key: Type.String(),
  name: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  status: StringEnum(AGENT_STATUSES),
  createdAt: IsoDateTime,
  modelKey: Type.Union([Type.String(), Type.Null()]),
  temperature: Type.Union([Type.Number(), Type.Null()]),
  topP: Type.Union([Type.Number(), Type.Null()]),
  maxTokens: Type.Union([Type.Integer(), Type.Null()]),
};

const AgentSummary = Type.Object(summaryFields);
const AgentView = Type.Object({
  ...summaryFields,
  updatedAt: IsoDateTime,
  kind: StringEnum(['native', 'external']),
  hasApiKey: Type.Boolean(),
  config: Config,
  metadata: Type.Record(Type.String(), Type.Unknown()),
  publishedVersion: Type.Union([Type.Integer(), Type.Null()]),
});

const VersionView = Type.Object({
  agentKey: Type.String(),
  number: Type.Integer(),
  name: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  changelog: Type.Union([Type.String(), Type.Null()]),
  config: Config,
  createdAt: IsoDateTime,
});

/** Path parameter: Fastify's router answers 414 to a longer path segment before any schema runs (its default 100). */
export const AgentParams = Type.Object({ agentKey: Type.String({ minLength: 1, maxLength: 100 }) });

export const listAgentsSchema = {
  operationId: 'agents.list',
  tags: ['client'],
  summary: "The project's agents (interface 2.4)",
  querystring: Type.Object({ status: Type.Optional(StringEnum(AGENT_STATUSES)) }, { additionalProperties: false }),
  response: { 200: Type.Object({ agents: Type.Array(AgentSummary) }), ...errorResponses(400, 401, 403) },
};

export const createAgentSchema = {
  operationId: 'agents.create',
  tags: ['client'],
  body: CreateAgentBody,
  response: { 201: Type.Object({ agent: AgentView }), ...errorResponses(400, 401, 403) },
};

export const getAgentSchema = {
  operationId: 'agents.get',
  tags: ['client'],
  params: AgentParams,
  response: { 200: Type.Object({ agent: AgentView }), ...errorResponses(400, 401, 403, 404) },
};

export const updateAgentSchema = {
  operationId: 'agents.update',
  tags: ['client'],
  params: AgentParams,
  body: UpdateAgentBody,
  response: { 200: Type.Object({ agent: AgentView }), ...errorResponses(400, 401, 403, 404) },
};

export const deleteAgentSchema = {
  operationId: 'agents.delete',
  tags: ['client'],
  params: AgentParams,
  response: { 200: Type.Object({ success: Type.Literal(true) }), ...errorResponses(400, 401, 403, 404) },
};

export const publishAgentSchema = {
  operationId: 'agents.publish',
  tags: ['client'],
  summary: 'Publish the current configuration as a new immutable version',
  params: AgentParams,
  body: PublishBody,
  response: { 201: Type.Object({ version: VersionView }), ...errorResponses(400, 401, 403, 404) },
};

const InputPart = Type.Object({ type: StringEnum(['input_text', 'output_text', 'text']), text: Type.String() }, { additionalProperties: true });
const InputItem = Type.Object(
  {
    type: Type.Optional(Type.Literal('message')),
    role: StringEnum(['user', 'assistant', 'system', 'developer']),
    content: Type.Union([Type.String(), Type.Array(InputPart, { minItems: 1 })]),
  },
  { additionalProperties: true },
);

export const ResponsesBody = Type.Object(
  {
    model: Type.String({ minLength: 1, maxLength: 200, description: 'The agent key' }),
    input: Type.Union([Type.String(), Type.Array(InputItem, { maxItems: 1000 })], { description: 'A text, or up to 1000 message items (text only)' }),
    previous_response_id: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()], { description: 'resp_<conversation id>: continues that conversation' })),
    version: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 2_147_483_647 }), Type.Null()], { description: 'A published version to run (default: the newest)' })),
    stream: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
  },
  { additionalProperties: true, description: 'OpenAI Responses request; other OpenAI fields are accepted and ignored (the agent decides instructions and sampling)' },
);

export const responsesSchema = {
  operationId: 'agents.responses',
  tags: ['client'],
  summary: 'Run an agent (OpenAI Responses format, interface 2.5): one completed response, no streaming',
  body: ResponsesBody,
  response: { 200: Type.Object({}, { additionalProperties: true, description: 'An OpenAI Responses object, status completed' }), ...errorResponses(400, 401, 403, 404, 429, 502, 504) },
};
