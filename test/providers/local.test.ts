import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { estimateChatInput, estimateTokens } from '../../src/providers/tokens.js';
import { call, createTestApp, type TestApp } from '../helpers/app.js';
import { chatBody, registerModel } from '../helpers/models.js';

/** The built-in local models (`local-chat`, `local-embed`) through the client API. */

type Body = Record<string, unknown>;
type Chunk = { object: string; model: string; choices: { delta: { role?: string; content?: string }; finish_reason: string | null }[]; usage?: Record<string, number> };

const cosine = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + x * b[i]!, 0);
const norm = (a: number[]) => Math.sqrt(cosine(a, a));

function decodeFloat32(base64: string): number[] {
  const buf = Buffer.from(base64, 'base64');
  return Array.from({ length: buf.length / 4 }, (_, i) => buf.readFloatLE(i * 4));
}

describe('built-in local models', () => {
  let t: TestApp;
  const chat = (body: Body) => call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/chat/completions', payload: body });
  const embed = (body: Body) => call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/embeddings', payload: { model: 'local-embed', ...body } });
  const vectors = async (input: string[]): Promise<number[][]> => {
    const res = await embed({ input });
    expect(res.statusCode, res.body).toBe(200);
    return (res.json().data as { embedding: number[] }[]).map((d) => d.embedding);
  };
  const streamChunks = (body: string): Chunk[] => {
    const frames = body.split('\n\n').filter((f) => f !== '');
    expect(frames.at(-1)).toBe('data: [DONE]');
    return frames.slice(0, -1).map((f) => JSON.parse(f.replace(/^data: /, '')) as Chunk);
  };

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => t?.close());

  describe('local-chat', () => {
    it('echoes the last user message, deterministically, with counted usage', async () => {
      const body = {
        model: 'local-chat',
        messages: [
          { role: 'system', content: 'You are terse.' },
          { role: 'user', content: 'first question' },
          { role: 'assistant', content: 'an answer' },
          { role: 'user', content: '  What is 2+2?  ' },
        ],
      };
      const first = await chat(body);
      expect(first.statusCode, first.body).toBe(200);
      const json = first.json();
      expect(json).toMatchObject({ object: 'chat.completion', model: 'local-chat', choices: [{ index: 0, message: { role: 'assistant', content: 'Echo: What is 2+2?' }, finish_reason: 'stop' }] });
      expect(json.usage).toEqual({
        prompt_tokens: estimateChatInput(body),
        completion_tokens: estimateTokens('Echo: What is 2+2?'),
        total_tokens: estimateChatInput(body) + estimateTokens('Echo: What is 2+2?'),
      });
      const second = (await chat(body)).json();
      expect(second.choices).toEqual(json.choices);
      expect(second.usage).toEqual(json.usage);
    });

    it('echoes the text parts of array content', async () => {
      const res = await chat({ model: 'local-chat', messages: [{ role: 'user', content: [{ type: 'text', text: 'one' }, { type: 'image_url', image_url: { url: 'https://x.test/a.png' } }, { type: 'text', text: 'two' }] }] });
      expect(res.json().choices[0].message.content).toBe('Echo: one\ntwo');
    });

    it('answers "Hello from Waygate." when there is no user message', async () => {
      for (const messages of [[{ role: 'system', content: 'Only a system prompt' }], [{ role: 'user', content: '   ' }], [{ role: 'assistant', content: 'hi' }]]) {
        const res = await chat({ model: 'local-chat', messages });
        expect(res.statusCode, res.body).toBe(200);
        expect(res.json().choices[0]).toMatchObject({ message: { content: 'Hello from Waygate.' }, finish_reason: 'stop' });
      }
    });

    it('cuts the reply at max_tokens (and max_completion_tokens) with finish_reason "length"', async () => {
      const long = 'alpha beta gamma delta epsilon zeta eta theta iota kappa';
      const full = (await chat(chatBody('local-chat', { messages: [{ role: 'user', content: long }] }))).json().choices[0].message.content as string;
      expect(full).toBe(`Echo: ${long}`);
      for (const limit of [{ max_tokens: 5 }, { max_completion_tokens: 5 }, { max_tokens: 1000, max_completion_tokens: 5 }]) {
        const res = await chat(chatBody('local-chat', { messages: [{ role: 'user', content: long }], ...limit }));
        expect(res.statusCode, res.body).toBe(200);
        const json = res.json();
        const content = json.choices[0].message.content as string;
        expect(json.choices[0].finish_reason, JSON.stringify(limit)).toBe('length');
        expect(content.length).toBeGreaterThan(0);
        expect(content.length).toBeLessThan(full.length);
        expect(full.startsWith(content)).toBe(true);
        expect(json.usage.completion_tokens).toBeLessThanOrEqual(5);
      }
      const roomy = (await chat(chatBody('local-chat', { messages: [{ role: 'user', content: long }], max_tokens: 1000 }))).json();
      expect(roomy.choices[0]).toMatchObject({ message: { content: full }, finish_reason: 'stop' });
    });

    it('streams the reply word by word, then the usage chunk when asked, then [DONE]', async () => {
      const body = chatBody('local-chat', { messages: [{ role: 'user', content: 'stream these four words' }] });
      const plain = (await chat(body)).json();
      const res = await chat({ ...body, stream: true, stream_options: { include_usage: true } });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
      const chunks = streamChunks(res.body);
      for (const chunk of chunks) expect(chunk).toMatchObject({ object: 'chat.completion.chunk', model: 'local-chat' });
      expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
      const words = chunks.slice(1).filter((c) => c.choices[0]?.delta.content);
      expect(words.map((c) => c.choices[0]!.delta.content)).toEqual(['Echo:', ' stream', ' these', ' four', ' words']);
      expect(chunks.filter((c) => c.choices[0]?.finish_reason === 'stop')).toHaveLength(1);
      const usage = chunks.at(-1)!;
      expect(usage.choices).toEqual([]);
      expect(usage.usage).toEqual(plain.usage);
      // Without include_usage the usage chunk is not sent.
      const quiet = streamChunks((await chat({ ...body, stream: true })).body);
      expect(quiet.some((c) => c.usage !== undefined)).toBe(false);
      expect(quiet.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(plain.choices[0].message.content);
    });

    it('streams a cut reply with finish_reason "length"', async () => {
      const res = await chat(chatBody('local-chat', { messages: [{ role: 'user', content: 'one two three four five six' }], max_tokens: 3, stream: true }));
      const chunks = streamChunks(res.body);
      expect(chunks.some((c) => c.choices[0]?.finish_reason === 'length')).toBe(true);
      expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('').length).toBeLessThan('Echo: one two three four five six'.length);
    });

    it('answers each of the n choices asked for, usage summing them, plain and streamed', async () => {
      const body = chatBody('local-chat', { messages: [{ role: 'user', content: 'three of these' }], n: 3 });
      const res = await chat(body);
      expect(res.statusCode, res.body).toBe(200);
      const json = res.json();
      expect(json.choices).toEqual([0, 1, 2].map((index) => ({ index, message: { role: 'assistant', content: 'Echo: three of these', refusal: null }, finish_reason: 'stop', logprobs: null })));
      const perChoice = estimateTokens('Echo: three of these');
      expect(json.usage).toEqual({ prompt_tokens: estimateChatInput(body), completion_tokens: 3 * perChoice, total_tokens: estimateChatInput(body) + 3 * perChoice });

      const chunks = streamChunks((await chat({ ...body, stream: true, stream_options: { include_usage: true } })).body);
      const byChoice = [0, 1, 2].map((index) => chunks.flatMap((c) => c.choices.filter((choice) => (choice as { index?: number }).index === index)));
      for (const choice of byChoice) {
        expect(choice[0]!.delta.role).toBe('assistant');
        expect(choice.map((c) => c.delta.content ?? '').join('')).toBe('Echo: three of these');
        expect(choice.filter((c) => c.finish_reason !== null).map((c) => c.finish_reason)).toEqual(['stop']);
      }
      expect(chunks.at(-1)!.usage).toEqual(json.usage);
      // A cut applies to each choice.
      const cut = (await chat({ ...body, max_tokens: 2 })).json();
      expect(cut.choices.map((c: { finish_reason: string }) => c.finish_reason)).toEqual(['length', 'length', 'length']);
    });

    it('refuses a choice count OpenAI refuses', async () => {
      for (const n of [0, -1, 1.5, 129, '2', true]) {
        const res = await chat(chatBody('local-chat', { n }));
        expect(res.statusCode, `${JSON.stringify(n)}: ${res.body}`).toBe(400);
        expect(res.json().error.message).toMatch(/^body\.n /);
      }
      for (const n of [null, 1, 128]) expect((await chat(chatBody('local-chat', { n }))).statusCode, JSON.stringify(n)).toBe(200);
    });

    it('offers no embeddings, and local-embed offers no chat', async () => {
      expect((await embed({ model: 'local-chat', input: 'x' })).statusCode).toBe(400);
      expect((await chat(chatBody('local-embed'))).statusCode).toBe(400);
      const mod = await call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/moderations', payload: { model: 'local-chat', input: 'x' } });
      expect(mod.statusCode).toBe(400);
    });
  });

  describe('local-embed', () => {
    it('returns one 384-dimension, L2-normalised vector per input, in order', async () => {
      const res = await embed({ input: ['first text', 'second text', 'third'] });
      expect(res.statusCode, res.body).toBe(200);
      const json = res.json();
      expect(json).toMatchObject({ object: 'list', model: 'local-embed' });
      expect(json.usage.prompt_tokens).toBeGreaterThan(0);
      expect(json.data.map((d: { index: number; object: string }) => [d.index, d.object])).toEqual([
        [0, 'embedding'],
        [1, 'embedding'],
        [2, 'embedding'],
      ]);
      for (const d of json.data as { embedding: number[] }[]) {
        expect(d.embedding).toHaveLength(384);
        expect(norm(d.embedding)).toBeCloseTo(1, 6);
      }
    });

    it('gives identical text the same vector (cosine 1), across calls', async () => {
      const [a, b] = await vectors(['The quick brown fox', 'The quick brown fox']);
      const [c] = await vectors(['The quick brown fox']);
      expect(cosine(a!, b!)).toBeCloseTo(1, 9);
      expect(c).toEqual(a);
      const single = await embed({ input: 'The quick brown fox' });
      expect(single.json().data).toHaveLength(1);
      expect(single.json().data[0].embedding).toEqual(a);
    });

    it('scores overlapping texts above unrelated ones', async () => {
      const cases: [string, string, string][] = [
        ['the cat sat on the mat', 'the cat sat on a red mat', 'quarterly revenue grew in asian markets'],
        ['machine learning models need training data', 'training machine learning models on data', 'banana bread recipe with walnuts'],
        ['How do I reset my password?', 'password reset help', 'What time does the museum open?'],
      ];
      for (const [anchor, near, far] of cases) {
        const [a, n, f] = await vectors([anchor, near, far]);
        expect(cosine(a!, n!), `${anchor} ~ ${near} vs ${far}`).toBeGreaterThan(cosine(a!, f!) + 0.2);
      }
      // More shared words, more similar.
      const [base, oneChanged, threeChanged] = await vectors(['red green blue yellow purple', 'red green blue yellow orange', 'red green black white orange']);
      expect(cosine(base!, oneChanged!)).toBeGreaterThan(cosine(base!, threeChanged!));
    });

    it('is case-insensitive', async () => {
      const [a, b] = await vectors(['Hello World', 'hello world']);
      expect(cosine(a!, b!)).toBeCloseTo(1, 9);
    });

    // Regression: the sign came from FNV-1a's lowest bit, which follows the index's lowest bit, so colliding
    // features always added up and unrelated texts looked alike.
    it("a feature's sign does not follow its index, and unrelated texts are far apart", async () => {
      const [long] = await vectors([Array.from({ length: 300 }, (_, i) => `word${i}`).join(' ')]);
      const nonZero = long!.map((value, index) => [value, index] as const).filter(([value]) => value !== 0);
      const signFollowsParity = nonZero.filter(([value, index]) => value > 0 === (index % 2 === 1)).length / nonZero.length;
      expect(signFollowsParity).toBeGreaterThan(0.3);
      expect(signFollowsParity).toBeLessThan(0.7);
      const unrelated = await vectors([
        'quarterly revenue grew in asian markets',
        'banana bread recipe with walnuts',
        'what time does the museum open',
        'the referee blew the final whistle',
        'install the printer driver first',
        'volcanic ash grounded every flight',
      ]);
      const pairs = unrelated.flatMap((a, i) => unrelated.slice(i + 1).map((b) => cosine(a, b)));
      expect(pairs.reduce((sum, c) => sum + c, 0) / pairs.length).toBeLessThan(0.2);
    });

    it('reads words whole: composed and decomposed accents alike, combining marks inside words', async () => {
      const [composed, decomposed] = await vectors(['caf\u00e9 au lait', 'cafe\u0301 au lait']);
      expect(cosine(composed!, decomposed!)).toBeCloseTo(1, 9);
      // नमस्ते holds combining marks: split at them, it would be the words नमस and त.
      const [whole, split] = await vectors(['नमस्ते', 'नमस त']);
      expect(cosine(whole!, split!)).toBeLessThan(0.9);
    });

    it('gives text without words (punctuation, emoji, blanks) a unit vector, never a zero one', async () => {
      const [punctuation, emoji, blank, other] = await vectors(['!!! ???', '🎉🎉', '   ', ' !!!   ???']);
      for (const vector of [punctuation, emoji, blank]) expect(norm(vector!)).toBeCloseTo(1, 6);
      expect(cosine(punctuation!, other!)).toBeCloseTo(1, 9);
    });

    it('honours dimensions from 1 to 384 and rejects 0 and 385', async () => {
      for (const dimensions of [1, 64, 384]) {
        const res = await embed({ input: 'size me', dimensions });
        expect(res.statusCode, res.body).toBe(200);
        const vector = res.json().data[0].embedding as number[];
        expect(vector).toHaveLength(dimensions);
        expect(norm(vector)).toBeCloseTo(1, 6);
      }
      for (const dimensions of [0, 385, 1.5]) {
        const res = await embed({ input: 'size me', dimensions });
        expect(res.statusCode, `dimensions ${dimensions}`).toBe(400);
        expect(res.json().error.type).toBe('invalid_request_error');
      }
    });

    it('encodes base64 as little-endian float32 of the float vector', async () => {
      const [floats] = await vectors(['encode me please']);
      const res = await embed({ input: ['encode me please'], encoding_format: 'base64' });
      expect(res.statusCode, res.body).toBe(200);
      const encoded = res.json().data[0].embedding;
      expect(typeof encoded).toBe('string');
      const decoded = decodeFloat32(encoded);
      expect(decoded).toHaveLength(384);
      decoded.forEach((value, i) => expect(value).toBeCloseTo(floats![i]!, 6));
      expect(decoded.some((v) => v !== 0)).toBe(true);
    });

    it('takes token arrays as input', async () => {
      const res = await embed({ input: [[1, 2, 3], [4, 5]] });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().data).toHaveLength(2);
      expect(res.json().usage.prompt_tokens).toBe(5);
    });
  });

  it('a registered model of type local with upstreamModel local-embed behaves like local-embed', async () => {
    const key = await registerModel(t, { provider: { type: 'local' }, upstreamModel: 'local-embed', capabilities: ['embeddings'] });
    const mine = await embed({ model: key, input: 'same text' });
    expect(mine.statusCode, mine.body).toBe(200);
    expect(mine.json().model).toBe('local-embed');
    const [builtIn] = await vectors(['same text']);
    expect(mine.json().data[0].embedding).toEqual(builtIn);
    const chatKey = await registerModel(t, { provider: { type: 'local' }, upstreamModel: 'local-chat' });
    expect((await chat(chatBody(chatKey))).json().choices[0].message.content).toBe('Echo: Say hello');
    const bad = await call(t.app, t.adminSession, { method: 'POST', url: '/api/models', payload: { key: 'local-bad', provider: { type: 'local' }, upstreamModel: 'gpt-4o', capabilities: ['chat'] } });
    expect(bad.statusCode).toBe(400);
  });

  it('lists both built-in models to clients', async () => {
    const res = await call(t.app, t.ownerToken, { method: 'GET', url: '/api/client/v1/models' });
    expect(res.statusCode).toBe(200);
    const data = res.json().data as { id: string; owned_by: string; capabilities: string[] }[];
    expect(data.find((m) => m.id === 'local-chat')).toMatchObject({ owned_by: 'local', capabilities: ['chat'] });
    expect(data.find((m) => m.id === 'local-embed')).toMatchObject({ owned_by: 'local', capabilities: ['embeddings'] });
  });
});

describe('WAYGATE_LOCAL_MODELS=false', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env: { WAYGATE_LOCAL_MODELS: 'false' } });
  });
  afterAll(async () => t?.close());

  it('has no local-chat or local-embed', async () => {
    const chat = await call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/chat/completions', payload: chatBody('local-chat') });
    expect(chat.statusCode).toBe(404);
    expect(chat.json().error.type).toBe('not_found_error');
    const embed = await call(t.app, t.ownerToken, { method: 'POST', url: '/api/client/v1/embeddings', payload: { model: 'local-embed', input: 'x' } });
    expect(embed.statusCode).toBe(404);
    const models = await call(t.app, t.ownerToken, { method: 'GET', url: '/api/client/v1/models' });
    expect(models.statusCode).toBe(200);
    const data = models.json().data as { id: string; owned_by: string }[];
    expect(data.filter((m) => m.id.startsWith('local-') || m.owned_by === 'local')).toEqual([]);
  });
});
