import type { Kysely, Migration } from 'kysely';
import { normalEmail } from '../../platform/text.js';

/**
 * Emails are looked up in NFC since this release; one stored in another normal form (an accent typed as a letter
 * plus a combining mark) could no longer log in. Each such email is rewritten in NFC, unless another user already
 * has that form: two accounts of one address, which the unique email keeps apart as they were (the first, in NFC,
 * is the one that logs in).
 */
export const migration0011UserEmailNfc: Migration = {
  async up(db: Kysely<unknown>) {
    const users = db as unknown as Kysely<{ users: { id: string; email: string } }>;
    const rows = await users.selectFrom('users').select(['id', 'email']).execute();
    const taken = new Set(rows.map((row) => row.email));
    for (const row of rows) {
      const email = normalEmail(row.email);
      if (email === row.email || taken.has(email)) continue;
      await users.updateTable('users').set({ email }).where('id', '=', row.id).execute();
      taken.add(email);
    }
  },
};
