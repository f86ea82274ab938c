import { Type } from '@sinclair/typebox';
import { errorResponses, IsoDateTime, Name, StringEnum } from '../../http/schemas.js';
import { CAPABILITIES, PROVIDER_TYPES } from '../../providers/types.js';
import { MODEL_KEY_PATTERN } from './service.js';

const NullableString = (options: Record<string, unknown> = {}) => Type.Union([Type.String({ minLength: 1, maxLength: 2000, ...options }), Type.Null()]);

const MockOptions = Type.Object(
  {
    reply: Type.Optional(Type.String({ maxLength: 100_000 })),
    latencyMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 600_000 })),
    failureRate: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  },
  { additionalProperties: false, description: 'mock provider only: fixed reply, latency, share of calls failing with 503' },
);

const providerFields = {
  baseUrl: Type.Optional(NullableString({ description: 'Like the OpenAI SDK baseURL, e.g. http://localhost:11434/v1; Azure: https://<resource>.openai.azure.com' })),
  apiKey: Type.Optional(NullableString({ description: 'Write-only, stored encrypted; omit to keep, null to remove' })),
  apiVersion: Type.Optional(NullableString({ description: 'azure-openai api-version (default 2024-10-21)' })),
  deployment: Type.Optional(NullableString({ description: 'azure-openai deployment (default: upstreamModel)' })),
  headers: Type.Optional(
    Type.Union([Type.Record(Type.String(), Type.String({ maxLength: 4000 }), { maxProperties: 20 }), Type.Null()], {
      description: 'Extra upstream headers; write-only (values encrypted), omit to keep, null to remove',
    }),
  ),
  mock: Type.Optional(Type.Union([MockOptions, Type.Null()])),
};

const ProviderType = StringEnum(PROVIDER_TYPES);
const ProviderInput = Type.Object({ type: ProviderType, ...providerFields }, { additionalProperties: false });
const ProviderPatch = Type.Object({ type: Type.Optional(ProviderType), ...providerFields }, { additionalProperties: false });

/**
 * Far above any model's price in any currency, and low enough that costs stay finite numbers (a call's tokens are at
 * most 10^9, so its cost at most 10^15; sums of many stay far from overflow).
 */
const MAX_PRICE_PER_1M = 1e12;

const Pricing = Type.Object(
  {
    inputPer1M: Type.Number({ minimum: 0, maximum: MAX_PRICE_PER_1M, description: 'Price of one million input tokens' }),
    outputPer1M: Type.Number({ minimum: 0, maximum: MAX_PRICE_PER_1M, description: 'Price of one million output tokens' }),
    currency: Type.String({ pattern: '^[A-Z]{3}$', description: 'ISO 4217 code; budgets count cost in USD' }),
  },
  { additionalProperties: false },
);

const GuardrailKeys = Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 20 });
const Guardrails = Type.Object({ input: Type.Optional(GuardrailKeys), output: Type.Optional(GuardrailKeys) }, { additionalProperties: false });
const Capabilities = Type.Array(StringEnum(CAPABILITIES), { minItems: 1, maxItems: CAPABILITIES.length });
const Fallbacks = Type.Array(Type.String({ pattern: MODEL_KEY_PATTERN }), { maxItems: 10, description: 'Model keys tried in order when this one fails' });

const modelFields = {
  name: Type.Optional(Name),
  upstreamModel: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'The name the upstream knows (default: key)' })),
  capabilities: Capabilities,
  pricing: Type.Optional(Type.Union([Pricing, Type.Null()])),
  guardrails: Type.Optional(Guardrails),
  fallbacks: Type.Optional(Fallbacks),
};

export const CreateModelBody = Type.Object(
  { key: Type.String({ pattern: MODEL_KEY_PATTERN, description: 'The name clients send as `model`' }), provider: ProviderInput, ...modelFields },
  { additionalProperties: false },
);

export const UpdateModelBody = Type.Object(
  { ...modelFields, capabilities: Type.Optional(Capabilities), provider: Type.Optional(ProviderPatch) },
  { additionalProperties: false },
);

const ModelView = Type.Object({
  key: Type.String(),
  name: Type.String(),
  provider: Type.Object({
    type: ProviderType,
    baseUrl: Type.Union([Type.String(), Type.Null()]),
    apiVersion: Type.Union([Type.String(), Type.Null()]),
    deployment: Type.Union([Type.String(), Type.Null()]),
    mock: Type.Union([MockOptions, Type.Null()]),
    headerNames: Type.Array(Type.String(), { description: 'Names of the extra headers; their values are never shown' }),
    hasApiKey: Type.Boolean(),
  }),
  upstreamModel: Type.String(),
  capabilities: Type.Array(Type.String()),
  pricing: Type.Union([Pricing, Type.Null()]),
  guardrails: Type.Object({ input: Type.Array(Type.String()), output: Type.Array(Type.String()) }),
  fallbacks: Type.Array(Type.String()),
  builtIn: Type.Boolean({ description: 'local-chat and local-embed: offered in every project, not editable' }),
  createdAt: IsoDateTime,
  updatedAt: IsoDateTime,
});

const KeyParams = Type.Object({ key: Type.String({ maxLength: 200 }) });

export const listModelsSchema = {
  operationId: 'models.list',
  tags: ['dashboard'],
  summary: "The project's models (X-Waygate-Project picks the project)",
  response: { 200: Type.Object({ models: Type.Array(ModelView) }), ...errorResponses(401, 403) },
};

export const createModelSchema = {
  operationId: 'models.create',
  tags: ['dashboard'],
  body: CreateModelBody,
  response: { 201: Type.Object({ model: ModelView }), ...errorResponses(400, 401, 403, 409) },
};

export const updateModelSchema = {
  operationId: 'models.update',
  tags: ['dashboard'],
  params: KeyParams,
  body: UpdateModelBody,
  response: { 200: Type.Object({ model: ModelView }), ...errorResponses(400, 401, 403, 404) },
};

export const deleteModelSchema = {
  operationId: 'models.delete',
  tags: ['dashboard'],
  params: KeyParams,
  response: { 200: Type.Object({ success: Type.Literal(true) }), ...errorResponses(400, 401, 403, 404) },
};
