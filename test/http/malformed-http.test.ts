import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { useListeningTestApp } from '../helpers/app.js';

/** Requests Node's HTTP parser refuses never reach a route: they still get Waygate's `{ error }` shape. */

/** Writes raw bytes to the server and returns everything it answers before closing the connection. */
function rawExchange(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(answer));
    socket.setTimeout(5_000, () => socket.destroy(new Error('no answer within 5 s')));
    socket.write(bytes, 'latin1');
  });
}

function parse(answer: string): { status: number; headers: string; body: { error: { message: string; type: string; code: string } } } {
  const [head = '', body = ''] = answer.split('\r\n\r\n');
  return { status: Number(head.split(' ')[1]), headers: head.toLowerCase(), body: JSON.parse(body) };
}

describe('malformed HTTP requests', () => {
  const app = useListeningTestApp();

  // Regression: these got Node's default `{"error":"Bad Request","message":"Client Error","statusCode":400}`.
  it.each([
    ['a header line without a colon', 'GET /api/health/live HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n'],
    ['a control character in a header value', 'GET /api/health/live HTTP/1.1\r\nHost: x\r\nX-A: a\u0001b\r\n\r\n'],
    ['both Content-Length and Transfer-Encoding', 'POST /api/client/v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}'],
    ['a request line that is not HTTP', 'HELLO\r\n\r\n'],
  ])('%s is a 400 with {error} naming it, and a request id', async (_what, bytes) => {
    const { status, headers, body } = parse(await rawExchange(app.port, bytes));
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'malformed_http' });
    expect(body.error.message).toMatch(/^The request is not valid HTTP\/1\.1: \S/);
    expect(headers).toMatch(/\r\nx-request-id: [0-9a-f-]{36}/);
    expect(headers).toContain('content-type: application/json');
  });

  it('headers larger than the server takes are a 431 with {error}', async () => {
    const { status, body } = parse(await rawExchange(app.port, `GET /api/health/live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`));
    expect(status).toBe(431);
    expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'headers_too_large' });
  });

  it('the server goes on answering well-formed requests', async () => {
    const answer = await rawExchange(app.port, 'GET /api/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(answer.startsWith('HTTP/1.1 200')).toBe(true);
  });
});
