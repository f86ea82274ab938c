import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { call, createTestApp, createToken, flushAudit, type TestApp } from '../helpers/app.js';

/**
 * Regression: a client that sent a state-changing request and left at once got its change made but never audited
 * (Fastify's onResponse hook does not run for a response that never finished).
 */
describe('audit of a request whose client left before the answer', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await createTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as net.AddressInfo).port;
  });
  afterAll(async () => t?.close());

  /** Sends the request on a raw socket and closes it without reading anything. */
  function sendAndLeave(request: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.write(request);
        socket.destroy();
        resolve();
      });
      socket.on('error', reject);
    });
  }

  const eventsOf = (requestId: string) => t.ctx.database.db.selectFrom('audit_events').selectAll().where('request_id', '=', requestId).execute();

  it('a token revoked by a client that left is audited once, as a success', async () => {
    const token = await createToken(t, { name: 'left', role: 'member' });
    const requestId = `left-${token.id}`;
    await sendAndLeave(`DELETE /api/tokens/${token.id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.adminSession}\r\nX-Request-Id: ${requestId}\r\n\r\n`);
    await vi.waitFor(
      async () => {
        await flushAudit(t);
        expect(await eventsOf(requestId)).toHaveLength(1);
      },
      { timeout: 5_000, interval: 50 },
    );
    const listed = (await call(t.app, t.adminSession, { method: 'GET', url: '/api/tokens' })).json().tokens.find((x: { id: string }) => x.id === token.id);
    expect(listed.revokedAt).not.toBeNull();
    const [event] = await eventsOf(requestId);
    expect(event).toMatchObject({ action: 'tokens.revoke', method: 'DELETE', outcome: 'success' });
  });

  it('a refused request whose client left is audited once, as denied', async () => {
    const member = await createToken(t, { name: 'member', role: 'member' });
    const requestId = `left-denied-${member.id}`;
    await sendAndLeave(`POST /api/projects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${member.value}\r\nContent-Type: application/json\r\nContent-Length: 13\r\nX-Request-Id: ${requestId}\r\n\r\n{"name":"x1"}`);
    await vi.waitFor(
      async () => {
        await flushAudit(t);
        expect(await eventsOf(requestId)).toHaveLength(1);
      },
      { timeout: 5_000, interval: 50 },
    );
    expect((await eventsOf(requestId))[0]).toMatchObject({ outcome: expect.stringMatching(/^(denied|failure)$/) });
  });
});
