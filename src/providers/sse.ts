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
  for await (const chunk of body) {
    buffered += decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = buffered.indexOf('\n')) !== -1) {
      let line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') {
        if (data.length > 0) yield { event, data: data.join('\n') };
        event = null;
        data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'data') data.push(value);
      else if (field === 'event') event = value;
    }
    if (buffered.length > MAX_EVENT_BYTES) throw new UpstreamError('malformed', 'Upstream stream sent an over-long event');
  }
  buffered += decoder.decode();
  if (buffered.trim() !== '') data.push(buffered.replace(/^data: ?/, ''));
  if (data.length > 0) yield { event, data: data.join('\n') };
}
