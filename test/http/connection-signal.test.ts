import { EventEmitter } from 'node:events';
import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { connectionSignal } from '../../src/http/connection-signal.js';

/** A request on a stand-in socket: connectionSignal only reads `raw.socket`, its `destroyed` and its 'close'. */
function requestOn(socket: EventEmitter & { destroyed: boolean }): FastifyRequest {
  return { raw: { socket } } as unknown as FastifyRequest;
}

function socket(destroyed = false) {
  return Object.assign(new EventEmitter(), { destroyed });
}

describe('connectionSignal', () => {
  it('is one signal per connection, aborted when that connection closes and not before', () => {
    const first = socket();
    const second = socket();
    const signal = connectionSignal(requestOn(first));
    expect(connectionSignal(requestOn(first))).toBe(signal);
    const other = connectionSignal(requestOn(second));
    expect(other).not.toBe(signal);
    expect(signal.aborted).toBe(false);
    first.emit('close');
    expect(signal.aborted).toBe(true);
    expect(other.aborted).toBe(false);
  });

  it('is aborted at once for a connection already closed', () => {
    expect(connectionSignal(requestOn(socket(true))).aborted).toBe(true);
  });

  it('takes many listeners at once (pipelined calls, retries) without a leak warning, and calls each on close', async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const connection = socket();
      const signal = connectionSignal(requestOn(connection));
      let called = 0;
      const listeners = Array.from({ length: 40 }, () => () => void called++);
      for (const listener of listeners) signal.addEventListener('abort', listener);
      connection.emit('close');
      expect(called).toBe(40);
      // Node emits its warning on a later tick.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });
});
