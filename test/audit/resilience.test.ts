import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditService } from '../../src/areas/audit/service.js';
import type { AuditEvent, AuditStore } from '../../src/areas/audit/store.js';
import { newId } from '../../src/platform/ids.js';
import { auditEvent } from '../helpers/audit.js';
import { BACKENDS, call, createTestApp, flushAudit, type TestApp } from '../helpers/app.js';



async function auditCount(t: TestApp): Promise<number> {
  await flushAudit(t);
  const row = await t.ctx.database.db.selectFrom('audit_events').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

describe.each(BACKENDS)('audit log resilience on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend });
  });
  afterAll(async () => t.close());

  it('writes a backlog larger than one statement can carry', async () => {
    const before = await auditCount(t);
    for (let i = 0; i < 4_000; i++) t.ctx.services.audit.record(auditEvent());
    expect(await auditCount(t)).toBe(before + 4_000);
  });

  it('stores events whose fields carry NUL and control characters, without them', async () => {
    const id = newId('aud');
    t.ctx.services.audit.record(auditEvent({ id, resourceId: 'a\u0000b', userAgent: 'ua\u0007\nx', path: '/x\u0000' }));
    await flushAudit(t);
    const row = await t.ctx.database.db.selectFrom('audit_events').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    expect([row.resource_id, row.user_agent, row.path]).toEqual(['ab', 'uax', '/x']);
  });

  it('a row the database refuses is dropped alone; the rest of its batch is written and later events still flow', async () => {
    const before = await auditCount(t);
    const duplicate = newId('aud');
    for (const e of [auditEvent(), auditEvent({ id: duplicate }), auditEvent({ id: duplicate }), auditEvent()]) t.ctx.services.audit.record(e);
    expect(await auditCount(t)).toBe(before + 3);
    t.ctx.services.audit.record(auditEvent());
    expect(await auditCount(t)).toBe(before + 4);
  });

  it('answers 400 to NUL in the URL or the body, and the request is still audited', async () => {
    const url = await call(t.app, t.adminSession, { method: 'DELETE', url: '/api/tokens/%00' });
    expect(url.statusCode).toBe(400);
    expect(url.json().error.code).toBe('nul_character');
    const body = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: '{"name":"a\\u0000b"}', headers: { 'content-type': 'application/json' } });
    expect(body.statusCode).toBe(400);
    expect(body.json().error.code).toBe('nul_character');
    // Deep JSON is refused for its depth before it is walked; wide JSON is walked without spreading.
    let deep = '"\\u0000"';
    for (let i = 0; i < 20_000; i++) deep = `[${deep}]`;
    const nested = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: `{"name":${deep}}`, headers: { 'content-type': 'application/json' } });
    expect(nested.statusCode).toBe(400);
    expect(nested.json().error.message).toMatch(/deeper than 100 levels/);
    const wide = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: `{"name":[${'"x",'.repeat(300_000)}"\\u0000"]}`, headers: { 'content-type': 'application/json' } });
    expect(wide.json().error.code).toBe('nul_character');
    // An escaped backslash before "u0000" is ordinary text, not a NUL.
    const text = await call(t.app, t.adminSession, { method: 'POST', url: '/api/projects', payload: '{"name":"a\\\\u0000b"}', headers: { 'content-type': 'application/json' } });
    expect(text.statusCode).toBe(201);
    await flushAudit(t);
    const rows = await t.ctx.database.db.selectFrom('audit_events').selectAll().where('request_id', '=', String(url.headers['x-request-id'])).execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]!.status_code).toBe(400);
  });
});

describe('audit buffer while the database is unreachable', () => {
  /** A store whose database can be switched off: its inserts fail as in an outage (an error with no database code). */
  function flakyStore() {
    const written: AuditEvent[] = [];
    const state = { down: true };
    const store = {
      insertMany: async (events: AuditEvent[]) => {
        if (state.down) throw new Error('connection refused');
        written.push(...events);
      },
    } as unknown as AuditStore;
    return { store, written, state };
  }

  it('keeps every event through failed flushes and writes them once the database is back', async () => {
    const { store, written, state } = flakyStore();
    const audit = new AuditService(store, pino({ level: 'silent' }));
    for (let i = 0; i < 1_200; i++) audit.record(auditEvent());
    await audit.flush();
    await audit.flush();
    expect(written).toHaveLength(0);
    expect(audit.pending).toBe(1_200);
    state.down = false;
    await audit.close();
    expect(written).toHaveLength(1_200);
    expect(new Set(written.map((e) => e.id)).size).toBe(1_200);
    expect(audit.pending).toBe(0);
  });
});
