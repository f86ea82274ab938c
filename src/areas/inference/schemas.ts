import { Type } from '@sinclair/typebox';
import { errorResponses, StringEnum } from '../../http/schemas.js';

/** OpenAI-compatible bodies: the fields Waygate relies on are checked; every other field passes through. */
const open = { additionalProperties: true };
const ModelKey = Type.String({ minLength: 1, maxLength: 200, description: 'A model key of the project (GET /models)' });
const MaxTokens = Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Null()]));

/**
 * A part's text and refusal, which input guardrails read, must be strings (as OpenAI requires): a provider that turns
 * another value into text (Anthropic's) would otherwise send a text no guardrail saw.
 */
const ContentPart = Type.Object({ type: Type.String({ minLength: 1 }), text: Type.Optional(Type.String()), refusal: Type.Optional(Type.String()) }, open);
/**
 * Function arguments and a refusal must be strings too (OpenAI's rule): guardrails read strings, and a provider would
 * otherwise forward, or serialise, a value none of them read. The same holds for an earlier answer's reasoning
 * (DeepSeek's `reasoning_content`, vLLM's and OpenRouter's `reasoning`) and its audio transcript.
 */
const FunctionCall = Type.Object({ arguments: Type.Optional(Type.String()) }, open);
const ToolCall = Type.Object({ function: Type.Optional(FunctionCall) }, open);
const Message = Type.Object(
  {
    role: StringEnum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
    content: Type.Optional(Type.Union([Type.String(), Type.Array(ContentPart), Type.Null()])),
    refusal: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    reasoning_content: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    reasoning: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    audio: Type.Optional(Type.Union([Type.Object({ transcript: Type.Optional(Type.String()) }, open), Type.Null()])),
    tool_calls: Type.Optional(Type.Union([Type.Array(ToolCall), Type.Null()])),
    function_call: Type.Optional(Type.Union([FunctionCall, Type.Null()])),
  },
  open,
);

export const ChatBody = Type.Object(
  {
    model: ModelKey,
    messages: Type.Array(Message, { minItems: 1 }),
    stream: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    stream_options: Type.Optional(Type.Union([Type.Object({ include_usage: Type.Optional(Type.Boolean()) }, open), Type.Null()])),
    max_tokens: MaxTokens,
    max_completion_tokens: MaxTokens,
    // OpenAI's bounds: budgets reserve max_tokens for each choice, so the count must be a real one.
    n: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 128 }), Type.Null()])),
  },
  open,
);

export const EmbeddingsBody = Type.Object(
  {
    model: ModelKey,
    // OpenAI refuses empty input: an empty string has nothing to embed.
    input: Type.Union([
      Type.String({ minLength: 1 }),
      Type.Array(Type.String({ minLength: 1 }), { minItems: 1, maxItems: 2048 }),
      Type.Array(Type.Integer({ minimum: 0 }), { minItems: 1 }),
      Type.Array(Type.Array(Type.Integer({ minimum: 0 }), { minItems: 1 }), { minItems: 1, maxItems: 2048 }),
    ]),
    encoding_format: Type.Optional(StringEnum(['float', 'base64'])),
    dimensions: Type.Optional(Type.Integer({ minimum: 1 })),
  },
  open,
);

export const ModerationsBody = Type.Object(
  {
    // Optional, as in OpenAI's API: without it the project's one moderation model answers.
    model: Type.Optional(ModelKey),
    input: Type.Union([Type.String(), Type.Array(Type.Union([Type.String(), Type.Object({}, open)]), { minItems: 1 })]),
  },
  open,
);

const ProviderShaped = (description: string) => Type.Object({}, { ...open, description });
const inferenceErrors = errorResponses(400, 401, 403, 404, 429, 502, 504);

export const chatSchema = {
  operationId: 'inference.chat',
  tags: ['client'],
  summary: 'Chat completions (OpenAI-compatible; `stream: true` answers text/event-stream)',
  body: ChatBody,
  response: { 200: ProviderShaped('chat.completion, or SSE chat.completion.chunk events ending with [DONE]'), ...inferenceErrors },
};

export const embeddingsSchema = {
  operationId: 'inference.embeddings',
  tags: ['client'],
  summary: 'Embeddings (OpenAI-compatible, float or base64)',
  body: EmbeddingsBody,
  response: { 200: ProviderShaped('OpenAI embeddings list'), ...inferenceErrors },
};

export const moderationsSchema = {
  operationId: 'inference.moderations',
  tags: ['client'],
  summary: 'Moderations (OpenAI-compatible)',
  body: ModerationsBody,
  response: { 200: ProviderShaped('OpenAI moderation result'), ...inferenceErrors },
};

const OpenAiModel = Type.Object({ id: Type.String(), object: Type.Literal('model'), created: Type.Integer(), owned_by: Type.String(), capabilities: Type.Array(Type.String()) });

export const listModelsSchema = {
  operationId: 'inference.models',
  tags: ['client'],
  summary: "The project's models as an OpenAI model list",
  response: { 200: Type.Object({ object: Type.Literal('list'), data: Type.Array(OpenAiModel) }), ...errorResponses(400, 401, 403) },
};

export const getModelSchema = {
  operationId: 'inference.model',
  tags: ['client'],
  summary: 'One model of the project as an OpenAI model object',
  params: Type.Object({ model: ModelKey }),
  response: { 200: OpenAiModel, ...errorResponses(400, 401, 403, 404) },
};
