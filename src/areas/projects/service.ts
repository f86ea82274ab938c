import { isUniqueViolation } from '../../db/errors.js';
import type { Db } from '../../db/types.js';
import { ERRORS } from '../../http/errors.js';
import { newId, slugify } from '../../platform/ids.js';
import { ProjectStore, type ProjectRecord } from './store.js';

/** Project keys: URL-friendly, also used by the route schema. */
export const PROJECT_KEY_PATTERN = '^[a-z0-9][a-z0-9-]{0,47}$';
const PROJECT_KEY = new RegExp(PROJECT_KEY_PATTERN);

export class ProjectService {
  constructor(private readonly store: ProjectStore) {}

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
    const store = trx ? new ProjectStore(trx) : this.store;
    const key = input.key ?? slugify(input.name);
    if (!PROJECT_KEY.test(key)) {
      throw ERRORS.validation('key must be 1-48 lower-case letters, digits or dashes (derived from name when omitted)');
    }
    const conflict = () => ERRORS.conflict(`A project with key "${key}" already exists`);
    if (await store.find(tenantId, key)) throw conflict();
    const project: ProjectRecord = { id: newId('prj'), tenantId, key, name: input.name, createdAt: Date.now() };
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
  return { id: project.id, key: project.key, name: project.name, createdAt: new Date(project.createdAt).toISOString() };
}
