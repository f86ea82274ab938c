import type { ChatChunk, JsonObject } from '../../providers/types.js';

/**
 * Output guardrails on a stream see text before the client does. Each choice's text is held back by this many
 * characters and released only once the checks passed with that much text after it, so a finding that needs
 * following context (the end of an email address, the rest of a card number) is caught before its start is sent.
 */
export const STREAM_HOLD_BACK_CHARS = 512;
/** Checks run again once this much new text has arrived (not on every token). */
const STREAM_CHECK_EVERY_CHARS = 256;

/**
 * Checks texts (one per choice) and returns what may be sent: the same texts, or redacted ones. Throws to stop the
 * stream (a block). `final` is the check of the whole answer, once the upstream has finished.
 */
export type StreamCheck = (texts: string[], final: boolean) => Promise<string[]>;

interface ChoiceState {
  text: string;
  /** Characters of the checked (perhaps redacted) text already sent. */
  sent: number;
  /** What was sent, to tell whether a later check rewrote it (a finding reaching back past the hold-back). */
  sentText: string;
  checkedUpTo: number;
}

/** A stream that leaked text a later check would change: stopped rather than sent inconsistent. */
export class StreamGuardError extends Error {}

function contentOf(chunk: ChatChunk): { index: number; content: string }[] {
  const choices = chunk.data.choices as { index?: unknown; delta?: { content?: unknown } }[] | undefined;
  if (!Array.isArray(choices)) return [];
  return choices.flatMap((c) => (typeof c?.delta?.content === 'string' ? [{ index: typeof c.index === 'number' ? c.index : 0, content: c.delta.content }] : []));
}

/** A chunk with only this content delta for one choice, in the upstream's own id, model and timestamps. */
function contentChunk(template: JsonObject, index: number, content: string): ChatChunk {
  return { data: { id: template.id, object: 'chat.completion.chunk', created: template.created, model: template.model, choices: [{ index, delta: { content }, finish_reason: null }] } };
}

/** The chunk without its content deltas (role, finish reason, tool calls and usage stay), or null when nothing is left. */
function withoutContent(chunk: ChatChunk): ChatChunk | null {
  const choices = chunk.data.choices as { delta?: Record<string, unknown>; finish_reason?: unknown }[] | undefined;
  if (!Array.isArray(choices) || choices.length === 0) return chunk;
  const rest = choices
    .map((choice) => {
      if (!choice?.delta || typeof choice.delta.content !== 'string') return choice;
      const { content: _content, ...delta } = choice.delta;
      return { ...choice, delta };
    })
    .filter((choice) => choice?.finish_reason != null || Object.keys(choice?.delta ?? {}).length > 0);
  return rest.length === 0 ? null : { data: { ...chunk.data, choices: rest } };
}

/**
 * Passes a chat stream through output guardrails: content is held back (STREAM_HOLD_BACK_CHARS per choice) and
 * released, redacted where a guardrail redacts, once checked; roles and tool calls pass at once, finish reasons and
 * usage wait for the final check. `holdAll` (a guardrail asks a model): no content before the final check.
 */
export async function* guardStream(chunks: AsyncIterable<ChatChunk>, check: StreamCheck, holdAll: boolean): AsyncGenerator<ChatChunk> {
  const choices = new Map<number, ChoiceState>();
  const closing: ChatChunk[] = [];
  let template: JsonObject = {};

  const release = async function* (final: boolean): AsyncGenerator<ChatChunk> {
    const indexes = [...choices.keys()].sort((a, b) => a - b);
    const checked = await check(indexes.map((i) => choices.get(i)!.text), final);
    for (const [n, index] of indexes.entries()) {
      const state = choices.get(index)!;
      const text = checked[n] ?? state.text;
      if (!text.startsWith(state.sentText)) throw new StreamGuardError('A guardrail finding reaches back into text already sent; the stream was stopped');
      const until = final ? text.length : Math.max(state.sent, text.length - STREAM_HOLD_BACK_CHARS);
      if (until > state.sent) {
        const piece = text.slice(state.sent, until);
        state.sent = until;
        state.sentText += piece;
        yield contentChunk(template, index, piece);
      }
      state.checkedUpTo = state.text.length;
    }
  };

  for await (const chunk of chunks) {
    template = chunk.data;
    const pieces = contentOf(chunk);
    for (const { index, content } of pieces) {
      const state = choices.get(index) ?? { text: '', sent: 0, sentText: '', checkedUpTo: 0 };
      state.text += content;
      choices.set(index, state);
    }
    const rest = pieces.length > 0 ? withoutContent(chunk) : chunk;
    if (rest) {
      // Finish reasons and the usage chunk (no choices) go after the last content; roles and tool calls at once.
      const choicesOf = rest.data.choices as { finish_reason?: unknown }[] | undefined;
      const finishing = !Array.isArray(choicesOf) || choicesOf.length === 0 || choicesOf.some((c) => c?.finish_reason != null);
      if (finishing) closing.push(rest);
      else yield rest;
    }
    const due = [...choices.values()].some((s) => s.text.length - s.checkedUpTo >= STREAM_CHECK_EVERY_CHARS && s.text.length - s.sent > STREAM_HOLD_BACK_CHARS);
    if (!holdAll && due) yield* release(false);
  }
  yield* release(true);
  yield* closing;
}
