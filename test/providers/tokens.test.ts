import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { contentText, estimateChatInput, estimateEmbeddingInput, estimateTokens, MAX_REPORTED_TOKENS, TokenCounter, tokenCount, usageOf } from '../../src/providers/tokens.js';

/** Unit tests of the token estimator used when an upstream reports no usage and for budget reservations. */

/** The estimator's rule as the regular expression it was first written as: the count the one-pass loop must give. */
function byExpression(text: string): number {
  let tokens = 0;
  for (const match of text.matchAll(/[A-Za-z0-9]+|[^\sA-Za-z0-9]/g)) tokens += match[0].length > 1 ? Math.ceil(match[0].length / 4) : 1;
  return tokens;
}

describe('estimateTokens', () => {
  it('is zero for empty or whitespace-only text', () => {
    expect(estimateTokens('')).toBe(0);
    expect(estimateTokens('   \n\t ')).toBe(0);
  });

  it('is non-zero for any text with a visible character', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 50 }), (text) => {
        fc.pre(text.trim() !== '');
        expect(estimateTokens(text)).toBeGreaterThan(0);
      }),
      { numRuns: 300 },
    );
  });

  // The rule as a regular expression states it; the estimator walks the text instead, for speed.
  it('counts as the regular expression of its rule does, on any UTF-16 text (lone surrogates and every kind of white space too)', () => {
    const spaces = [...'\t\n\v\f\r \u00a0\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f\u3000\ufeff\u180e\u200b\u0085'];
    const piece = fc.oneof(fc.string({ unit: 'binary', maxLength: 12 }), fc.string({ unit: fc.constantFrom(...spaces, 'a', 'Z', '7', '.'), maxLength: 12 }));
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 8 }), (pieces) => {
        const text = pieces.join('');
        expect(estimateTokens(text)).toBe(byExpression(text));
      }),
      { numRuns: 2_000 },
    );
    // Every UTF-16 code unit between letters (so that it also ends and starts a run).
    for (let code = 0; code <= 0xffff; code++) {
      const text = `ab${String.fromCharCode(code)}cdefg`;
      if (estimateTokens(text) !== byExpression(text)) expect.fail(`code unit ${code.toString(16)}: ${estimateTokens(text)} against ${byExpression(text)}`);
    }
  });

  it('counts an ASCII word as one token per four characters, rounded up', () => {
    expect(estimateTokens('a')).toBe(1);
    expect(estimateTokens('word')).toBe(1);
    expect(estimateTokens('words')).toBe(2);
    expect(estimateTokens('abcdefgh')).toBe(2);
    expect(estimateTokens('hello world')).toBe(4);
  });

  it('counts each punctuation mark as a token', () => {
    expect(estimateTokens('hi!')).toBe(2);
    expect(estimateTokens('...')).toBe(3);
    expect(estimateTokens('{"a":1}')).toBe(7);
  });

  it('counts CJK text per character', () => {
    expect(estimateTokens('你好世界')).toBe(4);
    expect(estimateTokens('こんにちは')).toBe(5);
    expect(estimateTokens('日本語 テキスト')).toBe(7);
  });

  it('counts non-ASCII letters per character, erring high', () => {
    expect(estimateTokens('héllo')).toBe(3); // h, é, llo
    expect(estimateTokens('😀😀')).toBeGreaterThanOrEqual(2);
  });

  it('grows with the text: appending never lowers the count', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), fc.string({ maxLength: 40 }), (a, b) => {
        expect(estimateTokens(`${a} ${b}`)).toBeGreaterThanOrEqual(estimateTokens(a));
      }),
      { numRuns: 300 },
    );
  });
});

describe('TokenCounter', () => {
  it('counts a run of letters cut between two pieces once, as the joined text', () => {
    const counter = new TokenCounter();
    counter.add('abc');
    counter.add('defgh, ');
    expect(counter.total).toBe(estimateTokens('abcdefgh, '));
    expect(counter.total).toBe(3);
  });

  it('counts pieces as the rule counts them joined, however a text is cut (surrogate pairs and runs of letters too)', () => {
    const unit = fc.oneof(fc.constantFrom('a', 'Z', '7', ' ', '\n', ',', 'é', '日', '\u2028', '\ud83d', '\ude00'), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }));
    const piece = fc.string({ unit, maxLength: 12 });
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        const counter = new TokenCounter();
        for (const p of pieces) counter.add(p);
        expect(counter.total).toBe(byExpression(pieces.join('')));
      }),
      { numRuns: 300 },
    );
  });
});

describe('contentText', () => {
  it('takes a string as is and joins the text parts of an array', () => {
    expect(contentText('plain')).toBe('plain');
    expect(contentText([{ type: 'text', text: 'a' }, { type: 'image_url', image_url: { url: 'http://x' } }, { type: 'text', text: 'b' }])).toBe('a\nb');
    expect(contentText(null)).toBe('');
    expect(contentText([null, 1, { text: 2 }])).toBe('');
  });
});

describe('estimateChatInput', () => {
  const user = (content: unknown) => ({ role: 'user', content });

  it('has a floor for the reply priming and per-message framing', () => {
    expect(estimateChatInput({})).toBeGreaterThan(0);
    expect(estimateChatInput({ messages: [user('')] })).toBeGreaterThan(estimateChatInput({ messages: [] }));
  });

  it('counts every message, not only the last', () => {
    const one = estimateChatInput({ messages: [user('hello there')] });
    const two = estimateChatInput({ messages: [user('hello there'), { role: 'assistant', content: 'general kenobi' }] });
    expect(two).toBeGreaterThan(one);
    expect(two - one).toBeGreaterThanOrEqual(estimateTokens('general kenobi'));
  });

  it('counts the content of the messages', () => {
    const short = estimateChatInput({ messages: [user('hi')] });
    const long = estimateChatInput({ messages: [user('hi '.repeat(200))] });
    expect(long - short).toBeGreaterThanOrEqual(199);
  });

  it('counts the text parts of array content', () => {
    const parts = estimateChatInput({ messages: [user([{ type: 'text', text: 'describe this picture in detail please' }])] });
    const empty = estimateChatInput({ messages: [user([])] });
    expect(parts).toBeGreaterThan(empty);
  });

  it('counts tool definitions and assistant tool calls', () => {
    const messages = [user('what is the weather in Paris?')];
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
    expect(estimateChatInput({ messages, tools })).toBeGreaterThan(estimateChatInput({ messages }) + 10);
    const call = { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] };
    const plain = { role: 'assistant', content: null };
    expect(estimateChatInput({ messages: [...messages, call] })).toBeGreaterThan(estimateChatInput({ messages: [...messages, plain] }));
  });

  it('never throws on odd message arrays', () => {
    fc.assert(
      fc.property(fc.array(fc.anything(), { maxLength: 5 }), fc.anything(), (messages, tools) => {
        const n = estimateChatInput({ messages, tools });
        expect(Number.isInteger(n) && n > 0).toBe(true);
      }),
      { numRuns: 200 },
    );
  });
});

describe('estimateEmbeddingInput', () => {
  it('counts strings, string arrays and token arrays', () => {
    expect(estimateEmbeddingInput('hello world')).toBe(estimateTokens('hello world'));
    expect(estimateEmbeddingInput(['word', 'text'])).toBe(2);
    expect(estimateEmbeddingInput([1, 2, 3])).toBe(3);
    expect(estimateEmbeddingInput([[1, 2], [3, 4, 5]])).toBe(5);
    expect(estimateEmbeddingInput(undefined)).toBe(0);
  });
});

describe('tokenCount and usageOf (what an upstream reports)', () => {
  it('takes finite, non-negative numbers (rounded down) and nothing else', () => {
    expect(tokenCount(12)).toBe(12);
    expect(tokenCount(0)).toBe(0);
    expect(tokenCount(7.9)).toBe(7);
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY, '12', null, undefined, {}, [3], true]) expect(tokenCount(bad)).toBeUndefined();
    // Past a billion a count is no count: two of them must fit PostgreSQL's integer columns, else the event is lost.
    expect(tokenCount(MAX_REPORTED_TOKENS)).toBe(MAX_REPORTED_TOKENS);
    expect(tokenCount(MAX_REPORTED_TOKENS + 1)).toBeUndefined();
    expect(tokenCount(3_000_000_000)).toBeUndefined();
    expect(2 * MAX_REPORTED_TOKENS).toBeLessThanOrEqual(2 ** 31 - 1);
  });

  it('usageOf never gives anything but whole non-negative numbers, whatever the usage object holds', () => {
    fc.assert(
      fc.property(fc.record({ prompt_tokens: fc.anything(), completion_tokens: fc.anything() }, { requiredKeys: [] }), fc.boolean(), (usage, withOutput) => {
        const counted = usageOf({ usage }, withOutput);
        if (counted === null) return;
        for (const n of [counted.inputTokens, counted.outputTokens]) expect(Number.isInteger(n) && n >= 0).toBe(true);
      }),
    );
    expect(usageOf({ usage: { completion_tokens: 3 } }, true)).toBeNull();
    expect(usageOf({}, false)).toBeNull();
  });

  // Regression: a chat answer whose completion_tokens was missing or broken was billed 0 output tokens.
  it("a chat answer's usage counts only with its output; embeddings and moderations report none", () => {
    for (const completion of [undefined, 'x', '400', -400, null, Number.NaN]) {
      expect(usageOf({ usage: { prompt_tokens: 3, completion_tokens: completion } }, true), String(completion)).toBeNull();
    }
    expect(usageOf({ usage: { prompt_tokens: 3, completion_tokens: 4 } }, true)).toEqual({ inputTokens: 3, outputTokens: 4, estimated: false });
    expect(usageOf({ usage: { prompt_tokens: 3, total_tokens: 3 } }, false)).toEqual({ inputTokens: 3, outputTokens: 0, estimated: false });
  });
});
