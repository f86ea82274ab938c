import { UpstreamError } from './errors.js';

export interface SseEvent {
  event: string | null;
  data: string;
}

/** Largest event accepted from an upstream; a stream that never ends an event is broken, not slow. */
const MAX_EVENT_BYTES = 4 * 1024 * 1024;

/** A line ends at CRLF, LF or a lone CR (the SSE grammar). */
const LINE_END = /\r\n|\r|\n/g;
const CR = 13;
const SPACE = 32;

/**
 * Server-sent events from a byte stream (\n, \r\n or \r line ends); comments and ids are skipped. They come in
 * batches, the events each read of the body completes: a stream's events mostly arrive several to a read, and a
 * batch costs its reader one await where an event each would cost one per event, at every layer above.
 */
export async function* sseBatches(body: AsyncIterable<Buffer>): AsyncGenerator<SseEvent[]> {
  const decoder = new TextDecoder();
  let buffered = '';
  let event: string | null = null;
  /** The event's data lines so far, joined with \n; null before its first. */
  let data: string | null = null;
  let size = 0;
  /** Takes one line; returns the event it completes, if any. */
  const line = (text: string): SseEvent | null => {
    if (text === '') {
      const done = data !== null ? { event, data } : null;
      event = null;
      data = null;
      size = 0;
      return done;
    }
    if (text.startsWith(':')) return null;
    const colon = text.indexOf(':');
    const field = colon === -1 ? text : text.slice(0, colon);
    // One space after the colon is not part of the value.
    const value = colon === -1 ? '' : text.slice(text.charCodeAt(colon + 1) === SPACE ? colon + 2 : colon + 1);
    if (field === 'data') {
      // The line breaks between data lines count too: endless empty data lines are an over-long event as well.
      size += data === null ? value.length : value.length + 1;
      if (size > MAX_EVENT_BYTES) throw new UpstreamError('malformed', 'Upstream stream sent an over-long event');
      data = data === null ? value : `${data}\n${value}`;
    } else if (field === 'event') event = value;
    return null;
  };
  // Its own copy: a global regex keeps its position in lastIndex, and several streams are parsed at once.
  const lineEnd = new RegExp(LINE_END);
  /** The events the buffered text completes, into `out`; what is left of it stays buffered. */
  const takeEvents = (out: SseEvent[]) => {
    let start = 0;
    lineEnd.lastIndex = 0;
    let match: RegExpExecArray | null;
    while ((match = lineEnd.exec(buffered)) !== null) {
      // A CR that ends the chunk may be the first half of a CRLF: it waits for the next chunk.
      if (match.index === buffered.length - 1 && buffered.charCodeAt(match.index) === CR) break;
      const done = line(buffered.slice(start, match.index));
      start = lineEnd.lastIndex;
      if (done) out.push(done);
    }
    buffered = buffered.slice(start);
    if (buffered.length + size > MAX_EVENT_BYTES) throw new UpstreamError('malformed', 'Upstream stream sent an over-long event');
  };
  for await (const chunk of body) {
    buffered += decoder.decode(chunk, { stream: true });
    const events: SseEvent[] = [];
    let failure: unknown = null;
    try {
      takeEvents(events);
    } catch (err) {
      // The events before the fault still go out first, as they would have one by one.
      failure = err;
    }
    if (events.length > 0) yield events;
    if (failure) throw failure;
  }
  buffered += decoder.decode();
  // A stream may end without the blank line that closes its last event.
  for (const rest of buffered.split(LINE_END)) if (rest !== '') line(rest);
  const last = line('');
  if (last) yield [last];
}
