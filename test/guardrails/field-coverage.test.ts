import { describe, expect, it } from 'vitest';
import { sseJson } from '../helpers/inference.js';
import { usePiiModels } from './support.js';

const SSN = '123-45-6789';
/** The SSN with its dashes as JSON `\u002d` escapes: what a JSON parser (Anthropic's provider, a client) decodes to SSN. */
const ESCAPED_ARGS = '{"ssn":"123\\u002d45\\u002d6789"}';
const REDACTED_ARGS = '{"ssn":"[REDACTED:us_ssn]"}';
/**
 * A finding right after a JSON escape: read as JSON text, `\n123-45-6789` is one word "n123-45-6789" and hides the
 * SSN, and `\njohn@...` lets an email's local part swallow the escape's letter (regressions).
 */
const NEWLINE_ARGS = '{"a":"pay\\n123-45-6789","b":"line\\njohn.doe@example.com"}';
const NEWLINE_REDACTED = '{"a":"pay\\n[REDACTED:us_ssn]","b":"line\\n[REDACTED:email]"}';

const toolTurn = (fn: Record<string, unknown>) => [{ role: 'user', content: 'hi' }, { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', ...fn } }] }, { role: 'tool', tool_call_id: 'c1', content: 'ok' }];
const answer = (message: Record<string, unknown>) => ({
  id: 'c', object: 'chat.completion', created: 1, model: 'm',
  choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', ...message } }],
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
});
type Delta = Record<string, unknown>;
const deltasOf = (body: string): Delta[] => sseJson(body).flatMap((e) => (e.choices as { delta?: Delta }[] | undefined) ?? []).map((c) => c.delta ?? {});

/** Guardrails read every text the upstream or the client gets, in the form it will read it. */
describe('guardrail field coverage', () => {
  const s = usePiiModels();
  const { chat, upstreamMessages } = s;

  describe('input', () => {
    it('escaped tool and function call arguments are read decoded: blocked before Anthropic or OpenAI', async () => {
      const turns = [toolTurn({ arguments: ESCAPED_ARGS }), [{ role: 'user', content: 'hi' }, { role: 'assistant', content: null, function_call: { name: 'f', arguments: ESCAPED_ARGS } }, { role: 'function', name: 'f', content: 'ok' }]];
      for (const model of [s.claude, s.blockIn]) {
        for (const messages of turns) {
          const res = await chat(model, { messages });
          expect(res.statusCode, res.body).toBe(400);
          expect(res.json().error).toMatchObject({ type: 'guardrail_block', findings: [{ category: 'us_ssn' }] });
        }
      }
      expect(s.anthropic.requests).toHaveLength(0);
      expect(s.fake.requests).toHaveLength(0);
    });

    it('escaped arguments go upstream redacted, or exactly as they came when nothing is found', async () => {
      expect((await chat(s.redactIn, { messages: toolTurn({ arguments: ESCAPED_ARGS }) })).statusCode).toBe(200);
      expect((upstreamMessages()[1]!.tool_calls as { function: { arguments: string } }[])[0]!.function.arguments).toBe(REDACTED_ARGS);
      s.fake.requests.length = 0;
      expect((await chat(s.redactIn, { messages: toolTurn({ arguments: '{"city":"Z\\u00fcrich"}' }) })).statusCode).toBe(200);
      expect((upstreamMessages()[1]!.tool_calls as { function: { arguments: string } }[])[0]!.function.arguments).toBe('{"city":"Z\\u00fcrich"}');
    });

    it('arguments are read with their escapes decoded, and redacted into valid JSON that keeps them', async () => {
      const res = await chat(s.blockIn, { messages: toolTurn({ arguments: NEWLINE_ARGS }) });
      expect(res.statusCode, res.body).toBe(400);
      expect(s.fake.requests).toHaveLength(0);
      expect((await chat(s.redactIn, { messages: toolTurn({ arguments: NEWLINE_ARGS }) })).statusCode).toBe(200);
      const sent = (upstreamMessages()[1]!.tool_calls as { function: { arguments: string } }[])[0]!.function.arguments;
      expect(sent).toBe(NEWLINE_REDACTED);
      expect(JSON.parse(sent)).toEqual({ a: 'pay\n[REDACTED:us_ssn]', b: 'line\n[REDACTED:email]' });
    });

    it('arguments that are not JSON are read with their escapes decoded too', async () => {
      const res = await chat(s.blockIn, { messages: toolTurn({ arguments: '{"a":"pay\\n123\\u002d45-6789' }) });
      expect(res.statusCode, res.body).toBe(400);
      expect(s.fake.requests).toHaveLength(0);
    });

    it('non-string arguments and refusals are refused with a 400 naming the field', async () => {
      const cases: [unknown[], RegExp][] = [
        [toolTurn({ arguments: { ssn: SSN } }), /messages\.1\.tool_calls\.0\.function\.arguments must be of type string/],
        [[{ role: 'user', content: 'hi' }, { role: 'assistant', content: null, function_call: { name: 'f', arguments: { ssn: SSN } } }], /messages\.1\.function_call\.arguments must be of type string/],
        [[{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'x', refusal: [SSN] }, { role: 'user', content: 'again' }], /messages\.1\.refusal must be of type string/],
      ];
      for (const [messages, message] of cases) {
        const res = await chat(s.blockIn, { messages });
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json().error.message).toMatch(message);
      }
      expect(s.fake.requests).toHaveLength(0);
      // A null refusal, as OpenAI answers it and clients send it back, is fine.
      expect((await chat(s.blockIn, { messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'x', refusal: null }, { role: 'user', content: 'again' }] })).statusCode).toBe(200);
    });

    it('text of a part of any type is read, and redacted in place', async () => {
      const messages = [{ role: 'user', content: [{ type: 'input_text', text: `ssn ${SSN}` }] }];
      expect((await chat(s.blockIn, { messages })).statusCode).toBe(400);
      expect(s.fake.requests).toHaveLength(0);
      expect((await chat(s.redactIn, { messages })).statusCode).toBe(200);
      expect(upstreamMessages()[0]!.content).toEqual([{ type: 'input_text', text: 'ssn [REDACTED:us_ssn]' }]);
    });
  });

  describe('output', () => {
    const shapes: [string, Record<string, unknown>][] = [
      ['reasoning', { content: 'ok', reasoning: `ssn ${SSN}` }],
      ['an audio transcript', { content: null, audio: { id: 'a', data: 'AAAA', transcript: `ssn ${SSN}`, expires_at: 1 } }],
      ['object tool arguments', { content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: { ssn: SSN } } }] }],
      ['an output_text part', { content: [{ type: 'output_text', text: `ssn ${SSN}` }] }],
      ['escaped tool arguments', { content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: ESCAPED_ARGS } }] }],
      ['a finding after an escape in tool arguments', { content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":"pay\\n123-45-6789"}' } }] }],
    ];
    it.each(shapes)('%s is blocked', async (_name, message) => {
      s.fake.queue({ body: answer(message) });
      const res = await chat(s.blockOut, {});
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error).toMatchObject({ type: 'guardrail_block', findings: [{ category: 'us_ssn' }] });
    });

    it('each is redacted in its own field; arguments reach the client as a string', async () => {
      const redacted = [];
      for (const [, message] of shapes) {
        s.fake.queue({ body: answer(message) });
        const res = await chat(s.redactOut, {});
        expect(res.statusCode, res.body).toBe(200);
        redacted.push(res.json().choices[0].message);
      }
      expect(redacted[0]).toMatchObject({ reasoning: 'ssn [REDACTED:us_ssn]' });
      expect(redacted[1]).toMatchObject({ audio: { id: 'a', data: 'AAAA', transcript: 'ssn [REDACTED:us_ssn]' } });
      expect(redacted[2].tool_calls[0].function.arguments).toBe(REDACTED_ARGS);
      expect(redacted[3].content).toEqual([{ type: 'output_text', text: 'ssn [REDACTED:us_ssn]' }]);
      expect(redacted[4].tool_calls[0].function.arguments).toBe(REDACTED_ARGS);
      expect(redacted[5].tool_calls[0].function.arguments).toBe('{"a":"pay\\n[REDACTED:us_ssn]"}');
    });

    it('escaped arguments reach the client exactly as they came when nothing is found', async () => {
      s.fake.queue({ body: answer({ content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{ "city": "Z\\u00fcrich", "n": 12345678901234567890 }' } }] }) });
      const res = await chat(s.redactOut, {});
      expect(res.json().choices[0].message.tool_calls[0].function.arguments).toBe('{ "city": "Z\\u00fcrich", "n": 12345678901234567890 }');
    });
  });

  describe('streams', () => {
    // Regression: a guarded stream passed on every choice field beside the delta, so text in a `message` an upstream
    // put there reached the client unchecked.
    it('text beside a choice\'s delta does not reach the client unchecked; the finish reason and scalars do', async () => {
      /** An SSE frame of a chunk: `choices` as given, with more chunk fields in `extra`. */
      const frame = (choices: unknown[], extra: Record<string, unknown> = {}) => `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', ...extra, choices })}\n\n`;
      s.fake.queue({ raw: frame([{ index: 0, delta: { role: 'assistant', content: 'ok' } }]) + frame([{ index: 0, delta: {}, message: { content: `ssn ${SSN}` }, note: `ssn ${SSN}`, seq: 2, finish_reason: 'stop' }]) + 'data: [DONE]\n\n' });
      const res = await chat(s.redactOut, { stream: true });
      expect(res.body).not.toContain('6789');
      const finish = sseJson(res.body).flatMap((e) => (e.choices as Record<string, unknown>[] | undefined) ?? []).find((c) => c.finish_reason === 'stop');
      expect(finish).toEqual({ index: 0, delta: {}, seq: 2, finish_reason: 'stop' });
      // Nor in the delta beside its texts, in the chunk's own fields, or as a finish reason or role.
      s.fake.queue({
        raw:
          frame([{ index: 0, delta: { role: `ssn ${SSN}`, content: 'ok', text: `ssn ${SSN}`, annotations: [{ t: `ssn ${SSN}` }], n: 1 } }], { note: `ssn ${SSN}`, system_fingerprint: 'fp' }) +
          frame([{ index: 0, delta: {}, finish_reason: `ssn ${SSN}` }]) +
          frame([], { note: `ssn ${SSN}`, usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2, note: `ssn ${SSN}`, prompt_tokens_details: { cached_tokens: 0 } } }) +
          'data: [DONE]\n\n',
      });
      const hidden = await chat(s.redactOut, { stream: true, stream_options: { include_usage: true } });
      expect(hidden.body).not.toContain('6789');
      const events = sseJson(hidden.body);
      expect(events.some((e) => e.system_fingerprint === 'fp')).toBe(true);
      expect(events.flatMap((e) => (e.choices as Record<string, unknown>[] | undefined) ?? []).map((c) => c.finish_reason).filter(Boolean)).toEqual(['stop']);
      expect(events.find((e) => e.usage)!.usage).toEqual({ prompt_tokens: 1, completion_tokens: 1, total_tokens: 2, prompt_tokens_details: { cached_tokens: 0 } });
    });


    const streams: [string, Delta[]][] = [
      ['reasoning', [{ reasoning: 'ssn 123-45-' }, { reasoning: '6789' }, { content: 'ok' }]],
      ['an audio transcript', [{ audio: { id: 'a', data: 'AA', transcript: 'ssn 123-45-' } }, { audio: { data: 'BB', transcript: '6789' } }]],
      ['escaped tool arguments', [{ tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'f', arguments: '{"ssn":"123\\u002d45' } }] }, { tool_calls: [{ index: 0, function: { arguments: '\\u002d6789"}' } }] }]],
      ['a finding after an escape in tool arguments', [{ tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":"pay\\' } }] }, { tool_calls: [{ index: 0, function: { arguments: 'n123-45-6789"}' } }] }]],
    ];
    it.each(streams)('%s is held to the end: a block sends none of it', async (_name, deltas) => {
      s.fake.queue({ deltas });
      const res = await chat(s.blockOut, { stream: true });
      expect(res.body).not.toMatch(/6789|\\u002d/);
      expect(sseJson(res.body).at(-1)).toMatchObject({ error: { type: 'guardrail_block', guardrail_key: 'pii-block' } });
    });

    it('each arrives whole and redacted, under the upstream\'s field names', async () => {
      const sent: Delta[][] = [];
      for (const [, deltas] of streams) {
        s.fake.queue({ deltas });
        const res = await chat(s.redactOut, { stream: true });
        expect(res.body).not.toContain('6789');
        sent.push(deltasOf(res.body));
      }
      expect(sent[0]!.filter((d) => 'reasoning' in d)).toEqual([{ reasoning: 'ssn [REDACTED:us_ssn]' }]);
      expect(sent[1]!.filter((d) => 'audio' in d)).toEqual([{ audio: { id: 'a', data: 'AA' } }, { audio: { data: 'BB', transcript: 'ssn [REDACTED:us_ssn]' } }]);
      expect(sent[2]!.filter((d) => 'tool_calls' in d)).toEqual([{ tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'f', arguments: REDACTED_ARGS } }] }]);
      expect(sent[3]!.filter((d) => 'tool_calls' in d)).toEqual([{ tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":"pay\\n[REDACTED:us_ssn]"}' } }] }]);
    });
  });
});
