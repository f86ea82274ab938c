import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, createToken, type TestApp } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { registerFakeModel } from '../helpers/inference.js';
import { CHAT, chatLines, createBatch, waitForBatch } from './support.js';

/**
 * Items running at once (32 by default) each reserve their output allowance on the token's budget: with no
 * max_tokens, 4096 tokens. What they reserve is not spent, and the items it turns away must wait, not fail.
 */
describe('batch items and a budget reserved by running items', () => {
  let t: TestApp;
  let fake: FakeUpstream;
  let model: string;
  beforeAll(async () => {
    t = await createTestApp();
    fake = await startFakeOpenAi();
    model = await registerFakeModel(t, fake, { capabilities: ['chat'] });
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  // Regression: a few running items took the rest of a large budget, and the items after them failed for good as
  // "used up" while it was barely spent.
  it("items turned away because the budget's rest is reserved wait, and all complete", async () => {
    const token = await createToken(t, { name: 'roomy-budget', budget: { maxTokens: 10_000, period: 'day' } });
    fake.defaults = { delayMs: 100 };
    try {
      const created = await createBatch(t, { endpoint: CHAT, requests: chatLines(model, 8) }, token.value);
      const batch = await waitForBatch(t, created.id, ['completed'], token.value);
      expect(batch.request_counts).toEqual({ total: 8, completed: 8, failed: 0, cancelled: 0 });
      expect(batch.usage.total_tokens).toBe(8 * 15);
    } finally {
      fake.defaults = {};
    }
  });
});
