import { UpstreamError } from './errors.js';

export interface SseEvent {
  event: string | null;
  data: string;
}

/** Largest event accepted from an upstream; a stream that never ends an event is broken, not slow. */
const MAX_EVENT_BYTES = 4 * 1024 * 1024;

/** Server-sent events from a byte stream (any of \n, \r\n line ends); comments and ids are skipped. */
export async function* parseSse(body: AsyncIterable<Buffer>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffered = '';
  let event: string | null = null;
  let data: string[] = [];
  let size = 0;
  /** Takes one line; returns the event it completes, if any. */
  const line = (text: string): SseEvent | null => {
    if (text.endsWith('\r')) text = text.slice(0, -1);
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
      data.push(value);
      size += value.length;
    } else if (field === 'event') event = value;
    return null;
  };
  for await (const chunk of body) {
    buffered += decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = buffered.indexOf('\n')) !== -1) {
      const done = line(buffered.slice(0, newline));
      buffered = buffered.slice(newline + 1);
      if (done) yield done;
    }
    if (buffered.length + size > MAX_EVENT_BYTES) throw new UpstreamError('malformed', 'Upstream stream sent an over-long event');
  }
  buffered += decoder.decode();
  // A stream may end without the blank line that closes its last event.
  if (buffered !== '') line(buffered);
  const last = line('');
  if (last) yield last;
}
