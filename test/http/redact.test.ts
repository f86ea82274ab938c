import { describe, expect, it } from 'vitest';
import { withoutTokenValues } from '../../src/http/redact.js';

describe('withoutTokenValues', () => {
  it('cuts every token value (base64url, so with - and _) to the part listings show', () => {
    const value = 'wgt_a-_b9Zx_' + 'Q-_'.repeat(10) + 'k';
    expect(withoutTokenValues(`/api/tokens/${value}?api_key=${value}`)).toBe('/api/tokens/wgt_a-_b9Zx_…?api_key=wgt_a-_b9Zx_…');
  });

  // Regression: an escaped value (%77gt_..., wgt%5F...) was kept whole in the audit path and the request log.
  it('cuts percent-escaped token values too', () => {
    const value = 'wgt_a-_b9Zx_' + 'Q-_'.repeat(10) + 'k';
    expect(withoutTokenValues(`/api/tokens/%77gt_${value.slice(4)}`)).toBe('/api/tokens/%77gt_a-_b9Zx_…');
    expect(withoutTokenValues(`/api/tokens/wgt%5F${value.slice(4)}`)).toBe('/api/tokens/wgt%5Fa-_b9Zx_…');
    expect(withoutTokenValues(`/x?k=${encodeURIComponent(value).replace(/./g, (c) => `%${c.charCodeAt(0).toString(16)}`)}`)).not.toMatch(/(%[0-9a-f]{2}){13}/i);
  });

  it('leaves text without a token value, and a display prefix alone, as it is', () => {
    for (const text of ['/api/tokens/tok_abc', '/api/tokens/wgt_a-_b9Zx_', '/api/models/wgt_short', '']) expect(withoutTokenValues(text)).toBe(text);
  });
});
