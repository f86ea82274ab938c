import fc from 'fast-check';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { requestLineWriter, type RequestLine } from '../../src/http/request-line.js';

/** The request line is written without pino's serializer, so it must be the very line pino would write. */
describe('request line', () => {
  function loggerWithLines(level = 'info', options: pino.LoggerOptions = {}) {
    const lines: string[] = [];
    const log = pino({ level, ...options }, { write: (line: string) => void lines.push(line) });
    return { log, lines };
  }

  // Well-formed text only: in a short string pino writes a lone surrogate as it is, JSON.stringify escapes it. Neither
  // can reach this line: ids are ASCII, and a URL is the request line's bytes read as Latin-1.
  const text = fc.oneof(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'binary-ascii' }), fc.constantFrom('/api/client/v1/chat/completions?x="y"', 'é\u2028\u0000\\', 'a'.repeat(300)));
  const line = fc.record({
    requestId: text,
    method: fc.constantFrom('GET', 'POST', 'DELETE'),
    url: text,
    statusCode: fc.integer({ min: 100, max: 599 }),
    ms: fc.oneof(fc.double({ min: 0, max: 1e6, noNaN: true }), fc.constant(Number.POSITIVE_INFINITY)),
  });

  it("is exactly pino's line for the same fields, whatever they hold", () => {
    fc.assert(
      fc.property(line, fc.boolean(), (fields, child) => {
        const { log, lines } = loggerWithLines('info', { timestamp: () => ',"time":42' });
        const logger = child ? log.child({ component: 'http' }) : log;
        const { msg: _msg, ...rest } = { ...fields, msg: 'request' as const };
        const write = requestLineWriter(logger);
        logger.info(rest, 'request');
        // The line must come from the writer's own join, not from the fallback through pino.
        logger.info = () => expect.unreachable('a plain logger got its request line through log.info');
        write({ ...fields, msg: 'request' } satisfies RequestLine);
        expect(lines).toHaveLength(2);
        expect(lines[1]).toBe(lines[0]);
      }),
      { numRuns: 500 },
    );
  });

  it('follows the logger level: nothing below info, and a level changed at run time', () => {
    const { log, lines } = loggerWithLines('warn');
    const write = requestLineWriter(log);
    const fields: RequestLine = { requestId: 'r1', method: 'GET', url: '/x', statusCode: 200, ms: 1.5, msg: 'request' };
    write(fields);
    expect(lines).toEqual([]);
    log.level = 'info';
    write(fields);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 30, requestId: 'r1', statusCode: 200, ms: 1.5, msg: 'request' });
  });

  it("writes through pino itself for a logger whose lines it would not reproduce (redaction, formatters, a mixin)", () => {
    const fields: RequestLine = { requestId: 'r2', method: 'POST', url: '/secret', statusCode: 201, ms: 2, msg: 'request' };
    const redacted = loggerWithLines('info', { redact: ['url'] });
    requestLineWriter(redacted.log)(fields);
    expect(JSON.parse(redacted.lines[0]!)).toMatchObject({ requestId: 'r2', url: '[Redacted]', msg: 'request' });
    const labelled = loggerWithLines('info', { formatters: { level: (label) => ({ level: label }) } });
    requestLineWriter(labelled.log)(fields);
    expect(JSON.parse(labelled.lines[0]!)).toMatchObject({ level: 'info', requestId: 'r2' });
    const mixed = loggerWithLines('info', { mixin: () => ({ service: 'waygate' }) });
    requestLineWriter(mixed.log)(fields);
    expect(JSON.parse(mixed.lines[0]!)).toMatchObject({ service: 'waygate', requestId: 'r2' });
  });
});
