import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newId, randomBase32, timeOrderedId } from '../../src/platform/ids.js';

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

  it("starts with the millisecond clock in 9 base-36 digits, whatever the last id's time was", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 36 ** 9 - 1 }), { minLength: 1, maxLength: 20 }), (times) => {
        for (const ms of times) expect(timeOrderedId('use', ms).slice(4, 13)).toBe(ms.toString(36).padStart(9, '0'));
      }),
    );
  });
});

describe('randomBase32', () => {
  it('gives exactly the length asked, in base32 characters only, across pool refills and beyond a pool', () => {
    for (const length of [0, 1, 15, 24, 4095, 4096, 5000]) {
      for (let i = 0; i < 3; i++) expect(randomBase32(length)).toMatch(new RegExp(`^[a-z2-7]{${length}}$`));
    }
  });

  it('uses every character of the alphabet about equally often', () => {
    const counts = new Map<string, number>();
    for (const ch of randomBase32(320_000)) counts.set(ch, (counts.get(ch) ?? 0) + 1);
    expect(counts.size).toBe(32);
    // 10,000 expected each; 6 standard deviations (about 600) either way.
    for (const count of counts.values()) expect(Math.abs(count - 10_000)).toBeLessThan(600);
  });
});
