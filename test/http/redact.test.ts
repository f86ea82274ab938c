import { describe, expect, it } from 'vitest';
import { withoutTokenValues } from '../../src/http/redact.js';

describe('withoutTokenValues', () => {
  it('cuts every token value (base64url, so with - and _) to the part listings show', () => {
    const value = 'wgt_a-_b9Zx_' + 'Q-_'.repeat(10) + 'k';
    expect(withoutTokenValues(`/api/tokens/${value}?api_key=${value}`)).toBe('/api/tokens/wgt_a-_b9Zx_…?api_key=wgt_a-_b9Zx_…');
  });

  it('leaves text without a token value, and a display prefix alone, as it is', () => {
    for (const text of ['/api/tokens/tok_abc', '/api/tokens/wgt_a-_b9Zx_', '/api/models/wgt_short', '']) expect(withoutTokenValues(text)).toBe(text);
  });
});
