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

/** Server-sent events from a byte stream (\n, \r\n or \r line ends); comments and ids are skipped. */
export async function* parseSse(body: AsyncIterable<Buffer>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffered = '';
  let event: string | null = null;
  let data: string[] = [];
  let size = 0;
  /** Takes one line; returns the event it completes, if any. */
  const line = (text: string): SseEvent | null => {
    if (text === '') {
      const done = data.length > 0 ? { event, data: data.join('\n') } : null;
      event = null;
      data = [];
      size = 0;
      return done;
    }
    if (text.startsWith(':')) return null;
    const colon = text.indexOf(':');
    const field = colon === -1 ? text : text.slice(0, colon);
    const value = colon === -1 ? '' : text.slice(colon + 1).replace(/^ /, '');
    if (field === 'data') {
      size += value.length;
      if (size > MAX_EVENT_BYTES) throw new UpstreamError('malformed', 'Upstream stream sent an over-long event');
      data.push(value);
    } else if (field === 'event') event = value;
    return null;
  };
  // Its own copy: a global regex keeps its position in lastIndex, and streams interleave at every yield.
  const lineEnd = new RegExp(LINE_END);
  for await (const chunk of body) {
    buffered += decoder.decode(chunk, { stream: true });
    let start = 0;
    lineEnd.lastIndex = 0;
    let match: RegExpExecArray | null;
    while ((match = lineEnd.exec(buffered)) !== null) {
      // A CR that ends the chunk may be the first half of a CRLF: it waits for the next chunk.
      if (match.index === buffered.length - 1 && buffered.charCodeAt(match.index) === CR) break;
      const done = line(buffered.slice(start, match.index));
      start = lineEnd.lastIndex;
      if (done) yield done;
    }
    buffered = buffered.slice(start);
    if (buffered.length + size > MAX_EVENT_BYTES) throw new UpstreamError('malformed', 'Upstream stream sent an over-long event');
  }
  buffered += decoder.decode();
  // A stream may end without the blank line that closes its last event.
  for (const rest of buffered.split(LINE_END)) if (rest !== '') line(rest);
  const last = line('');
  if (last) yield last;
}
