import { Type } from '@sinclair/typebox';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ChatBody, EmbeddingsBody, ModerationsBody } from '../../src/areas/inference/schemas.js';
import { compileBodyValidator, formatValidationError } from '../../src/http/validation.js';

/** The message the route's error handler would give `body` for this schema, or null when the body is valid. */
function messageFor(schema: object, body: unknown): string | null {
  const validate = compileBodyValidator(schema);
  return validate(body) ? null : formatValidationError(validate.errors ?? [], 'body');
}

const user = (content: unknown) => ({ model: 'm', messages: [{ role: 'user', content }] });

describe('validation messages for unions', () => {
  it.each([
    ['an empty list of inputs is a list that is too short, not a wrong type', EmbeddingsBody, { model: 'm', input: [] }, 'body.input must NOT have fewer than 1 items'],
    ['an empty text input', EmbeddingsBody, { model: 'm', input: '' }, 'body.input must NOT have fewer than 1 characters'],
    ['a list with a bad item names the item', EmbeddingsBody, { model: 'm', input: ['a', 5] }, 'body.input.1 must be of type string'],
    ['a list of token ids with a negative one', EmbeddingsBody, { model: 'm', input: [-1] }, 'body.input.0 must be >= 0'],
    ['a list of token lists with a negative id names the id', EmbeddingsBody, { model: 'm', input: [[1, -2]] }, 'body.input.0.1 must be >= 0'],
    ['an empty token list inside the list', EmbeddingsBody, { model: 'm', input: [[]] }, 'body.input.0 must NOT have fewer than 1 items'],
    ['an item of no accepted type lists the types that place takes', EmbeddingsBody, { model: 'm', input: [1.5] }, 'body.input.0 must be of type string, integer or array'],
    ['the branch that got further into the list is the one named', EmbeddingsBody, { model: 'm', input: [1, 'a'] }, 'body.input.1 must be of type integer'],
    ['a value of no accepted type lists the types once each', EmbeddingsBody, { model: 'm', input: 42 }, 'body.input must be of type string or array'],
    ['message content of no accepted type', ChatBody, user(5), 'body.messages.0.content must be of type string, array or null'],
    ['a bad content part is named, whatever the union order', ChatBody, user([{ type: 'text', text: 5 }]), 'body.messages.0.content.0.text must be of type string'],
    ['a content part without a type', ChatBody, user([{ text: 'x' }]), 'body.messages.0.content.0.type is required'],
    ['a nullable integer given text', ChatBody, { ...user('x'), max_tokens: 'x' }, 'body.max_tokens must be of type integer or null'],
    ['a nullable boolean given text', ChatBody, { ...user('x'), stream: 'yes' }, 'body.stream must be of type boolean or null'],
    ['a nullable integer out of bounds names the bound', ChatBody, { ...user('x'), max_tokens: 0 }, 'body.max_tokens must be >= 1'],
    ['a union inside a union: the inner one is described', ModerationsBody, { model: 'm', input: [5] }, 'body.input.0 must be of type string or object'],
    ['an empty moderation list', ModerationsBody, { model: 'm', input: [] }, 'body.input must NOT have fewer than 1 items'],
  ])('%s', (_name, schema, body, message) => {
    expect(messageFor(schema, body)).toBe(message);
  });

  it('keeps the first error where no union is involved', () => {
    expect(messageFor(ChatBody, { model: 'm' })).toBe('body.messages is required');
    expect(messageFor(Type.Object({ role: Type.String({ enum: ['a', 'b'] }) }), { role: 'c' })).toBe('body.role must be one of: a, b');
  });

  it("does not depend on the order of a union's branches", () => {
    const contentFirst = (content: ReturnType<typeof Type.Union>) => Type.Object({ messages: Type.Array(Type.Object({ content })) });
    const parts = Type.Array(Type.Object({ type: Type.String(), text: Type.Optional(Type.String()) }));
    const orders = [Type.Union([Type.String(), parts, Type.Null()]), Type.Union([parts, Type.String(), Type.Null()]), Type.Union([Type.Null(), parts, Type.String()])];
    for (const [body, message] of [
      [{ messages: [{ content: [{ type: 'text', text: 5 }] }] }, 'body.messages.0.content.0.text must be of type string'],
      [{ messages: [{ content: [{ text: 'x' }] }] }, 'body.messages.0.content.0.type is required'],
      [{ messages: [{ content: 5 }] }, /^body\.messages\.0\.content must be of type (string|array|null)(, (string|array|null))* or (string|array|null)$/],
    ] as const) {
      for (const order of orders) expect(messageFor(contentFirst(order), body)).toMatch(message);
    }
  });

  /** The value at a dotted path of a message ("body.messages.0.content"), or a miss. */
  const at = (body: unknown, path: string): { found: boolean } => {
    let value = body;
    for (const key of path.split('.').slice(1)) {
      if (value === null || typeof value !== 'object' || !Object.hasOwn(value, key)) return { found: false };
      value = (value as Record<string, unknown>)[key];
    }
    return { found: true };
  };

  const json = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      fc.constantFrom(null, true, 0, -1, 1.5, '', 'x', 'user', 'text', 'm'),
      fc.array(tie('value'), { maxLength: 3 }),
      fc.dictionary(fc.constantFrom('model', 'messages', 'role', 'content', 'type', 'text', 'input', 'max_tokens', 'stream', 'tool_calls', 'function', 'arguments'), tie('value'), { maxKeys: 4 }),
    ),
  })).value;
  const bodies = fc.oneof(
    json,
    fc.record({ model: fc.constant('m'), messages: fc.array(fc.record({ role: fc.constantFrom('user', 'assistant', 'x'), content: json }, { requiredKeys: ['role'] }), { maxLength: 3 }) }),
    fc.record({ model: fc.constant('m'), input: json }),
  );

  it('names a field the body has (or the parent of a missing one), in one sentence, for any invalid body', () => {
    fc.assert(
      fc.property(bodies, fc.constantFrom(ChatBody, EmbeddingsBody, ModerationsBody), (body, schema) => {
        const message = messageFor(schema, body);
        if (message === null) return;
        expect(message).not.toContain('\n');
        const named = message.split(' ')[0]!;
        expect(named.split('.')[0], message).toBe('body');
        // "body.x.y is required" names y in x: x is what the body must have.
        const field = / is (required|not a known field)$/.test(message) ? named.slice(0, named.lastIndexOf('.')) : named;
        expect(at(body, field).found, message).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});
