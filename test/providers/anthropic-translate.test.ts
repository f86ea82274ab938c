import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ANTHROPIC_DEFAULT_MAX_TOKENS, fromAnthropicMessage, toAnthropicRequest } from '../../src/providers/anthropic.js';

/** Unit tests of the chat completions <-> Anthropic Messages translation. */

type Msg = Record<string, unknown>;
const req = (messages: Msg[], extra: Msg = {}) => toAnthropicRequest({ messages, ...extra }, 'claude-test', false);
const text = (t: string) => ({ type: 'text', text: t });

describe('toAnthropicRequest: messages', () => {
  it('moves system and developer messages into system, joined by blank lines', () => {
    const out = req([
      { role: 'system', content: 'Be brief.' },
      { role: 'developer', content: [text('Answer in French.'), text('No emoji.')] },
      { role: 'user', content: 'Hi' },
    ]);
    expect(out.system).toBe('Be brief.\n\nAnswer in French.\nNo emoji.');
    expect(out.messages).toEqual([{ role: 'user', content: [text('Hi')] }]);
    expect(out.model).toBe('claude-test');
  });

  it('leaves system out when there is none, and skips empty system messages', () => {
    expect(req([{ role: 'user', content: 'Hi' }]).system).toBeUndefined();
    expect(req([{ role: 'system', content: '' }, { role: 'user', content: 'Hi' }]).system).toBeUndefined();
    expect(JSON.parse(JSON.stringify(req([{ role: 'user', content: 'Hi' }])))).not.toHaveProperty('system');
  });

  it('merges consecutive messages of the same role into one turn', () => {
    const out = req([
      { role: 'user', content: 'one' },
      { role: 'user', content: 'two' },
      { role: 'assistant', content: 'three' },
      { role: 'assistant', content: 'four' },
      { role: 'user', content: 'five' },
    ]);
    expect(out.messages).toEqual([
      { role: 'user', content: [text('one'), text('two')] },
      { role: 'assistant', content: [text('three'), text('four')] },
      { role: 'user', content: [text('five')] },
    ]);
  });

  it('turns a data: image URL into a base64 block and an http URL into a url block', () => {
    const out = req([
      {
        role: 'user',
        content: [
          text('What is in these?'),
          { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
          { type: 'image_url', image_url: { url: 'https://example.test/cat.jpg', detail: 'high' } },
        ],
      },
    ]);
    expect(out.messages).toEqual([
      {
        role: 'user',
        content: [
          text('What is in these?'),
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
          { type: 'image', source: { type: 'url', url: 'https://example.test/cat.jpg' } },
        ],
      },
    ]);
  });

  it('turns assistant tool_calls into tool_use blocks with parsed input', () => {
    const out = req([
      { role: 'user', content: 'Weather in Paris and Rome?' },
      {
        role: 'assistant',
        content: 'Let me check.',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_2', type: 'function', function: { name: 'weather', arguments: 'not json' } },
          // JSON, but not an object: Anthropic refuses a tool_use input that is not one.
          { id: 'call_3', type: 'function', function: { name: 'weather', arguments: '["Rome"]' } },
        ],
      },
    ]);
    expect((out.messages as Msg[])[1]).toEqual({
      role: 'assistant',
      content: [
        text('Let me check.'),
        { type: 'tool_use', id: 'call_1', name: 'weather', input: { city: 'Paris' } },
        { type: 'tool_use', id: 'call_2', name: 'weather', input: {} },
        { type: 'tool_use', id: 'call_3', name: 'weather', input: {} },
      ],
    });
  });

  it('sends tool results as tool_result blocks in a user turn, merged with a following user message', () => {
    const out = req([
      { role: 'user', content: 'Weather?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'Sunny, 24 C' },
      { role: 'tool', tool_call_id: 'call_2', content: [text('Rainy')] },
      { role: 'user', content: 'Thanks' },
    ]);
    expect(out.messages).toEqual([
      { role: 'user', content: [text('Weather?')] },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'call_1', name: 'weather', input: {} }] },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'call_1', content: [text('Sunny, 24 C')] },
          { type: 'tool_result', tool_use_id: 'call_2', content: [text('Rainy')] },
          text('Thanks'),
        ],
      },
    ]);
  });
});

describe('toAnthropicRequest: parameters', () => {
  const messages = [{ role: 'user', content: 'Hi' }];

  it('maps tools to name, description and input_schema', () => {
    const parameters = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
    const out = req(messages, {
      tools: [
        { type: 'function', function: { name: 'weather', description: 'Weather of a city', parameters } },
        { type: 'function', function: { name: 'now' } },
      ],
    });
    expect(out.tools).toEqual([
      { name: 'weather', description: 'Weather of a city', input_schema: parameters },
      { name: 'now', description: undefined, input_schema: { type: 'object', properties: {} } },
    ]);
  });

  it('maps tool_choice auto, required, none and a named function, and parallel_tool_calls false', () => {
    const tools = [{ type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: {} } } }];
    expect(req(messages, { tools, tool_choice: 'auto' }).tool_choice).toEqual({ type: 'auto' });
    expect(req(messages, { tools, tool_choice: 'required' }).tool_choice).toEqual({ type: 'any' });
    expect(req(messages, { tools, tool_choice: 'none' }).tool_choice).toEqual({ type: 'none' });
    expect(req(messages, { tools, tool_choice: { type: 'function', function: { name: 'weather' } } }).tool_choice).toEqual({ type: 'tool', name: 'weather' });
    expect(req(messages, { tools }).tool_choice).toBeUndefined();
    expect(req(messages, { tools, tool_choice: null }).tool_choice).toBeUndefined();
    expect(req(messages, { tools, parallel_tool_calls: false }).tool_choice).toEqual({ type: 'auto', disable_parallel_tool_use: true });
    expect(req(messages, { tools, tool_choice: 'required', parallel_tool_calls: false }).tool_choice).toEqual({ type: 'any', disable_parallel_tool_use: true });
    // Anthropic refuses a tool_choice without tools.
    expect(req(messages, { tool_choice: 'auto' }).tool_choice).toBeUndefined();
  });

  it('leaves out what OpenAI sets to null, and messages without content', () => {
    const sent = req(
      [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: '' },
        { role: 'user', content: 'again' },
      ],
      { temperature: null, top_p: null, stop: null },
    );
    expect(JSON.parse(JSON.stringify(sent))).not.toHaveProperty('temperature');
    expect(JSON.parse(JSON.stringify(sent))).not.toHaveProperty('top_p');
    expect(JSON.parse(JSON.stringify(sent))).not.toHaveProperty('stop_sequences');
    expect(sent.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'text', text: 'again' }] }]);
  });

  it('turns a stop string into stop_sequences and passes a stop array through', () => {
    expect(req(messages, { stop: 'END' }).stop_sequences).toEqual(['END']);
    expect(req(messages, { stop: ['A', 'B'] }).stop_sequences).toEqual(['A', 'B']);
    expect(req(messages).stop_sequences).toBeUndefined();
  });

  it('defaults max_tokens to 4096 and prefers max_completion_tokens over max_tokens', () => {
    expect(ANTHROPIC_DEFAULT_MAX_TOKENS).toBe(4096);
    expect(req(messages).max_tokens).toBe(4096);
    expect(req(messages, { max_tokens: 77 }).max_tokens).toBe(77);
    expect(req(messages, { max_completion_tokens: 55 }).max_tokens).toBe(55);
    expect(req(messages, { max_completion_tokens: 55, max_tokens: 77 }).max_tokens).toBe(55);
    expect(req(messages, { max_tokens: null }).max_tokens).toBe(4096);
  });

  it('passes temperature, top_p and user, and sets stream only when streaming', () => {
    const out = req(messages, { temperature: 0.2, top_p: 0.9, user: 'u-1' });
    expect(out).toMatchObject({ temperature: 0.2, top_p: 0.9, metadata: { user_id: 'u-1' } });
    expect(out.stream).toBeUndefined();
    expect(toAnthropicRequest({ messages }, 'm', true).stream).toBe(true);
  });
});

describe('fromAnthropicMessage', () => {
  const message = (extra: Msg) => ({ id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-x', usage: { input_tokens: 12, output_tokens: 7 }, ...extra });

  it('maps text content, id, model and usage', () => {
    const out = fromAnthropicMessage(message({ content: [text('Hello '), text('there')], stop_reason: 'end_turn' }));
    expect(out).toMatchObject({
      id: 'msg_1',
      object: 'chat.completion',
      model: 'claude-x',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
    });
    expect(typeof out.created).toBe('number');
  });

  it('maps tool_use blocks to tool_calls with JSON arguments and content null', () => {
    const out = fromAnthropicMessage(
      message({ content: [{ type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Paris', days: 2 } }], stop_reason: 'tool_use' }),
    );
    const choice = (out.choices as Msg[])[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    const msg = choice.message as { content: unknown; tool_calls: { id: string; type: string; function: { name: string; arguments: string } }[] };
    expect(msg.content).toBeNull();
    expect(msg.tool_calls).toHaveLength(1);
    expect(msg.tool_calls[0]).toMatchObject({ id: 'toolu_1', type: 'function', function: { name: 'weather' } });
    expect(JSON.parse(msg.tool_calls[0]!.function.arguments)).toEqual({ city: 'Paris', days: 2 });
  });

  it('keeps text next to tool calls', () => {
    const out = fromAnthropicMessage(message({ content: [text('Checking.'), { type: 'tool_use', id: 't', name: 'f', input: {} }], stop_reason: 'tool_use' }));
    expect((out.choices as { message: Msg }[])[0]!.message).toMatchObject({ content: 'Checking.', tool_calls: [{ function: { arguments: '{}' } }] });
  });

  it('maps every stop_reason', () => {
    const cases: [string | null, string][] = [
      ['end_turn', 'stop'],
      ['stop_sequence', 'stop'],
      ['max_tokens', 'length'],
      ['model_context_window_exceeded', 'length'],
      ['pause_turn', 'stop'],
      ['tool_use', 'tool_calls'],
      ['refusal', 'content_filter'],
      ['something_new', 'stop'],
      [null, 'stop'],
    ];
    for (const [reason, finish] of cases) {
      const out = fromAnthropicMessage(message({ content: [text('x')], stop_reason: reason }));
      expect((out.choices as Msg[])[0]!.finish_reason, String(reason)).toBe(finish);
    }
  });

  // Reported zeros would read as the upstream's own count; without one, Waygate meters its estimate instead.
  it('reports no usage when the message has none, and an empty text when there is no content', () => {
    const out = fromAnthropicMessage({ id: 'msg_2' });
    expect(out).not.toHaveProperty('usage');
    expect((out.choices as { message: Msg }[])[0]!.message.content).toBe('');
  });

  // Regression: a null content block was dereferenced (a TypeError, so a 500).
  it('skips content blocks that are not objects', () => {
    const out = fromAnthropicMessage({ id: 'msg_3', content: [null, 7, { type: 'text', text: 'Hi' }], usage: { input_tokens: 1, output_tokens: 1 } });
    expect((out.choices as { message: Msg }[])[0]!.message.content).toBe('Hi');
  });

  // Regression: the lookup reached Object's own properties ("constructor" gave the Object function).
  it('finishes as stop for stop reasons it does not know, inherited property names included', () => {
    for (const reason of ['constructor', '__proto__', 'toString', 'pause_turn']) {
      expect((fromAnthropicMessage({ id: 'm', stop_reason: reason }).choices as Msg[])[0]!.finish_reason).toBe('stop');
    }
  });
});

describe('toAnthropicRequest (property)', () => {
  const content = fc.oneof(
    fc.string({ maxLength: 20 }),
    fc.constant(null),
    fc.array(
      fc.oneof(
        fc.record({ type: fc.constant('text'), text: fc.string({ maxLength: 10 }) }),
        fc.record({ type: fc.constant('image_url'), image_url: fc.record({ url: fc.oneof(fc.webUrl(), fc.constant('data:image/png;base64,AAAA')) }) }),
        fc.record({ type: fc.string({ maxLength: 8 }) }),
        fc.anything(),
      ),
      { maxLength: 4 },
    ),
    fc.anything(),
  );
  const toolCall = fc.oneof(
    fc.record({ id: fc.string({ maxLength: 8 }), type: fc.constant('function'), function: fc.record({ name: fc.string({ maxLength: 8 }), arguments: fc.oneof(fc.json(), fc.string({ maxLength: 10 })) }) }),
    fc.record({ id: fc.anything(), function: fc.anything() }, { requiredKeys: [] }),
  );
  const message = fc.record(
    {
      role: fc.constantFrom('system', 'developer', 'user', 'assistant', 'tool', 'function'),
      content,
      // Entries of tool_calls are objects here; null entries have their own test below.
      tool_calls: fc.oneof(fc.array(toolCall, { maxLength: 3 }), fc.string(), fc.integer(), fc.constant(null), fc.dictionary(fc.string(), fc.string())),
      tool_call_id: fc.anything(),
    },
    { requiredKeys: ['role'] },
  );

  it('never throws on arbitrary message arrays, and always alternates user and assistant turns', () => {
    fc.assert(
      fc.property(fc.array(message, { maxLength: 12 }), fc.boolean(), (messages, stream) => {
        // A content part of a type Anthropic cannot take is refused (400) rather than dropped.
        const untranslatable = messages.some(
          (m) => Array.isArray(m.content) && m.content.some((part) => typeof part === 'object' && part !== null && !Array.isArray(part) && (part as Msg).type !== 'text' && (part as Msg).type !== 'image_url'),
        );
        if (untranslatable) {
          expect(() => toAnthropicRequest({ messages }, 'claude', stream)).toThrow(expect.objectContaining({ statusCode: 400 }));
          return;
        }
        const out = toAnthropicRequest({ messages }, 'claude', stream);
        const turns = out.messages as { role: string; content: unknown }[];
        for (const [i, turn] of turns.entries()) {
          expect(['user', 'assistant']).toContain(turn.role);
          expect(Array.isArray(turn.content)).toBe(true);
          if (i > 0) expect(turn.role).not.toBe(turns[i - 1]!.role);
        }
        expect(out.system === undefined || typeof out.system === 'string').toBe(true);
        expect(() => JSON.stringify(out)).not.toThrow();
      }),
      { numRuns: 500 },
    );
  });

  // Regression: null entries in tool_calls or tools were dereferenced (a TypeError, so a 500); they are skipped.
  // Regression (found by the property above): String() threw on `{"toString": false}`, which JSON can carry.
  it('never throws on objects that cannot be converted to text', () => {
    expect(() => req([{ role: 'tool', tool_call_id: { toString: false } }])).not.toThrow();
    expect(() => req([{ role: 'assistant', tool_calls: [{ id: { valueOf: false }, function: { name: { toString: false } } }] }])).not.toThrow();
  });

  it('refuses content parts Anthropic cannot take, naming their type', () => {
    expect(() => req([{ role: 'user', content: [text('Listen'), { type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }] }])).toThrow(/"input_audio" part/);
    expect(() => req([{ role: 'user', content: [{ type: 'file', file: { file_id: 'f' } }] }])).toThrow(expect.objectContaining({ statusCode: 400 }));
  });

  it('never throws on null entries in tool_calls or tools', () => {
    expect(() => req([{ role: 'assistant', content: 'x', tool_calls: [null] }])).not.toThrow();
    expect(() => req([{ role: 'user', content: 'x' }], { tools: [null] })).not.toThrow();
  });
});
