export type HealthStatus = 'ok' | 'degraded' | 'down';

export interface CheckResult {
  status: HealthStatus;
  latencyMs?: number;
  message?: string;
  details?: Record<string, unknown>;
}

export type HealthCheck = () => Promise<CheckResult>;

export interface HealthReport {
  status: HealthStatus;
  uptime: number;
  timestamp: string;
  checks: Record<string, CheckResult>;
}

const CHECK_TIMEOUT_MS = 2_000;
const RANK: Record<HealthStatus, number> = { ok: 0, degraded: 1, down: 2 };

/**
 * Named component checks (`sqlite`/`postgres`, `cache`, and later `cluster`, `queue`, `browser-runtime`,
 * `automations`) behind the readiness probe. The report is `down` until start-up has finished and
 * again once shutdown begins, so a load balancer stops sending traffic first.
 */
export class HealthRegistry {
  private readonly checks = new Map<string, { check: HealthCheck; slowIs: HealthStatus }>();
  private phase: 'starting' | 'serving' | 'stopping' = 'starting';

  /**
   * `slowIs`: the status of a check that does not answer in time; `degraded` for one whose slowness means a busy
   * instance (its queries wait for a pooled connection), not a broken one.
   */
  register(name: string, check: HealthCheck, options: { slowIs?: HealthStatus } = {}): void {
    if (this.checks.has(name)) throw new Error(`Health check "${name}" is already registered`);
    this.checks.set(name, { check, slowIs: options.slowIs ?? 'down' });
  }

  markServing(): void {
    this.phase = 'serving';
  }

  markStopping(): void {
    this.phase = 'stopping';
  }

  get serving(): boolean {
    return this.phase === 'serving';
  }

  get stopping(): boolean {
    return this.phase === 'stopping';
  }

  async report(): Promise<HealthReport> {
    const entries = await Promise.all([...this.checks].map(async ([name, { check, slowIs }]) => [name, await runCheck(check, slowIs)] as const));
    const checks = Object.fromEntries(entries);
    let status: HealthStatus = entries.reduce<HealthStatus>((worst, [, r]) => (RANK[r.status] > RANK[worst] ? r.status : worst), 'ok');
    if (this.phase !== 'serving') {
      status = 'down';
      checks.lifecycle = { status: 'down', message: this.phase === 'starting' ? 'start-up has not finished' : 'shutting down' };
    }
    return { status, uptime: process.uptime(), timestamp: new Date().toISOString(), checks };
  }
}

async function runCheck(check: HealthCheck, slowIs: HealthStatus): Promise<CheckResult> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<CheckResult>((resolve) => {
      timer = setTimeout(() => resolve({ status: slowIs, message: `check timed out after ${CHECK_TIMEOUT_MS} ms` }), CHECK_TIMEOUT_MS);
    });
    const result = await Promise.race([check(), timeout]);
    return { latencyMs: round(performance.now() - started), ...result };
  } catch (err) {
    return { status: 'down', latencyMs: round(performance.now() - started), message: err instanceof Error ? err.message : String(err) };
  } finally {
    clearTimeout(timer);
  }
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
