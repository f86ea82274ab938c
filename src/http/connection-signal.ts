import { setMaxListeners } from 'node:events';
import type { Socket } from 'node:net';
import type { FastifyRequest } from 'fastify';

const connectionSignals = new WeakMap<Socket, AbortSignal>();

/**
 * Aborts when the client's connection closes: with HTTP/1.1 that is how a client goes away, and a closed
 * connection ends every request it carried. One controller per connection, not per request: a keep-alive
 * connection carries thousands of calls, and a per-request AbortController (with its close listener) was among the
 * costliest things a model call allocated, and kept young-generation collections busy.
 */
export function connectionSignal(request: FastifyRequest): AbortSignal {
  const socket = request.raw.socket;
  let signal = connectionSignals.get(socket);
  if (!signal) {
    const controller = new AbortController();
    signal = controller.signal;
    // Every upstream attempt listens while it runs, and a client may pipeline many calls on one connection; each
    // listener is removed when its attempt ends.
    setMaxListeners(0, signal);
    if (socket.destroyed) controller.abort();
    else socket.once('close', () => controller.abort());
    connectionSignals.set(socket, signal);
  }
  return signal;
}
