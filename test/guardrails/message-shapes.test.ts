import { describe, expect, it } from 'vitest';
import { sseJson, streamedText } from '../helpers/inference.js';
import { usePiiModels } from './support.js';

const EMAIL = 'jane.doe@example.com';
const CARD = 4111111111111111;

/** An assistant turn in the legacy shape: a function call instead of tool calls. */
const functionCallTurn = (args: string) => [{ role: 'user', content: 'hi' }, { role: 'assistant', content: null, function_call: { name: 'mail', arguments: args } }, { role: 'function', name: 'mail', content: 'sent' }];
/** An assistant turn whose content is a refusal part. */
const refusalPartTurn = (refusal: string) => [{ role: 'user', content: 'hi' }, { role: 'assistant', content: [{ type: 'refusal', refusal }] }, { role: 'user', content: 'again' }];

/** A non-streamed answer carrying a legacy function call. */
function functionCallAnswer(args: string) {
  return {
    id: 'chatcmpl-x', object: 'chat.completion', created: 1, model: 'm',
    choices: [{ index: 0, finish_reason: 'function_call', message: { role: 'assistant', content: null, function_call: { name: 'mail', arguments: args } } }],
    usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 },
  };
}

/** A stream whose legacy function call arrives in pieces, the address split between them. */
const functionCallDeltas = [{ content: 'Mailing.' }, { function_call: { name: 'mail', arguments: '{"to":"jane.doe@' } }, { function_call: { arguments: 'example.com"}' } }];

describe('guardrails read every message shape the upstream receives', () => {
  const s = usePiiModels();
  const { chat, upstreamMessages } = s;

  describe('input', () => {
    it('a text part whose text is not a string is refused (Anthropic would send it as text no guardrail read)', async () => {
      for (const model of [s.claude, s.blockIn]) {
        const res = await chat(model, { messages: [{ role: 'user', content: [{ type: 'text', text: CARD }] }] });
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json().error.message).toMatch(/content.*text must be of type string/);
      }
      expect(s.anthropic.requests).toHaveLength(0);
      expect(s.fake.requests).toHaveLength(0);
      // The same number as a string is read, and blocked.
      const asString = await chat(s.claude, { messages: [{ role: 'user', content: [{ type: 'text', text: String(CARD) }] }] });
      expect(asString.json().error).toMatchObject({ type: 'guardrail_block', findings: [{ category: 'credit_card' }] });
    });

    // Regression: these were forwarded unread when they were not strings.
    it.each([
      ['reasoning_content', { reasoning_content: { text: CARD } }, /reasoning_content/],
      ['reasoning', { reasoning: [String(CARD)] }, /reasoning/],
      ['audio.transcript', { audio: { id: 'audio_1', transcript: CARD } }, /audio.*transcript/],
      ['audio', { audio: 'audio_1' }, /audio/],
      ['content part refusal', { content: [{ type: 'refusal', refusal: CARD }] }, /content.*refusal/],
    ])('an earlier answer whose %s is not a string is refused before the upstream', async (_field, extra, named) => {
      for (const model of [s.claude, s.blockIn]) {
        const messages = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'ok', ...extra }, { role: 'user', content: 'again' }];
        const res = await chat(model, { messages });
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json().error.message).toMatch(named);
      }
      expect(s.anthropic.requests).toHaveLength(0);
      expect(s.fake.requests).toHaveLength(0);
    });

    it('a refusal content part and a legacy function call are read: blocked before the upstream', async () => {
      for (const messages of [refusalPartTurn(`mail ${EMAIL}`), functionCallTurn(`{"to":"${EMAIL}"}`)]) {
        const res = await chat(s.blockIn, { messages });
        expect(res.statusCode, JSON.stringify(messages)).toBe(400);
        expect(res.json().error).toMatchObject({ type: 'guardrail_block', findings: [{ category: 'email' }] });
      }
      expect(s.fake.requests).toHaveLength(0);
    });

    it('a refusal content part and a legacy function call are sent redacted', async () => {
      expect((await chat(s.redactIn, { messages: refusalPartTurn(`mail ${EMAIL}`) })).statusCode).toBe(200);
      expect(upstreamMessages()[1]).toEqual({ role: 'assistant', content: [{ type: 'refusal', refusal: 'mail [REDACTED:email]' }] });
      s.fake.requests.length = 0;
      expect((await chat(s.redactIn, { messages: functionCallTurn(`{"to":"${EMAIL}"}`) })).statusCode).toBe(200);
      expect(upstreamMessages()[1]).toEqual({ role: 'assistant', content: null, function_call: { name: 'mail', arguments: '{"to":"[REDACTED:email]"}' } });
    });
  });

  describe('output', () => {
    it('a legacy function call in an answer is blocked, or redacted', async () => {
      s.fake.queue({ body: functionCallAnswer(`{"to":"${EMAIL}"}`) });
      const blocked = await chat(s.blockOut, {});
      expect(blocked.statusCode, blocked.body).toBe(400);
      expect(blocked.json().error).toMatchObject({ type: 'guardrail_block', guardrail_key: 'pii-block' });
      expect(blocked.body).not.toContain(EMAIL);

      s.fake.queue({ body: functionCallAnswer(`{"to":"${EMAIL}"}`) });
      const redacted = await chat(s.redactOut, {});
      expect(redacted.statusCode, redacted.body).toBe(200);
      expect(redacted.json().choices[0].message.function_call).toEqual({ name: 'mail', arguments: '{"to":"[REDACTED:email]"}' });
    });

    it('a streamed legacy function call is held to the end: a block sends none of it', async () => {
      s.fake.queue({ deltas: functionCallDeltas });
      const res = await chat(s.blockOut, { stream: true });
      expect(res.body).not.toContain('jane.doe');
      expect(sseJson(res.body).at(-1)).toMatchObject({ error: { type: 'guardrail_block', guardrail_key: 'pii-block' } });
    });

    it('a streamed legacy function call arrives whole and redacted, after the content', async () => {
      s.fake.queue({ deltas: functionCallDeltas });
      const events = sseJson((await chat(s.redactOut, { stream: true })).body);
      const calls = events.flatMap((e) => {
        const call = (e.choices as { delta?: { function_call?: unknown } }[] | undefined)?.[0]?.delta?.function_call;
        return call ? [call] : [];
      });
      expect(calls).toEqual([{ name: 'mail', arguments: '{"to":"[REDACTED:email]"}' }]);
      expect(streamedText(events)).toBe('Mailing.');
    });
  });
});
