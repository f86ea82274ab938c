import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { chat, expectRefused, fakeModel, first, hasRedis, limitedProject, newRedisPrefix, openDeployment, storedUsage, token, type Deployment } from './support.js';

/**
 * Budget counters start from stored usage (usage_hourly) when they are missing: after a restart with in-process
 * counters, or with a Redis that lost its keys. A restart must not hand out a budget again.
 */

let fake: FakeUpstream;
beforeAll(async () => {
  fake = await startFakeOpenAi();
});
afterAll(async () => {
  await fake?.close();
});

const DAY_S = 86_400;
const RETRY_AFTER = { day: [1, DAY_S], month: [1, 31 * DAY_S], total: null } as const;

/** How the second instance finds its counters: empty memory, an empty Redis, or the first one's Redis keys. */
const RESTARTS: { name: string; before: () => string | undefined; after: (prefix: string | undefined) => string | undefined; skip: boolean }[] = [
  { name: 'in-process counters', before: () => undefined, after: () => undefined, skip: false },
  { name: 'a Redis that lost its keys', before: newRedisPrefix, after: () => newRedisPrefix(), skip: !hasRedis },
  { name: 'Redis counters that survived', before: newRedisPrefix, after: (prefix) => prefix, skip: !hasRedis },
];
if (!hasRedis) console.warn('skipping the Redis restarts of the seeding tests: no Redis reachable');

async function storedTokens(d: Deployment, where: { tokenId?: string; projectId: string }): Promise<number> {
  let query = first(d).ctx.database.db.selectFrom('usage_hourly').select(['input_tokens', 'output_tokens']).where('project_id', '=', where.projectId);
  if (where.tokenId) query = query.where('token_id', '=', where.tokenId);
  const rows = await query.execute();
  return rows.reduce((sum, row) => sum + Number(row.input_tokens) + Number(row.output_tokens), 0);
}

for (const backend of BACKENDS) {
  describe(`budgets after a restart on ${backend}`, () => {
    // One database per backend; every test starts and stops its own instances on it.
    let d: Deployment;
    beforeAll(async () => {
      d = await openDeployment(backend);
    });
    afterEach(async () => {
      await d.stop();
    });
    afterAll(async () => {
      await d?.close();
    });

    for (const restart of RESTARTS) {
      it.skipIf(restart.skip).each(['total', 'day', 'month'] as const)(`a %s token budget continues from stored usage with ${restart.name}`, async (period) => {
        fake.usage = { prompt: 10, completion: 20 };
        const prefix = restart.before();
        await d.start(prefix);
        const model = await fakeModel(d, fake);
        const t = await token(d, { budget: { maxTokens: 75, period } });
        for (let i = 0; i < 2; i++) expect((await chat(first(d).app, t.value, model)).statusCode).toBe(200);
        await d.stop();

        await d.start(restart.after(prefix));
        const projectId = first(d).ctx.bootstrap.projectId;
        expect(await storedTokens(d, { tokenId: t.id, projectId })).toBe(60);
        // 60 of 75 spent: the next call gets 5 output tokens, not a fresh budget's 20.
        fake.usage = { prompt: 10, completion: 5 };
        const squeezed = await chat(first(d).app, t.value, model);
        expect(squeezed.statusCode).toBe(200);
        expect(fake.requests.at(-1)!.body.max_tokens).toBe(5);
        const before = fake.requests.length;
        expectRefused(await chat(first(d).app, t.value, model), 'budget_exceeded', RETRY_AFTER[period] as [number, number] | null);
        expect(fake.requests.length).toBe(before);
      });
    }

    it('a project budget continues from the usage of all its tokens after a restart', async () => {
      fake.usage = { prompt: 10, completion: 20 };
      await d.start();
      const project = await limitedProject(d, { budget: { maxTokens: 75, period: 'total' } });
      const model = await fakeModel(d, fake, {}, project.key);
      const a = await token(d, { projectId: project.key });
      const b = await token(d, { projectId: project.key });
      expect((await chat(first(d).app, a.value, model)).statusCode).toBe(200);
      expect((await chat(first(d).app, b.value, model)).statusCode).toBe(200);
      await d.stop();

      await d.start();
      expect(await storedTokens(d, { projectId: project.id })).toBe(60);
      const c = await token(d, { projectId: project.key });
      fake.usage = { prompt: 10, completion: 5 };
      expect((await chat(first(d).app, c.value, model)).statusCode).toBe(200);
      expect(fake.requests.at(-1)!.body.max_tokens).toBe(5);
      expectRefused(await chat(first(d).app, a.value, model), 'budget_exceeded', null);
    });

    it('the first call after a restart seeds every budget counter it meets (token and project, tokens and cost)', async () => {
      fake.usage = { prompt: 10, completion: 20 };
      await d.start();
      const budget = { maxTokens: 1_000, maxCostUsd: 1, period: 'day' };
      const project = await limitedProject(d, { budget });
      const model = await fakeModel(d, fake, { pricing: { inputPer1M: 1, outputPer1M: 2, currency: 'USD' } }, project.key);
      const t = await token(d, { projectId: project.key, budget: { ...budget, period: 'month' } });
      expect((await chat(first(d).app, t.value, model)).statusCode).toBe(200);
      await d.stop();

      // Four counters to seed from stored usage: each admission attempt finds one of them missing.
      await d.start();
      const again = await chat(first(d).app, t.value, model);
      expect(again.statusCode, again.body).toBe(200);
      expect((await storedUsage(d, { tokenId: t.id })).events).toBe(2);
    });

    it('a budget that was used up stays used up after a restart', async () => {
      fake.usage = { prompt: 10, completion: 20 };
      await d.start();
      const model = await fakeModel(d, fake);
      const t = await token(d, { budget: { maxTokens: 60, period: 'total' } });
      for (let i = 0; i < 2; i++) expect((await chat(first(d).app, t.value, model)).statusCode).toBe(200);
      expectRefused(await chat(first(d).app, t.value, model), 'budget_exceeded', null);
      await d.stop();

      await d.start();
      const before = fake.requests.length;
      const outcomes = await Promise.all(Array.from({ length: 10 }, () => chat(first(d).app, t.value, model)));
      for (const res of outcomes) expectRefused(res, 'budget_exceeded', null);
      expect(fake.requests.length).toBe(before);
    });
  });
}
