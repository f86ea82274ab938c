import net from 'node:net';
import Fastify from 'fastify';
import { describe, expect, it, vi } from 'vitest';
import type { AuditService } from '../../src/areas/audit/service.js';
import type { AuditEvent } from '../../src/areas/audit/store.js';
import { registerAuditHook } from '../../src/http/audit-hook.js';
import { call, createToken, flushAudit, useListeningTestApp } from '../helpers/app.js';

/**
 * Regression: a client that sent a state-changing request and left at once got its change made but never audited
 * (Fastify's onResponse hook does not run for a response that never finished).
 */
describe('audit of a request whose client left before the answer', () => {
  const app = useListeningTestApp();

  /** Sends the request on a raw socket and closes it without reading anything. */
  function sendAndLeave(request: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(app.port, '127.0.0.1', () => {
        socket.write(request);
        socket.destroy();
        resolve();
      });
      socket.on('error', reject);
    });
  }

  const eventsOf = (requestId: string) => app.t.ctx.database.db.selectFrom('audit_events').selectAll().where('request_id', '=', requestId).execute();

  it('a token revoked by a client that left is audited once, as a success', async () => {
    const token = await createToken(app.t, { name: 'left', role: 'member' });
    const requestId = `left-${token.id}`;
    await sendAndLeave(`DELETE /api/tokens/${token.id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${app.t.adminSession}\r\nX-Request-Id: ${requestId}\r\n\r\n`);
    await vi.waitFor(
      async () => {
        await flushAudit(app.t);
        expect(await eventsOf(requestId)).toHaveLength(1);
      },
      { timeout: 5_000, interval: 50 },
    );
    // Once: nothing more arrives later.
    await new Promise((resolve) => setTimeout(resolve, 200));
    await flushAudit(app.t);
    expect(await eventsOf(requestId)).toHaveLength(1);
    const listed = (await call(app.t.app, app.t.adminSession, { method: 'GET', url: '/api/tokens' })).json().tokens.find((x: { id: string }) => x.id === token.id);
    expect(listed.revokedAt).not.toBeNull();
    const [event] = await eventsOf(requestId);
    expect(event).toMatchObject({ action: 'tokens.revoke', method: 'DELETE', outcome: 'success' });
  });

  it('a refused request whose client left is audited once, as denied', async () => {
    const member = await createToken(app.t, { name: 'member', role: 'member' });
    const requestId = `left-denied-${member.id}`;
    await sendAndLeave(`POST /api/projects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${member.value}\r\nContent-Type: application/json\r\nContent-Length: 13\r\nX-Request-Id: ${requestId}\r\n\r\n{"name":"x1"}`);
    await vi.waitFor(
      async () => {
        await flushAudit(app.t);
        expect(await eventsOf(requestId)).toHaveLength(1);
      },
      { timeout: 5_000, interval: 50 },
    );
    expect((await eventsOf(requestId))[0]).toMatchObject({ outcome: expect.stringMatching(/^(denied|failure)$/) });
  });
});

// A failing onSend hook makes Fastify run the onSend hooks again for its error reply.
describe('audit of a reply that fails in a later onSend hook', () => {
  it('records one event, with the status sent', async () => {
    const recorded: AuditEvent[] = [];
    const app = Fastify();
    registerAuditHook(app, { record: (event: AuditEvent) => void recorded.push(event) } as unknown as AuditService);
    app.addHook('onSend', async () => {
      throw new Error('onSend failed');
    });
    app.post('/things', { schema: { operationId: 'things.create' } }, async () => ({ ok: true }));
    try {
      const res = await app.inject({ method: 'POST', url: '/things', payload: {} });
      expect(res.statusCode).toBe(500);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(recorded.map((event) => event.statusCode)).toEqual([500]);
    } finally {
      await app.close();
    }
  });
});
