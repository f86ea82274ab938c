import { afterEach, describe, expect, it, vi } from 'vitest';
import { MemoryBus } from '../../src/platform/bus.js';
import { ProjectCache } from '../../src/platform/project-cache.js';

const scope = { tenantId: 't1', projectId: 'p1' };
const other = { tenantId: 't1', projectId: 'p2' };

describe('ProjectCache', () => {
  it('loads a project once, keeps projects apart, and reloads after a change announced by any instance', async () => {
    const bus = new MemoryBus();
    let loads = 0;
    const load = async (s: typeof scope) => `${s.projectId}#${++loads}`;
    const here = new ProjectCache(bus, 'things.changed', load);
    const there = new ProjectCache(bus, 'things.changed', load);
    await here.start();
    await there.start();
    expect(await here.get(scope)).toBe('p1#1');
    expect(await here.get(scope)).toBe('p1#1');
    expect(await here.get(other)).toBe('p2#2');
    expect(await there.get(scope)).toBe('p1#3');
    await there.changed(scope);
    expect(await here.get(scope)).toBe('p1#4');
    expect(await there.get(scope)).toBe('p1#5');
    expect(await here.get(other)).toBe('p2#2');
  });
  it('a load that a change overtook is served but not kept: the next get loads the changed state', async () => {
    const bus = new MemoryBus();
    let stored = 'v1';
    let release: () => void = () => {};
    let slow = true;
    const load = async () => {
      const seen = stored;
      if (slow) await new Promise<void>((resolve) => (release = resolve));
      return seen;
    };
    const cache = new ProjectCache(bus, 'things.changed', load);
    await cache.start();
    // A reads v1, then the change commits and is announced while A's load is still running.
    const racing = cache.get(scope);
    await Promise.resolve();
    stored = 'v2';
    await cache.changed(scope);
    release();
    expect(await racing).toBe('v1');
    slow = false;
    expect(await cache.get(scope)).toBe('v2');
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('holds what get loaded, for its own tenant only, until it is changed or expires', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const bus = new MemoryBus();
    let loads = 0;
    const cache = new ProjectCache(bus, 'things.changed', async (s: typeof scope) => `${s.projectId}#${++loads}`);
    await cache.start();
    expect(cache.held(scope)).toBeUndefined();
    expect(await cache.get(scope)).toBe('p1#1');
    expect(cache.held(scope)).toBe('p1#1');
    expect(cache.held(other)).toBeUndefined();
    expect(cache.held({ tenantId: 't2', projectId: scope.projectId })).toBeUndefined();
    await cache.changed(scope);
    expect(cache.held(scope)).toBeUndefined();
    expect(await cache.get(scope)).toBe('p1#2');
    vi.advanceTimersByTime(29_999);
    expect(cache.held(scope)).toBe('p1#2');
    vi.advanceTimersByTime(1);
    expect(cache.held(scope)).toBeUndefined();
    expect(await cache.get(scope)).toBe('p1#3');
  });

  it('holds a project that does not exist as null, apart from one it does not hold', async () => {
    const cache = new ProjectCache<string | null>(new MemoryBus(), 'things.changed', async () => null);
    expect(cache.held(scope)).toBeUndefined();
    expect(await cache.get(scope)).toBeNull();
    expect(cache.held(scope)).toBeNull();
  });

  it("never serves one tenant's copy to another tenant asking for the same project id", async () => {
    const bus = new MemoryBus();
    const load = async (s: typeof scope) => `${s.tenantId}/${s.projectId}`;
    const cache = new ProjectCache(bus, 'things.changed', load);
    await cache.start();
    const stranger = { tenantId: 't2', projectId: scope.projectId };
    expect(await cache.get(scope)).toBe('t1/p1');
    expect(await cache.get(stranger)).toBe('t2/p1');
    expect(await cache.get(scope)).toBe('t1/p1');
  });
});
