import { isUniqueViolation } from '../../db/errors.js';
import type { Db, Dialect } from '../../db/types.js';
import { ERRORS } from '../../http/errors.js';
import type { Bus } from '../../platform/bus.js';
import { newId, slugify } from '../../platform/ids.js';
import { ProjectCache } from '../../platform/project-cache.js';
import { checkLimits, type Budget, type RateLimit } from '../limits/service.js';
import { ProjectStore, type ProjectRecord } from './store.js';

/** Project keys: URL-friendly, also used by the route schema. */
export const PROJECT_KEY_PATTERN = '^[a-z0-9][a-z0-9-]{0,47}$';
const PROJECT_KEY = new RegExp(PROJECT_KEY_PATTERN);
/** Project limits are read on every model call; changes clear the copy at once on every instance through the bus. */
const CHANGED_TOPIC = 'projects.changed';

export interface ProjectPatch {
  name?: string;
  budget?: Budget | null;
  rateLimit?: RateLimit | null;
}

export class ProjectService {
  private readonly cache: ProjectCache<ProjectRecord | null>;

  constructor(private readonly store: ProjectStore, private readonly dialect: Dialect, bus: Bus) {
    this.cache = new ProjectCache(bus, CHANGED_TOPIC, (scope) => this.store.find(scope.tenantId, scope.projectId));
  }

  start(): Promise<void> {
    return this.cache.start();
  }

  /** A project by id from memory when recent (the request path reads budgets and rate limits through this). */
  cached(tenantId: string, id: string): Promise<ProjectRecord | null> {
    return this.cache.get({ tenantId, projectId: id });
  }

  /** The project when a fresh copy is in memory, without an await; undefined otherwise (`cached` then loads it). */
  held(tenantId: string, id: string): ProjectRecord | undefined {
    return this.cache.held({ tenantId, projectId: id }) ?? undefined;
  }

  /** Renames a project or sets its budget and rate limit (null removes them). */
  async update(tenantId: string, idOrKey: string, patch: ProjectPatch): Promise<ProjectRecord> {
    checkLimits(patch.budget, patch.rateLimit);
    const limitsChanged = patch.budget !== undefined || patch.rateLimit !== undefined;
    if (patch.name === undefined && !limitsChanged) return this.require(tenantId, idOrKey);
    // Only a budget that starts counting something anew restarts the counters. Any other change keeps them, and with
    // them the reservations of calls still running (new counters would start from stored usage without those). It is
    // decided on the budget as stored when the change is written: a concurrent PATCH may have just removed it.
    const updated = await this.store.update(tenantId, idOrKey, (current) => ({
      ...patch,
      limitsUpdatedAt: patch.budget !== undefined && startsCounting(current.budget, patch.budget) ? Date.now() : undefined,
    }));
    if (!updated) throw ERRORS.notFound('Project', idOrKey);
    // Best effort beyond this instance: without the notice others reload when their cached copy expires.
    await this.cache.changed({ tenantId, projectId: updated.id });
    return updated;
  }

  list(tenantId: string): Promise<ProjectRecord[]> {
    return this.store.list(tenantId);
  }

  /** A project of this tenant by id or key; another tenant's project is answered as missing. */
  async require(tenantId: string, idOrKey: string): Promise<ProjectRecord> {
    const project = await this.store.find(tenantId, idOrKey);
    if (!project) throw ERRORS.notFound('Project', idOrKey);
    return project;
  }

  /** The project a session works in when it names none: the tenant's first. */
  defaultFor(tenantId: string): Promise<ProjectRecord | null> {
    return this.store.first(tenantId);
  }

  /** Creates a project, inside the caller's transaction when given. */
  async create(tenantId: string, input: { name: string; key?: string }, trx?: Db): Promise<ProjectRecord> {
    // Bound to the caller's transaction, the store's own transactions are that one.
    const store = trx ? new ProjectStore(trx, this.dialect, (fn) => fn(trx)) : this.store;
    const key = input.key ?? slugify(input.name);
    if (!PROJECT_KEY.test(key)) {
      throw ERRORS.validation('key must be 1-48 lower-case letters, digits or dashes (derived from name when omitted)');
    }
    const conflict = () => ERRORS.conflict(`A project with key "${key}" already exists`);
    if (await store.find(tenantId, key)) throw conflict();
    const project: ProjectRecord = { id: newId('prj'), tenantId, key, name: input.name, budget: null, rateLimit: null, limitsUpdatedAt: 0, createdAt: Date.now() };
    try {
      await store.insert(project);
    } catch (err) {
      // A concurrent request took the key between the check and the insert.
      throw isUniqueViolation(err) ? conflict() : err;
    }
    return project;
  }
}

export function projectView(project: ProjectRecord) {
  return {
    id: project.id,
    key: project.key,
    name: project.name,
    budget: project.budget,
    rateLimit: project.rateLimit,
    createdAt: new Date(project.createdAt).toISOString(),
  };
}

/**
 * True when a new budget counts what no counter kept: tokens or cost the old one did not count, or another period
 * (a counter of the earlier period, should it come back, missed everything in between).
 */
function startsCounting(old: Budget | null, next: Budget | null): boolean {
  if (!next) return false;
  if (!old || old.period !== next.period) return true;
  return (next.maxTokens !== undefined && old.maxTokens === undefined) || (next.maxCostUsd !== undefined && old.maxCostUsd === undefined);
}
