import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, registerFakeModel, setupInference, sseJson, type InferenceSetup } from '../helpers/inference.js';
import { chatBody } from '../helpers/models.js';

type Delta = Record<string, unknown>;

/** A stream request answered with one JSON chat.completion: every field of the message reaches the client's deltas. */
describe('a JSON completion replayed as a stream', () => {
  let s: InferenceSetup;
  let model: string;
  const completion = (message: Record<string, unknown>, finish: string) => ({
    id: 'c', object: 'chat.completion', created: 1, model: 'm',
    choices: [{ index: 0, finish_reason: finish, message: { role: 'assistant', ...message } }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  });
  const deltas = async (message: Record<string, unknown>, finish = 'stop'): Promise<Delta[]> => {
    s.fake.queue({ raw: JSON.stringify(completion(message, finish)) });
    const res = await post(s.t, s.token.value, '/chat/completions', chatBody(model, { stream: true }));
    expect(res.statusCode, res.body).toBe(200);
    return sseJson(res.body).flatMap((e) => (e.choices as { delta?: Delta }[] | undefined) ?? []).map((c) => c.delta ?? {});
  };

  beforeAll(async () => {
    s = await setupInference({ backend: 'sqlite', env: { WAYGATE_UPSTREAM_RETRIES: '0' } });
    model = await registerFakeModel(s.t, s.fake, { capabilities: ['chat'] });
  });
  afterAll(async () => s.close());

  it('a legacy function call and a refusal are carried into the delta', async () => {
    const sent = await deltas({ content: null, function_call: { name: 'f', arguments: '{"a":1}' }, refusal: 'No.' }, 'function_call');
    expect(sent[0]).toMatchObject({ role: 'assistant', function_call: { name: 'f', arguments: '{"a":1}' }, refusal: 'No.' });
  });

  // Regression (SDK probe): the replay dropped both, so an SDK's finalChatCompletion() had no logprobs.
  it("the answer's logprobs and system_fingerprint are carried", async () => {
    const logprobs = { content: [{ token: 'ok', logprob: -0.1, bytes: [111, 107], top_logprobs: [] }] };
    const answer = { ...completion({ content: 'ok' }, 'stop'), system_fingerprint: 'fp_1' };
    answer.choices[0] = { ...answer.choices[0]!, logprobs } as (typeof answer.choices)[number];
    s.fake.queue({ raw: JSON.stringify(answer) });
    const res = await post(s.t, s.token.value, '/chat/completions', chatBody(model, { stream: true, logprobs: true }));
    const events = sseJson(res.body).filter((e) => Array.isArray(e.choices) && (e.choices as unknown[]).length > 0);
    for (const event of events) expect(event.system_fingerprint).toBe('fp_1');
    expect((events[0]!.choices as Record<string, unknown>[])[0]!.logprobs).toEqual(logprobs);
  });

  it('reasoning, under either name, is carried; null fields are not', async () => {
    const sent = await deltas({ content: 'ok', reasoning_content: 'thought', reasoning: 'thought too', refusal: null });
    expect(sent[0]).toEqual({ role: 'assistant', content: 'ok', reasoning_content: 'thought', reasoning: 'thought too' });
  });
});
