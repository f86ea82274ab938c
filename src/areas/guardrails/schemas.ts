import { Type } from '@sinclair/typebox';
import { errorResponses, IsoDateTime, Name, StringEnum } from '../../http/schemas.js';
import { MODERATION_CATEGORIES } from './moderation.js';
import { PII_CATEGORIES } from './pii.js';
import { FAIL_MODES, GUARDRAIL_ACTIONS, GUARDRAIL_TARGETS, GUARDRAIL_TYPES } from './store.js';

export const GUARDRAIL_KEY_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$';
const GuardrailKey = Type.String({ pattern: GUARDRAIL_KEY_PATTERN, description: '1-100 letters, digits, dots, dashes, underscores or colons' });
const ModelKey = Type.String({ minLength: 1, maxLength: 200, description: 'A model of the project that judges (model-based checks)' });

/** The `config` of each guardrail type; the service validates a guardrail's config against the one of its type. */
export const CONFIG_SCHEMAS = {
  pii: Type.Object(
    { categories: Type.Optional(Type.Array(StringEnum(PII_CATEGORIES), { minItems: 1, uniqueItems: true, description: 'The categories to detect (default: all 15)' })) },
    { additionalProperties: false },
  ),
  moderation: Type.Object(
    {
      engine: Type.Optional(StringEnum(['builtin', 'model'], { description: 'builtin (offline lexicon and patterns, default) or model (modelKey)' })),
      categories: Type.Optional(Type.Array(StringEnum(MODERATION_CATEGORIES), { minItems: 1, uniqueItems: true, description: 'Categories to check (default: all)' })),
      extraCategories: Type.Optional(
        Type.Array(
          Type.Object(
            {
              name: Type.String({ pattern: '^[a-z0-9][a-z0-9_/-]{0,63}$' }),
              terms: Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 500 }),
              patterns: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 50 })),
            },
            { additionalProperties: false },
          ),
          { maxItems: 20, description: 'Categories of your own, matched by whole-word terms and safe regular expressions' },
        ),
      ),
      threshold: Type.Optional(Type.Number({ minimum: 0, maximum: 1, description: 'Score from which a category counts (default 0.5)' })),
    },
    { additionalProperties: false },
  ),
  prompt_shield: Type.Object(
    {
      sensitivity: Type.Optional(StringEnum(['low', 'balanced', 'high'], { description: 'default balanced' })),
      modelCheck: Type.Optional(Type.Boolean({ description: 'Also ask modelKey when the built-in detector finds nothing' })),
    },
    { additionalProperties: false },
  ),
  custom_prompt: Type.Object({ rules: Type.String({ minLength: 1, maxLength: 4000, description: 'The rules the judge model (modelKey) checks text against' }) }, { additionalProperties: false }),
};

const guardrailFields = {
  name: Type.Optional(Name),
  action: Type.Optional(StringEnum(GUARDRAIL_ACTIONS, { description: 'block (default), flag, or redact (pii only)' })),
  target: Type.Optional(StringEnum(GUARDRAIL_TARGETS, { description: "Where it may run when a model names it: input (default), output or both" })),
  config: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "Settings of the guardrail's type" })),
  modelKey: Type.Optional(Type.Union([ModelKey, Type.Null()])),
  failMode: Type.Optional(StringEnum(FAIL_MODES, { description: 'When the judge model fails: open passes, closed (default) blocks' })),
  enabled: Type.Optional(Type.Boolean()),
};

export const CreateGuardrailBody = Type.Object({ key: GuardrailKey, type: StringEnum(GUARDRAIL_TYPES), ...guardrailFields }, { additionalProperties: false });
export const UpdateGuardrailBody = Type.Object(guardrailFields, { additionalProperties: false });

const GuardrailView = Type.Object({
  key: Type.String(),
  name: Type.String(),
  type: StringEnum(GUARDRAIL_TYPES),
  action: StringEnum(GUARDRAIL_ACTIONS),
  target: StringEnum(GUARDRAIL_TARGETS),
  config: Type.Record(Type.String(), Type.Unknown()),
  modelKey: Type.Union([Type.String(), Type.Null()]),
  failMode: StringEnum(FAIL_MODES),
  enabled: Type.Boolean(),
  createdAt: IsoDateTime,
  updatedAt: IsoDateTime,
});

const KeyParams = Type.Object({ key: Type.String({ maxLength: 200 }) });

export const listGuardrailsSchema = {
  operationId: 'guardrails.list',
  tags: ['dashboard'],
  summary: "The project's guardrails",
  response: { 200: Type.Object({ guardrails: Type.Array(GuardrailView) }), ...errorResponses(401, 403) },
};

export const createGuardrailSchema = {
  operationId: 'guardrails.create',
  tags: ['dashboard'],
  body: CreateGuardrailBody,
  response: { 201: Type.Object({ guardrail: GuardrailView }), ...errorResponses(400, 401, 403, 409) },
};

export const updateGuardrailSchema = {
  operationId: 'guardrails.update',
  tags: ['dashboard'],
  params: KeyParams,
  body: UpdateGuardrailBody,
  response: { 200: Type.Object({ guardrail: GuardrailView }), ...errorResponses(400, 401, 403, 404) },
};

export const deleteGuardrailSchema = {
  operationId: 'guardrails.delete',
  tags: ['dashboard'],
  summary: 'Delete a guardrail (409 while a model names it)',
  params: KeyParams,
  response: { 200: Type.Object({ success: Type.Literal(true) }), ...errorResponses(401, 403, 404, 409) },
};

const EvaluationView = Type.Object({
  id: Type.String(),
  stage: StringEnum(['evaluate', 'input', 'output']),
  model: Type.Union([Type.String(), Type.Null()]),
  requestId: Type.String(),
  passed: Type.Boolean(),
  outcome: Type.Union([StringEnum(['blocked', 'redacted', 'flagged']), Type.Null()]),
  categories: Type.Array(Type.String()),
  maskedText: Type.String({ description: 'The start of the text with every PII finding redacted' }),
  latencyMs: Type.Number(),
  createdAt: IsoDateTime,
});

export const evaluationsSchema = {
  operationId: 'guardrails.evaluations',
  tags: ['dashboard'],
  summary: "A guardrail's recent evaluations (masked) and its fail rate over the last 24 hours",
  params: KeyParams,
  querystring: Type.Object({ limit: Type.Optional(Type.Integer({ description: 'Default 50, clamped to 1-500' })) }, { additionalProperties: false }),
  response: {
    200: Type.Object({
      stats: Type.Object({ since: IsoDateTime, evaluations: Type.Integer(), failed: Type.Integer(), failRate: Type.Number() }),
      evaluations: Type.Array(EvaluationView),
    }),
    ...errorResponses(400, 401, 403, 404),
  },
};

export const EvaluateBody = Type.Object(
  {
    guardrail_key: Type.String({ minLength: 1, maxLength: 200 }),
    text: Type.String({ maxLength: 1_000_000 }),
    request_id: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);

export const evaluateSchema = {
  operationId: 'guardrails.evaluate',
  tags: ['client'],
  summary: 'Evaluate text against a guardrail of the project (interface 4.9)',
  body: EvaluateBody,
  response: {
    200: Type.Object({
      passed: Type.Boolean(),
      guardrail_key: Type.String(),
      guardrail_name: Type.String(),
      action: StringEnum(GUARDRAIL_ACTIONS),
      findings: Type.Array(Type.Object({ category: Type.String(), message: Type.String(), block: Type.Boolean() })),
      message: Type.Union([Type.String(), Type.Null()]),
      redacted_text: Type.Optional(Type.String({ description: 'The text with PII replaced by [REDACTED:<category>], when the guardrail redacts' })),
    }),
    ...errorResponses(400, 401, 403, 404),
  },
};
