import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mergeHeaders } from '../../src/areas/agents/headers.js';

describe('headers sent to a connected agent', () => {
  it("takes a caller's header-like entries, and the owner's headers over them whatever the case", () => {
    expect(mergeHeaders({ 'x-trace': 'abc', 'X-Team': 'caller' }, { 'x-team': 'owner' })).toEqual({ 'x-trace': 'abc', 'x-team': 'owner' });
  });

  it('leaves out a caller header that picks the key or account billed, even where the owner set none', () => {
    expect(mergeHeaders({ 'OpenAI-Organization': 'org', 'OpenAI-Project': 'p', 'api-key': 'k', 'X-Api-Key': 'k', 'x-goog-api-key': 'k' }, undefined)).toEqual({});
    expect(mergeHeaders(undefined, { 'OpenAI-Organization': 'org-owner' })).toEqual({ 'OpenAI-Organization': 'org-owner' });
  });

  it('leaves out stored headers the policy forbids (saved before it existed) instead of sending them', () => {
    expect(mergeHeaders(undefined, { Cookie: 'a=b', Connection: 'close', 'x-long': 'v'.repeat(4097), 'x-latin': 'caf\u00e9', 'x-ok': 'fine' })).toEqual({ 'x-ok': 'fine' });
  });

  it('never yields a header Node would refuse to send, whatever the caller gives', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 12 }), fc.oneof(fc.string({ maxLength: 20 }), fc.integer(), fc.constant(null))), (runtime) => {
        for (const [name, value] of Object.entries(mergeHeaders(runtime, undefined))) {
          expect(name).toMatch(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/);
          expect(value).toMatch(/^[\t\x20-\x7e]*$/);
          expect(['authorization', 'host', 'content-length', 'cookie']).not.toContain(name.toLowerCase());
        }
      }),
    );
  });
});
