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
});
