import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newId, timeOrderedId } from '../../src/platform/ids.js';

describe('timeOrderedId', () => {
  it('has the shape of every other id: a prefix and 24 URL-safe characters', () => {
    expect(timeOrderedId('use')).toMatch(/^use_[0-9a-z]{24}$/);
    expect(newId('use')).toMatch(/^use_[a-z2-7]{24}$/);
  });

  it('sorts by creation time as text, to the millisecond, until the year 5188', () => {
    const maxMs = 36 ** 9 - 1;
    fc.assert(
      fc.property(fc.integer({ min: 0, max: maxMs - 1 }), fc.integer({ min: 1, max: maxMs }), (earlier, gap) => {
        const later = Math.min(maxMs, earlier + gap);
        expect(timeOrderedId('use', earlier) < timeOrderedId('use', later)).toBe(true);
      }),
    );
    expect(new Date(maxMs).getUTCFullYear()).toBe(5188);
  });

  it('differs between ids made in the same millisecond', () => {
    const now = Date.now();
    const ids = new Set(Array.from({ length: 10_000 }, () => timeOrderedId('use', now)));
    expect(ids.size).toBe(10_000);
  });
});
