import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { chat, fakeModel, hasRedis, limitedProject, startDeployment, storedUsage, token, type CounterStore, type Deployment } from '../limits/support.js';

/**
 * The "Done when": concurrent requests never overspend a budget, on one instance and on two instances
 * sharing Redis. Every call is estimated at exactly 10 input tokens (see chat()) and the fake reports 10 + 20, so a
 * 300-token budget holds exactly ten calls; the eleventh onwards must be refused without reaching the fake.
 */

const BUDGET = 300;
const CALL_TOKENS = 30;
const REQUESTS = 60;
const ROUNDS = 3;

let fake: FakeUpstream;
beforeAll(async () => {
  fake = await startFakeOpenAi();
  fake.usage = { prompt: 10, completion: 20 };
});
afterAll(async () => {
  await fake?.close();
});

const LAYOUTS: { name: string; counters: CounterStore; instances: number; skip: boolean }[] = [
  { name: 'one instance, in-process counters', counters: 'memory', instances: 1, skip: false },
  { name: 'one instance, Redis counters', counters: 'redis', instances: 1, skip: !hasRedis },
  { name: 'two instances sharing Redis', counters: 'redis', instances: 2, skip: !hasRedis },
];
if (!hasRedis) console.warn('skipping the Redis layouts of the concurrency tests: no Redis reachable');

/** Fires all requests at once, spread over the instances and credentials, and checks nothing was overspent. */
async function storm(d: Deployment, credentials: string[], model: string, where: { tokenId?: string; projectId?: string }) {
  const before = fake.requests.length;
  const responses: LightMyRequestResponse[] = await Promise.all(
    Array.from({ length: REQUESTS }, (_, i) => {
      const instance = d.instances[i % d.instances.length]!;
      const credential = credentials[Math.floor(i / d.instances.length) % credentials.length]!;
      return chat(instance.app, credential, model);
    }),
  );
  const ok = responses.filter((r) => r.statusCode === 200);
  const refused = responses.filter((r) => r.statusCode === 429);
  expect(ok.length + refused.length, responses.map((r) => `${r.statusCode} ${r.body}`).find((s) => !/^(200|429) /.test(s))).toBe(REQUESTS);
  // Refused while other calls of the storm still ran (their reservations hold the rest), or once it was spent.
  for (const r of refused) expect(['budget_in_use', 'budget_exceeded']).toContain(r.json().error.code);

  const answered = ok.reduce((sum, r) => sum + (r.json().usage.total_tokens as number), 0);
  expect(ok.length).toBeGreaterThan(0);
  expect(refused.length).toBeGreaterThan(0);
  expect(answered).toBeLessThanOrEqual(BUDGET);
  // Nothing was left unused that a whole call would have fitted in.
  expect(answered).toBeGreaterThan(BUDGET - CALL_TOKENS);

  // Exactly the admitted calls reached the upstream, each with its full output (no partial allowance was needed).
  const sent = fake.requests.slice(before);
  expect(sent).toHaveLength(ok.length);
  for (const request of sent) expect(request.body.max_tokens).toBe(20);

  const stored = await storedUsage(d, where);
  expect(stored.events).toBe(ok.length);
  expect(stored.tokens).toBe(answered);
  expect(stored.tokens).toBeLessThanOrEqual(BUDGET);
}

for (const backend of BACKENDS) {
  for (const layout of LAYOUTS) {
    describe.skipIf(layout.skip)(`concurrent calls on ${backend}, ${layout.name}`, () => {
      let d: Deployment;
      let model: string;

      beforeAll(async () => {
        d = await startDeployment(backend, layout.counters, layout.instances);
        model = await fakeModel(d, fake);
      });
      afterAll(async () => {
        await d?.close();
      });

      it(`never overspend a token budget of ${BUDGET} tokens (${ROUNDS} rounds of ${REQUESTS} requests)`, async () => {
        for (let round = 0; round < ROUNDS; round++) {
          const t = await token(d, { budget: { maxTokens: BUDGET, period: 'total' } });
          await storm(d, [t.value], model, { tokenId: t.id });
        }
      });

      it('never overspend a daily token budget either (a seeded counter with an expiry)', async () => {
        const t = await token(d, { budget: { maxTokens: BUDGET, period: 'day' } });
        await storm(d, [t.value], model, { tokenId: t.id });
      });

      it(`never overspend a project budget shared by two tokens (${ROUNDS} rounds)`, async () => {
        for (let round = 0; round < ROUNDS; round++) {
          const project = await limitedProject(d, { budget: { maxTokens: BUDGET, period: 'total' } });
          const projectModel = await fakeModel(d, fake, {}, project.key);
          const a = await token(d, { projectId: project.key });
          const b = await token(d, { projectId: project.key });
          await storm(d, [a.value, b.value], projectModel, { projectId: project.id });
        }
      });

      it('never overspend when a token budget and its project budget are both in play', async () => {
        // The project allows 300, each token 180 (six calls): together the tokens could spend 360.
        const project = await limitedProject(d, { budget: { maxTokens: BUDGET, period: 'month' } });
        const projectModel = await fakeModel(d, fake, {}, project.key);
        const a = await token(d, { projectId: project.key, budget: { maxTokens: 180, period: 'total' } });
        const b = await token(d, { projectId: project.key, budget: { maxTokens: 180, period: 'total' } });
        await storm(d, [a.value, b.value], projectModel, { projectId: project.id });
        for (const t of [a, b]) expect((await storedUsage(d, { tokenId: t.id })).tokens).toBeLessThanOrEqual(180);
      });
    });
  }
}
