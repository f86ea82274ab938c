import type { Logger } from 'pino';
import type { ProjectScope } from '../http/principal.js';
import type { Bus } from './bus.js';

const TTL_MS = 30_000;
const MAX_PROJECTS = 10_000;

/**
 * Something of each project that the request path reads (its models, its guardrails), loaded from the database at
 * most once per 30 s. A change is announced on the bus, so that every instance drops its copy at once; should the
 * notice be lost, the copy expires anyway. At most 10,000 projects are held; the first loaded goes first.
 */
// A copy is never undefined: `held` answers undefined for "no copy".
export class ProjectCache<T extends NonNullable<unknown> | null> {
  /**
   * Copies by project id, each with its tenant (checked on every read: a project is only ever its own tenant's). Not
   * by a `tenant:project` text: that would be a new string to hash on every read, and this runs several times a call.
   */
  private readonly entries = new Map<string, { tenantId: string; value: T; until: number }>();
  /** Counts the copies dropped: a load that overlapped a drop may have read the state from before the change. */
  private drops = 0;

  /** `log`: where a failed announcement is reported (it is best effort either way). */
  constructor(
    private readonly bus: Bus,
    private readonly topic: string,
    private readonly load: (scope: ProjectScope) => Promise<T>,
    private readonly log?: Logger,
  ) {}

  start(): Promise<void> {
    return this.bus.subscribe(this.topic, (projectKey) => this.drop(projectKey));
  }

  /**
   * The project's copy while it is fresh, without loading (undefined when there is none; `get` loads it). The request
   * path reads through this first: awaiting even a value at hand costs a promise and a turn of the microtask queue,
   * several times a call.
   */
  held(scope: ProjectScope): T | undefined {
    const hit = this.entries.get(scope.projectId);
    return hit && hit.until > Date.now() && hit.tenantId === scope.tenantId ? hit.value : undefined;
  }

  async get(scope: ProjectScope): Promise<T> {
    const held = this.held(scope);
    if (held !== undefined) return held;
    const now = Date.now();
    const dropsBefore = this.drops;
    const value = await this.load(scope);
    // Served, but not kept: a change landed while it loaded (rare; the next call loads again).
    if (this.drops !== dropsBefore) return value;
    if (!this.entries.has(scope.projectId) && this.entries.size >= MAX_PROJECTS) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(scope.projectId, { tenantId: scope.tenantId, value, until: now + TTL_MS });
    return value;
  }

  /** `key`: the project as the bus names it (projectKey). */
  private drop(key: string): void {
    this.drops++;
    this.entries.delete(key.slice(key.lastIndexOf(':') + 1));
  }

  /** Drops this instance's copy and tells the others to drop theirs. */
  async changed(scope: ProjectScope): Promise<void> {
    const key = projectKey(scope);
    this.drop(key);
    await this.bus.publish(this.topic, key).catch((err: unknown) => this.log?.warn({ err, topic: this.topic }, 'could not announce a change'));
  }
}

/** How a change notice names a project: tenant and project id (ids hold no `:`). */
function projectKey(scope: ProjectScope): string {
  return `${scope.tenantId}:${scope.projectId}`;
}
