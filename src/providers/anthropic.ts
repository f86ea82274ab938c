import { randomUUID } from 'node:crypto';
import { ERRORS } from '../http/errors.js';
import { UpstreamError } from './errors.js';
import { parseEvent, parseObject, type UpstreamClient } from './http.js';
import { joinUrl } from './openai-compatible.js';
import { sseBatches } from './sse.js';
import { openAiUsage, tokenCount } from './tokens.js';
import type { CallOptions, ChatChunk, JsonObject, JsonResult, ModelTarget, Provider, Usage } from './types.js';
import { asText, isJsonObject } from '../platform/text.js';
import { unixSeconds } from '../platform/time.js';

const ANTHROPIC_VERSION = '2023-06-01';
/** Where an anthropic model without a baseUrl goes. */
export const ANTHROPIC_BASE_URL = 'https://api.anthropic.com/v1';
/** Anthropic requires max_tokens; this is used when the chat request sets none. */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 4096;

const STOP_REASONS: Record<string, string> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  tool_use: 'tool_calls',
  refusal: 'content_filter',
};

type Block = Record<string, unknown>;

/** OpenAI's finish_reason for an Anthropic stop_reason (own keys only: "constructor" is no stop reason). */
function finishReasonOf(reason: unknown): string {
  const key = asText(reason);
  return Object.hasOwn(STOP_REASONS, key) ? STOP_REASONS[key]! : 'stop';
}

function imageBlock(url: string): Block {
  const data = /^data:([^;]+);base64,(.*)$/s.exec(url);
  return data ? { type: 'image', source: { type: 'base64', media_type: data[1], data: data[2] } } : { type: 'image', source: { type: 'url', url } };
}

/** Content parts Anthropic takes; any other (audio, files) would be dropped without a word, so it is refused. */
function contentBlocks(content: unknown): Block[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }];
  if (!Array.isArray(content)) return [];
  return content.flatMap((part: unknown) => {
    if (!isJsonObject(part)) return [];
    if (part.type === 'text') return [{ type: 'text', text: asText(part.text, '') }];
    if (part.type === 'image_url') return [imageBlock(asText((part.image_url as { url?: unknown } | undefined)?.url, ''))];
    throw ERRORS.validation(`Anthropic models take text and image_url content parts; a "${asText(part.type)}" part cannot be sent`);
  });
}

/**
 * An earlier tool call's arguments as `tool_use.input`, which Anthropic takes only as an object. Arguments that are
 * not one (a call cut off by max_tokens leaves half a JSON text in the history) are sent as `{}` (README), so that
 * the conversation can go on.
 */
function parseArguments(text: unknown): JsonObject {
  try {
    const input: unknown = typeof text === 'string' && text !== '' ? JSON.parse(text) : {};
    return isJsonObject(input) ? input : {};
  } catch {
    return {};
  }
}

/** Chat messages to Anthropic's `system` + alternating messages; tool results ride in user turns. */
function translateMessages(messages: JsonObject[]): { system: string | undefined; messages: JsonObject[] } {
  const system: string[] = [];
  const out: JsonObject[] = [];
  const push = (role: 'user' | 'assistant', blocks: Block[]) => {
    // Anthropic refuses a message without content, which OpenAI allows ("" from an assistant, say).
    if (blocks.length === 0) return;
    const last = out[out.length - 1];
    if (last && last.role === role) (last.content as Block[]).push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const message of messages) {
    const role = message.role;
    if (role === 'system' || role === 'developer') {
      const text = contentBlocks(message.content).map((b) => b.text).join('\n');
      if (text) system.push(text);
    } else if (role === 'tool') {
      push('user', [{ type: 'tool_result', tool_use_id: asText(message.tool_call_id, ''), content: contentBlocks(message.content) }]);
    } else if (role === 'assistant') {
      const calls = Array.isArray(message.tool_calls) ? (message.tool_calls as unknown[]).filter(isJsonObject) : [];
      const toolUses = calls.map((call) => {
        const fn = (call.function ?? {}) as JsonObject;
        return { type: 'tool_use', id: asText(call.id, ''), name: asText(fn.name, ''), input: parseArguments(fn.arguments) };
      });
      push('assistant', [...contentBlocks(message.content), ...toolUses]);
    } else {
      push('user', contentBlocks(message.content));
    }
  }
  return { system: system.length > 0 ? system.join('\n\n') : undefined, messages: out };
}

function translateToolChoice(choice: unknown, parallel: unknown): JsonObject | undefined {
  const single = parallel === false ? { disable_parallel_tool_use: true } : {};
  if (choice === 'auto' || (choice === undefined && parallel === false)) return { type: 'auto', ...single };
  if (choice === 'required') return { type: 'any', ...single };
  if (choice === 'none') return { type: 'none' };
  const name = (choice as { function?: { name?: unknown } } | null)?.function?.name;
  return typeof name === 'string' ? { type: 'tool', name, ...single } : undefined;
}

/** A chat completions request as an Anthropic Messages request. */
export function toAnthropicRequest(body: JsonObject, model: string, stream: boolean): JsonObject {
  const { system, messages } = translateMessages(Array.isArray(body.messages) ? (body.messages as JsonObject[]) : []);
  // Silently answering one choice would break a client that reads choices[1].
  if (typeof body.n === 'number' && body.n > 1) {
    throw ERRORS.validation('Anthropic models answer one choice per request: n must be 1 (send one request per choice)');
  }
  const stop = typeof body.stop === 'string' ? [body.stop] : (body.stop ?? undefined);
  const tools = Array.isArray(body.tools)
    ? (body.tools as unknown[]).filter(isJsonObject).map((tool) => {
        const fn = (tool.function ?? {}) as JsonObject;
        return { name: fn.name, description: fn.description, input_schema: fn.parameters ?? { type: 'object', properties: {} } };
      })
    : undefined;
  const request: JsonObject = {
    model,
    messages,
    system,
    max_tokens: body.max_completion_tokens ?? body.max_tokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS,
    // OpenAI takes null for "the default"; Anthropic wants the field left out.
    temperature: body.temperature ?? undefined,
    top_p: body.top_p ?? undefined,
    stop_sequences: stop,
    tools,
    tool_choice: tools ? translateToolChoice(body.tool_choice, body.parallel_tool_calls) : undefined,
    stream: stream || undefined,
  };
  if (typeof body.user === 'string') request.metadata = { user_id: body.user };
  return request;
}

/** An Anthropic message as a chat.completion; `usage` is its counts, when the caller has them already. */
export function fromAnthropicMessage(message: JsonObject, usage = anthropicUsage(message.usage)): JsonObject {
  const blocks = Array.isArray(message.content) ? (message.content as unknown[]).filter(isJsonObject) : [];
  const text = blocks.filter((b) => b.type === 'text').map((b) => asText(b.text, '')).join('');
  const toolCalls = blocks
    .filter((b) => b.type === 'tool_use')
    .map((b) => ({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } }));
  return {
    id: asText(message.id, `chatcmpl-${randomUUID()}`),
    object: 'chat.completion',
    created: unixSeconds(Date.now()),
    model: message.model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: text === '' && toolCalls.length > 0 ? null : text, ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}) },
        finish_reason: finishReasonOf(message.stop_reason),
        logprobs: null,
      },
    ],
    // Without the upstream's counts there is no usage to show; Waygate meters its own estimate.
    ...(usage ? { usage: openAiUsage(usage) } : {}),
  };
}

/**
 * Anthropic's usage object as token counts, when it holds both an input and an output count: with one missing the
 * gateway counts the call itself, rather than bill its output as nothing.
 */
function anthropicUsage(value: unknown): Usage | null {
  const usage = (isJsonObject(value) ? value : {}) as { input_tokens?: unknown; output_tokens?: unknown };
  const input = tokenCount(usage.input_tokens);
  const output = tokenCount(usage.output_tokens);
  return input === undefined || output === undefined ? null : { inputTokens: input, outputTokens: output, estimated: false };
}

/** Anthropic's stream events as chat.completion.chunk objects (the usage chunk last, with empty choices). */
async function* anthropicChunks(body: AsyncIterable<Buffer>, complete: () => void): AsyncGenerator<ChatChunk> {
  let id = `chatcmpl-${randomUUID()}`;
  let model: unknown = null;
  let started = false;
  const created = unixSeconds(Date.now());
  let input: number | undefined;
  // Only message_delta's count is the answer's: message_start's is a placeholder, sent before any output.
  let output: number | undefined;
  const toolIndexByBlock = new Map<number, number>();
  const chunk = (delta: JsonObject, finish: string | null = null): ChatChunk => ({
    data: { id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] },
  });
  // Events come a read's worth at a time (sseBatches); each is handled in order.
  for await (const events of sseBatches(body)) for (const event of events) {
    const data = parseEvent(event.data);
    if (!isJsonObject(data)) throw new UpstreamError('malformed', 'Upstream stream sent a non-object event');
    switch (data.type) {
      case 'message_start': {
        const message = (data.message ?? {}) as JsonObject;
        id = asText(message.id, id);
        model = message.model ?? model;
        input = tokenCount((message.usage as JsonObject | undefined)?.input_tokens);
        started = true;
        yield chunk({ role: 'assistant', content: '' });
        break;
      }
      case 'content_block_start': {
        const block = (data.content_block ?? {}) as JsonObject;
        if (block.type === 'tool_use') {
          const index = toolIndexByBlock.size;
          toolIndexByBlock.set(Number(data.index), index);
          yield chunk({ tool_calls: [{ index, id: block.id, type: 'function', function: { name: block.name, arguments: '' } }] });
        }
        break;
      }
      case 'content_block_delta': {
        const delta = (data.delta ?? {}) as JsonObject;
        if (delta.type === 'text_delta') yield chunk({ content: asText(delta.text, '') });
        else if (delta.type === 'input_json_delta') {
          const index = toolIndexByBlock.get(Number(data.index)) ?? 0;
          yield chunk({ tool_calls: [{ index, function: { arguments: asText(delta.partial_json, '') } }] });
        }
        break;
      }
      case 'message_delta': {
        output = tokenCount((data.usage as JsonObject | undefined)?.output_tokens) ?? output;
        const reason = (data.delta as JsonObject | undefined)?.stop_reason;
        if (reason) yield chunk({}, finishReasonOf(reason));
        break;
      }
      case 'message_stop':
        // A stop before message_start sent nothing: no answer, failing before the client's first byte.
        if (!started) throw new UpstreamError('malformed', 'Upstream stream ended before its first chunk');
        complete();
        // Without both counts there is no usage chunk: the gateway counts the tokens itself.
        if (input !== undefined && output !== undefined) yield { data: { id, object: 'chat.completion.chunk', created, model, choices: [], usage: openAiUsage({ inputTokens: input, outputTokens: output }) } };
        return;
      case 'error':
        throw new UpstreamError('http', 'Upstream stream reported an error', 502, anthropicError(data, 502));
      default:
        break;
    }
  }
  throw new UpstreamError('malformed', 'Upstream stream ended before message_stop');
}

function anthropicError(parsed: unknown, status: number): { error: Record<string, unknown> } {
  const error = (parsed as { error?: { type?: unknown; message?: unknown } } | null)?.error;
  return { error: { message: asText(error?.message, `Upstream answered ${status}`), type: asText(error?.type, 'upstream_error'), code: null } };
}

/** Anthropic's Messages API behind chat completions (streaming included); no embeddings or moderation. */
export function anthropic(client: UpstreamClient): Provider {
  const request = (target: ModelTarget, body: JsonObject, stream: boolean, options: CallOptions) => ({
    url: joinUrl(target.baseUrl ?? ANTHROPIC_BASE_URL, 'messages'),
    headers: {
      ...target.headers,
      'anthropic-version': ANTHROPIC_VERSION,
      ...(target.apiKey ? { 'x-api-key': target.apiKey } : {}),
      'x-request-id': options.requestId,
      ...(stream ? { accept: 'text/event-stream' } : {}),
    },
    body: JSON.stringify(toAnthropicRequest(body, target.upstreamModel, stream)),
    signal: options.signal,
  });
  return {
    async chat(target, body, options): Promise<JsonResult> {
      const response = await client.postJson(request(target, body, false, options));
      const message = parseObject(response.text);
      // An error (or anything but a message) under a 200 is no answer: the next fallback is tried, as for a 5xx.
      if (message.type === 'error' || isJsonObject(message.error)) throw new UpstreamError('http', 'Upstream answered 200 with an error', 502, anthropicError(message, 200));
      // A proxy may leave `type` out of a message; its content list still tells one.
      const isMessage = message.type === undefined ? Array.isArray(message.content) : message.type === 'message';
      if (!isMessage) throw new UpstreamError('malformed', 'Upstream answered 200 with an object that is not a message');
      const usage = anthropicUsage(message.usage);
      return { body: fromAnthropicMessage(message, usage), usage };
    },
    async chatStream(target, body, options): Promise<AsyncIterable<ChatChunk>> {
      const response = await client.postStream(request(target, body, true, options));
      return anthropicChunks(response.body, response.complete);
    },
    async embeddings() {
      throw ERRORS.validation('Anthropic models do not offer embeddings');
    },
    async moderations() {
      throw ERRORS.validation('Anthropic models do not offer moderation');
    },
  };
}
