import { describe, expect, it } from 'vitest';
import { migrateToLatest, schemaMigrator } from '../../src/db/migrate.js';
import { BACKENDS } from '../helpers/app.js';
import { tempDatabases } from '../helpers/databases.js';

const database = tempDatabases();

/** Emails are looked up in NFC since migration 0011; earlier releases stored them as typed (lower-cased). */
describe.each(BACKENDS)('emails stored before NFC lookups, on %s', (backend) => {
  it('are rewritten in NFC, except where another user already has that form', async () => {
    const handle = await database(backend);
    expect((await schemaMigrator(handle.db, handle.dialect).migrateTo('0010_usage_session_index')).error).toBeUndefined();
    const db = handle.db;
    await db.insertInto('tenants').values({ id: 'ten_1', name: 'T', created_at: 1 }).execute();
    const user = (id: string, email: string) => ({ id, tenant_id: 'ten_1', email, name: null, password_hash: 'x', role: 'member', is_instance_admin: 0, session_version: 0, created_at: 1 });
    await db
      .insertInto('users')
      .values([
        user('usr_decomposed', 'jose\u0301@example.test'),
        user('usr_twin_nfd', 'rene\u0301@example.test'),
        user('usr_twin_nfc', 'ren\u00e9@example.test'),
        user('usr_plain', 'plain@example.test'),
      ])
      .execute();
    await migrateToLatest(handle.db, handle.dialect);
    const emails = Object.fromEntries((await db.selectFrom('users').select(['id', 'email']).execute()).map((row) => [row.id, row.email]));
    expect(emails).toEqual({
      usr_decomposed: 'jos\u00e9@example.test',
      usr_twin_nfd: 'rene\u0301@example.test',
      usr_twin_nfc: 'ren\u00e9@example.test',
      usr_plain: 'plain@example.test',
    });
  });
});
