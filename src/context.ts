import path from 'node:path';
import pino, { type Logger } from 'pino';
import { A2aService } from './areas/a2a/service.js';
import { publicOnlyLookup } from './areas/agents/addresses.js';
import { AGENT_MAX_RESPONSE_BYTES } from './areas/agents/connectors.js';
import { AgentRunner } from './areas/agents/runner.js';
import { AgentService } from './areas/agents/service.js';
import { AgentStore } from './areas/agents/store.js';
import { AnalyticsService } from './areas/analytics/service.js';
import { AnalyticsStore } from './areas/analytics/store.js';
import { AuditService } from './areas/audit/service.js';
import { AuditStore } from './areas/audit/store.js';
import { AuthService } from './areas/auth/service.js';
import { BatchService } from './areas/batches/service.js';
import { BatchStore } from './areas/batches/store.js';
import { BATCH_CHANGES_TOPIC, BatchWorker } from './areas/batches/worker.js';
import { FileService } from './areas/files/service.js';
import { GuardrailEvaluator } from './areas/guardrails/evaluator.js';
import { GuardrailService } from './areas/guardrails/service.js';
import { GuardrailStore } from './areas/guardrails/store.js';
import { DatabaseBlobStorage } from './areas/files/storage/database.js';
import { DiskBlobStorage } from './areas/files/storage/disk.js';
import { FileStore } from './areas/files/store.js';
import { InferenceService } from './areas/inference/service.js';
import { LimitService } from './areas/limits/service.js';
import { ModelService } from './areas/models/service.js';
import { ModelStore } from './areas/models/store.js';
import { ProjectService } from './areas/projects/service.js';
import { ProjectStore } from './areas/projects/store.js';
import { TenantService, type BootstrapResult } from './areas/tenants/service.js';
import { TenantStore } from './areas/tenants/store.js';
import { TokenService } from './areas/tokens/service.js';
import { TokenStore } from './areas/tokens/store.js';
import { UsageService } from './areas/usage/service.js';
import { UsageStore } from './areas/usage/store.js';
import { UserService } from './areas/users/service.js';
import { UserStore } from './areas/users/store.js';
import type { Config } from './config.js';
import { openDatabase, type DatabaseHandle } from './db/index.js';
import { migrateToLatest } from './db/migrate.js';
import { createBus, type Bus } from './platform/bus.js';
import { createCache, type Cache } from './platform/cache.js';
import { createCounters, type Counters } from './platform/counters.js';
import { cacheCheck, databaseCheck } from './platform/core-checks.js';
import { HealthRegistry } from './platform/health.js';
import { verifyLicence, type Licence } from './platform/licence.js';
import { LogDestination } from './platform/log-destination.js';
import { loadOrCreateSecret, SecretBox } from './platform/secrets.js';
import { UpstreamClient } from './providers/http.js';
import { createProviders } from './providers/index.js';

/** Everything a running Waygate holds: built once at start, shared by the HTTP app, the CLI and workers. */
export interface Context {
  config: Config;
  log: Logger;
  database: DatabaseHandle;
  cache: Cache;
  bus: Bus;
  secrets: SecretBox;
  licence: Licence;
  health: HealthRegistry;
  bootstrap: BootstrapResult;
  /** Runs batch items on this instance (null when WAYGATE_BATCH_WORKER=false); started by startWorkers(). */
  batchWorker: BatchWorker | null;
  services: {
    a2a: A2aService;
    agents: AgentService;
    agentRunner: AgentRunner;
    analytics: AnalyticsService;
    audit: AuditService;
    auth: AuthService;
    batches: BatchService;
    files: FileService;
    guardrails: GuardrailService;
    guardrailEvaluator: GuardrailEvaluator;
    inference: InferenceService;
    limits: LimitService;
    models: ModelService;
    projects: ProjectService;
    tenants: TenantService;
    tokens: TokenService;
    usage: UsageService;
    users: UserService;
  };
  /** Starts the background workers (the server does; the CLI and tests that only read do not). */
  startWorkers(): Promise<void>;
  close(): Promise<void>;
}

export interface ContextOptions {
  logger?: Logger;
  /** Redis key prefix; tests give each run its own. */
  cachePrefix?: string;
  /** CLI commands other than init leave WAYGATE_BOOTSTRAP_TOKEN alone: a stale shell must not rotate it. */
  skipBootstrapToken?: boolean;
}

const STDOUT_FD = 1;
const LOG_WRITE_BYTES = 4096;
const LOG_FLUSH_MS = 100;

export async function createContext(config: Config, options: ContextOptions = {}): Promise<Context> {
  // Asynchronous, batched writes: a log line never blocks the event loop on a slow disk or pipe, and lines go out
  // 4 KB at a time (or after 100 ms), not one system call each (one line per request cost about 5 % of the CPU under
  // load). What is left is written when the process exits; a kill -9 loses at most the last 100 ms of lines.
  const log = options.logger ?? pino({ level: config.logLevel }, new LogDestination(STDOUT_FD, LOG_WRITE_BYTES, LOG_FLUSH_MS));
  const database = openDatabase(config.database, (err) => log.warn({ err }, 'database connection lost; reconnecting on next use'));
  let cache: Cache | undefined;
  let bus: Bus | undefined;
  let counters: Counters | undefined;
  try {
    await migrateToLatest(database.db, database.dialect);
    cache = createCache(config.redisUrl, options.cachePrefix);
    bus = createBus(config.redisUrl, options.cachePrefix);
    counters = createCounters(config.redisUrl, options.cachePrefix);
    const secrets = new SecretBox(loadOrCreateSecret(config.secretKey, config.dataDir, 'secret.key'));
    const sessionSecret = loadOrCreateSecret(config.sessionSecret, config.dataDir, 'session.key');
    if (config.database.kind === 'postgres' && (!config.secretKey || !config.sessionSecret)) {
      // Key files live in each instance's own data directory: instances sharing this database would disagree.
      log.warn('WAYGATE_SECRET_KEY or WAYGATE_SESSION_SECRET is unset: set both when several instances share this database');
    }
    const licence = await verifyLicence(config.license, config.licensePublicKey);
    if (licence.state === 'invalid' || licence.state === 'expired') log.warn({ licence: licence.state, reason: licence.error }, 'licence not in force');

    const { db } = database;
    const projects = new ProjectService(new ProjectStore(db, database.dialect, database.transaction), database.dialect, bus);
    await projects.start();
    const users = new UserService(new UserStore(db));
    const tokens = new TokenService(new TokenStore(db, database.dialect), projects, bus);
    await tokens.start();
    const tenants = new TenantService(database.transaction, new TenantStore(db), projects, users, tokens);
    const auth = new AuthService({ ...config, sessionSecret }, users, projects, cache);
    const audit = new AuditService(new AuditStore(db, database.dialect), log);
    const usage = new UsageService(new UsageStore(db, database.dialect, database.transaction), log);
    const limits = new LimitService(counters, usage);
    // Models and guardrails name each other: the registry asks the guardrails area (built next) about the keys.
    const models: ModelService = new ModelService(new ModelStore(db, database.dialect), database.transaction, secrets, bus, config.localModels, {
      checkAttached: (scope, key, attached, trx) => guardrails.checkModelGuardrails(scope, key, attached, trx),
      checkJudgeChange: (scope, key, change, trx) => guardrails.checkJudgeChange(scope, key, change, trx),
    }, log);
    await models.start();
    const guardrailStore = new GuardrailStore(db, database.dialect);
    const guardrails: GuardrailService = new GuardrailService(guardrailStore, models, database.transaction, bus, log);
    await guardrails.start();
    const guardrailEvaluator = new GuardrailEvaluator(guardrails, models, guardrailStore, log);
    const upstream = new UpstreamClient(config.upstream);
    const inference = new InferenceService(models, createProviders(upstream), limits, projects, usage, guardrails, guardrailEvaluator, log);
    const agentStore = new AgentStore(db, database.dialect, database.transaction);
    const agents = new AgentService(agentStore, models, guardrails, secrets, config.agents);
    // Connected agents get their own client: no retries (a turn is not known to be safe to repeat), a bounded answer,
    // and, unless the operator allows private URLs, only public addresses.
    const agentUpstream = new UpstreamClient({
      ...config.upstream,
      retries: 0,
      maxResponseBytes: AGENT_MAX_RESPONSE_BYTES,
      ...(config.agents.allowPrivateUrls ? {} : { lookup: publicOnlyLookup }),
    });
    const agentRunner = new AgentRunner(agents, agentStore, inference, guardrails, guardrailEvaluator, agentUpstream, usage);
    const a2a = new A2aService(agents, agentRunner);
    const analytics = new AnalyticsService(new AnalyticsStore(db, database.dialect), usage, tokens, users);
    const files = new FileService(
      new FileStore(db, database.dialect, database.transaction),
      { disk: new DiskBlobStorage(path.join(config.dataDir, 'files')), database: new DatabaseBlobStorage(db, database.dialect) },
      { storage: config.files.storage, maxObjectBytes: config.files.maxObjectBytes },
      log,
    );
    files.start();
    const batchStore = new BatchStore(db, database.dialect, database.transaction);
    const batches = new BatchService(batchStore, files, models, { maxLines: config.batches.maxLines });
    const changes = bus;
    // Best effort: without the notice, workers find the change at their next poll (within a second).
    batches.onChange((change) => void changes.publish(BATCH_CHANGES_TOPIC, JSON.stringify(change)).catch((err: unknown) => log.warn({ err }, 'could not announce a batch change')));
    const batchWorker = config.batches.worker
      ? new BatchWorker(batchStore, batches, inference, tokens, bus, { concurrency: config.batches.concurrency, leaseMs: config.batches.leaseMs, retryDelayMs: config.batches.retryDelayMs }, log)
      : null;
    const bootstrap = await tenants.bootstrap(options.skipBootstrapToken ? { ...config, bootstrapToken: undefined } : config);

    const health = new HealthRegistry();
    health.register(database.dialect, databaseCheck(database, config.database));
    health.register('cache', cacheCheck(cache));
    health.register('queue', batches.queueCheck(config.batches.leaseMs), { slowIs: 'degraded' });

    const closeCache = cache;
    const closeBus = bus;
    const closeCounters = counters;
    return {
      config,
      log,
      database,
      cache,
      bus,
      secrets,
      licence,
      health,
      bootstrap,
      batchWorker,
      services: { a2a, agents, agentRunner, analytics, audit, auth, batches, files, guardrails, guardrailEvaluator, inference, limits, models, projects, tenants, tokens, usage, users },
      async startWorkers() {
        await batchWorker?.start();
      },
      async close() {
        // Workers first: running items finish (or are handed back) while the database is still open.
        await batchWorker?.stop();
        await files.close();
        await usage.callsEnded();
        // Together: each retries an unreachable database for a while, and one after the other they would add up.
        await Promise.all([guardrailEvaluator.close(), usage.close(), audit.close()]);
        await upstream.close();
        await agentUpstream.close();
        await closeCounters.close();
        await closeBus.close();
        await closeCache.close();
        await database.close();
      },
    };
  } catch (err) {
    await counters?.close();
    await bus?.close();
    await cache?.close();
    await database.close();
    throw err;
  }
}
