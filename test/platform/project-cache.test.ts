import { describe, expect, it } from 'vitest';
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
