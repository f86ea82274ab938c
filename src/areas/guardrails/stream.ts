import { ERRORS } from '../../http/errors.js';
import type { ChatChunk, JsonObject } from '../../providers/types.js';
import { argumentsJson, MESSAGE_TEXT_FIELDS, readableArguments, writtenArguments, type MessageTextField } from './fields.js';
import type { Enforced } from './evaluator.js';

/**
 * Output guardrails on a stream see text before the client does. Each choice's content is held back by this many
 * characters, and never cut inside a word still arriving, and released only once the checks passed with that much
 * text after it: a finding that needs following context (the end of an email address, the rest of a card number)
 * is caught before its start is sent.
 */
const STREAM_HOLD_BACK_CHARS = 512;
/** Checks run again once this much new text, or a quarter of what was checked, has arrived: linear, not quadratic. */
const STREAM_CHECK_EVERY_CHARS = 256;

/**
 * How a stream is guarded: `window` releases content as it is checked; `whole` (a guardrail asks a model) releases
 * nothing before the final check; `observe` (every guardrail only flags) holds nothing and checks at the end.
 */
export type StreamGuardMode = 'window' | 'whole' | 'observe';

/**
 * Checks the texts (content, refusals, reasoning, function and tool arguments and audio transcripts of every choice);
 * throws to stop the stream.
 */
export type StreamCheck = (texts: string[], final: boolean) => Promise<Enforced>;

type FunctionCall = { name?: unknown; arguments?: unknown };
type Audio = { transcript?: unknown; [key: string]: unknown };
type Delta = {
  content?: unknown;
  refusal?: unknown;
  reasoning_content?: unknown;
  /** vLLM's, OpenRouter's and Ollama's name for reasoning_content. */
  reasoning?: unknown;
  audio?: Audio | null;
  /** The legacy single function call (before tool_calls), still streamed by some upstreams. */
  function_call?: FunctionCall | null;
  tool_calls?: { index?: unknown; id?: unknown; type?: unknown; function?: FunctionCall }[];
};
type Choice = { index?: unknown; delta?: Delta; finish_reason?: unknown; logprobs?: unknown };

/** Text that arrives piece by piece: a choice's content (released as checked), or text held to the end. */
interface Channel {
  text: string;
  /** Content only: characters of the checked text sent, and what they were. */
  sent: number;
  sentText: string;
}

/** Function or tool call arguments, held to the end; `original`: the whole text as it came, once made readable. */
type ArgumentsChannel = Channel & { name?: unknown; original?: string };

interface ChoiceState {
  content: Channel;
  held: Record<MessageTextField, Channel>;
  functionCall?: ArgumentsChannel;
  tools: Map<number, ArgumentsChannel & { id?: unknown; type?: unknown }>;
  /** Audio deltas without their transcript pieces, held with the transcript: the transcript goes in the last one. */
  audio?: Channel & { parts: Record<string, unknown>[] };
}

const channel = (): Channel => ({ text: '', sent: 0, sentText: '' });
/** Delta fields of text (MESSAGE_TEXT_FIELDS) are held to the end and sent back under the name the upstream used. */
const newState = (): ChoiceState => ({ content: channel(), held: Object.fromEntries(MESSAGE_TEXT_FIELDS.map((field) => [field, channel()])) as ChoiceState['held'], tools: new Map() });

/** A piece of streamed arguments: a string as it comes (whole arguments are made readable at the end), another value as JSON. */
function argumentsPiece(value: unknown): string {
  return typeof value === 'string' ? value : (argumentsJson(value) ?? '');
}

/** Whole arguments made readable (see readableArguments), the text as it came kept to be sent when nothing changes. */
function makeReadable(state: ChoiceState): void {
  for (const held of [state.functionCall, ...state.tools.values()]) {
    if (!held) continue;
    held.original = held.text;
    held.text = readableArguments(held.text);
  }
}

/** The audio deltas to send at the end, the last one carrying the checked transcript. */
function audioDeltas(audio: NonNullable<ChoiceState['audio']>, transcript: string | undefined): Record<string, unknown>[] {
  const parts = audio.parts.length > 0 ? audio.parts : [{}];
  return parts.map((part, i) => (i === parts.length - 1 && transcript ? { ...part, transcript } : part));
}

/**
 * A guarded stream passes on only what it checked, and what cannot hold text: an upstream's text anywhere else (a
 * `message` beside the delta, a delta's `text`, a field of the chunk, a finish reason) would reach the client
 * unchecked. Logprobs repeat the text token by token.
 */
const CHUNK_FIELDS = ['id', 'object', 'created', 'model', 'system_fingerprint'] as const;
/** What a role or a finish reason is: a word, not a text (`assistant`, `tool_calls`). */
const KEYWORD = /^[a-z_]{1,32}$/;

const isScalar = (value: unknown) => value === null || typeof value === 'number' || typeof value === 'boolean';

/** Fields with no text in them, of a choice or a delta: numbers, booleans, null. */
function scalarFields(fields: Record<string, unknown>, skip: ReadonlySet<string>): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(fields)) if (!skip.has(field) && isScalar(value)) kept[field] = value;
  return kept;
}

const CHOICE_SKIPPED = new Set(['delta', 'logprobs', 'finish_reason']);
const NOTHING_SKIPPED = new Set<string>();

/** A choice without its delta: its scalar fields, and a finish reason that is null or a word (else "stop"). */
function keptFields(choice: Choice): Record<string, unknown> {
  const kept = scalarFields(choice, CHOICE_SKIPPED);
  const reason = choice.finish_reason;
  if (reason !== undefined) kept.finish_reason = reason === null || (typeof reason === 'string' && KEYWORD.test(reason)) ? reason : 'stop';
  return kept;
}

/** Usage as counts: numbers, and objects of numbers (`prompt_tokens_details`), nothing that could hold text. */
function usageCounts(usage: unknown): unknown {
  if (typeof usage !== 'object' || usage === null) return typeof usage === 'number' ? usage : undefined;
  const counts: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(usage)) {
    const count = usageCounts(value);
    if (count !== undefined) counts[field] = count;
  }
  return counts;
}

/** The rest of a delta (its texts are held): a role that is a word, and scalar fields. */
function keptDelta(rest: Record<string, unknown>): Record<string, unknown> {
  const kept = scalarFields(rest, NOTHING_SKIPPED);
  if (typeof rest.role === 'string' && KEYWORD.test(rest.role)) kept.role = rest.role;
  return kept;
}

/** A chunk's own fields that say what it is, with these choices; its usage as counts, its service tier if a word. */
function chunkWith(data: JsonObject, choices: unknown[]): ChatChunk {
  const kept: JsonObject = {};
  for (const field of CHUNK_FIELDS) if (data[field] !== undefined) kept[field] = data[field];
  if (typeof data.service_tier === 'string' && KEYWORD.test(data.service_tier)) kept.service_tier = data.service_tier;
  if (data.usage != null) kept.usage = usageCounts(data.usage);
  return { data: { ...kept, choices } };
}

function choicesOf(chunk: ChatChunk): Choice[] {
  const choices = chunk.data.choices as Choice[] | undefined;
  // Entries that are not objects carry nothing to check (a malformed upstream's nulls).
  return Array.isArray(choices) ? choices.filter((choice) => typeof choice === 'object' && choice !== null) : [];
}

/** A chunk of this choice delta only, in the upstream's own id, model and timestamps. */
function chunkOf(template: JsonObject, index: number, delta: Record<string, unknown>): ChatChunk {
  return { data: { id: template.id, object: 'chat.completion.chunk', created: template.created, model: template.model, choices: [{ index, delta, finish_reason: null }] } };
}

/**
 * Passes a chat stream through output guardrails. Content is held back and released as it is checked, redacted
 * where a guardrail redacts; refusals, reasoning, function and tool call arguments (read with their escapes decoded)
 * and audio (with its transcript) are held to the end and checked with it; roles go at once; finish reasons and
 * usage come last. Logprobs, and any other field that can hold text, are dropped (keptFields, keptDelta, chunkWith).
 */
export async function* guardStream(chunks: AsyncIterable<ChatChunk>, check: StreamCheck, mode: StreamGuardMode): AsyncGenerator<ChatChunk> {
  const choices = new Map<number, ChoiceState>();
  const closing: ChatChunk[] = [];
  let template: JsonObject = {};
  let checkedUpTo = 0;

  const stateOf = (index: number): ChoiceState => {
    let state = choices.get(index);
    if (!state) choices.set(index, (state = newState()));
    return state;
  };
  /** Every text, in a fixed order: content, held fields, function call, tool arguments, then audio, choice by choice. */
  const channels = (): Channel[] => [...choices.keys()].sort((a, b) => a - b).flatMap((i) => {
    const s = choices.get(i)!;
    const functionCall = s.functionCall ? [s.functionCall] : [];
    const audio = s.audio ? [s.audio] : [];
    return [s.content, ...MESSAGE_TEXT_FIELDS.map((f) => s.held[f]), ...functionCall, ...[...s.tools.keys()].sort((a, b) => a - b).map((k) => s.tools.get(k)!), ...audio];
  });
  const contentLength = () => [...choices.values()].reduce((n, s) => n + s.content.text.length, 0);

  const release = async function* (final: boolean): AsyncGenerator<ChatChunk> {
    const all = channels();
    const { texts, redactedBy } = await check(all.map((c) => c.text), final);
    checkedUpTo = contentLength();
    for (const [index, state] of [...choices].sort(([a], [b]) => a - b)) {
      const content = state.content;
      const text = texts[all.indexOf(content)] ?? content.text;
      // A finding reaching back into text already sent (longer than the hold-back): stop rather than send it changed.
      if (!text.startsWith(content.sentText)) throw ERRORS.guardrailBlock(redactedBy?.guardrailKey ?? 'output', 'output', redactedBy?.findings ?? []);
      let until = text.length;
      if (!final) {
        const trailingRun = text.length - (text.match(/\S*$/)?.[0].length ?? 0);
        until = Math.max(content.sent, Math.min(text.length - STREAM_HOLD_BACK_CHARS, trailingRun));
      }
      if (until > content.sent) {
        const piece = text.slice(content.sent, until);
        content.sent = until;
        content.sentText += piece;
        yield chunkOf(template, index, { content: piece });
      }
      if (!final) continue;
      const delta: Record<string, unknown> = {};
      for (const field of MESSAGE_TEXT_FIELDS) if (state.held[field].text) delta[field] = texts[all.indexOf(state.held[field])];
      const written = (held: ArgumentsChannel) => writtenArguments(held.original ?? held.text, held.text, texts[all.indexOf(held)] ?? held.text);
      if (state.functionCall) delta.function_call = { name: state.functionCall.name, arguments: written(state.functionCall) };
      if (state.tools.size > 0) {
        delta.tool_calls = [...state.tools].map(([k, tool]) => ({ index: k, id: tool.id, type: tool.type ?? 'function', function: { name: tool.name, arguments: written(tool) } }));
      }
      if (state.audio) {
        const audio = audioDeltas(state.audio, texts[all.indexOf(state.audio)]);
        for (const part of audio.slice(0, -1)) yield chunkOf(template, index, { audio: part });
        delta.audio = audio.at(-1);
      }
      if (Object.keys(delta).length > 0) yield chunkOf(template, index, delta);
    }
  };

  for await (const chunk of chunks) {
    template = chunk.data;
    const rest: Choice[] = [];
    for (const choice of choicesOf(chunk)) {
      const index = typeof choice.index === 'number' ? choice.index : 0;
      const state = stateOf(index);
      const delta = choice.delta ?? {};
      // The held fields (MESSAGE_TEXT_FIELDS) are left out of `other` by name.
      const { content, refusal: _refusal, reasoning_content: _reasoningContent, reasoning: _reasoning, audio, function_call: functionCall, tool_calls: tools, ...other } = delta;
      if (typeof content === 'string') state.content.text += content;
      for (const field of MESSAGE_TEXT_FIELDS) {
        const piece = delta[field];
        if (typeof piece === 'string') state.held[field].text += piece;
      }
      if (typeof audio === 'object' && audio !== null) {
        const { transcript, ...part } = audio;
        const held = (state.audio ??= { ...channel(), parts: [] });
        if (typeof transcript === 'string') held.text += transcript;
        if (Object.keys(part).length > 0) held.parts.push(part);
      }
      if (typeof functionCall === 'object' && functionCall !== null) {
        const held: ArgumentsChannel = (state.functionCall ??= channel());
        held.name ??= functionCall.name;
        held.text += argumentsPiece(functionCall.arguments);
      }
      for (const tool of Array.isArray(tools) ? tools.filter((t) => typeof t === 'object' && t !== null) : []) {
        const k = typeof tool.index === 'number' ? tool.index : 0;
        const held = state.tools.get(k) ?? { ...channel() };
        held.id ??= tool.id;
        held.type ??= tool.type;
        held.name ??= tool.function?.name;
        held.text += argumentsPiece(tool.function?.arguments);
        state.tools.set(k, held);
      }
      const restOfDelta = keptDelta(other);
      if (Object.keys(restOfDelta).length > 0 || choice.finish_reason != null) rest.push({ ...keptFields(choice), delta: restOfDelta });
    }
    if (mode === 'observe') {
      // Flagging changes nothing: the client gets the stream as it comes, and the final check records it.
      yield chunk;
      continue;
    }
    const finishing = !Array.isArray(chunk.data.choices) || chunk.data.choices.length === 0 || rest.some((c) => c.finish_reason != null);
    // Roles go at once; finish reasons and the usage chunk (no choices) after the last checked text.
    if (rest.length > 0 || finishing) {
      const kept = chunkWith(chunk.data, rest);
      if (finishing) closing.push(kept);
      else yield kept;
    }
    const grown = contentLength() - checkedUpTo;
    if (mode === 'window' && grown >= Math.max(STREAM_CHECK_EVERY_CHARS, checkedUpTo / 4) && [...choices.values()].some((s) => s.content.text.length - s.content.sent > STREAM_HOLD_BACK_CHARS)) {
      yield* release(false);
    }
  }
  // Whole arguments are checked with their escapes decoded, and sent as they came unless a guardrail changed them.
  for (const state of choices.values()) makeReadable(state);
  if (mode === 'observe') await check(channels().map((c) => c.text), true);
  else yield* release(true);
  yield* closing;
}
