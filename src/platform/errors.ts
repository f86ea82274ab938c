/** A backing service (Redis, the database) could not be reached; the HTTP layer answers 503, not 500. */
export class DependencyUnavailableError extends Error {
  constructor(readonly dependency: string, cause: unknown) {
    super(`${dependency} is unreachable: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'DependencyUnavailableError';
  }
}

/** Connection-level failures of pg, better-sqlite3 and sockets: the service is down or busy, the request was fine. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH',
  '57P01', '57P02', '57P03', '08000', '08001', '08003', '08004', '08006', 'SQLITE_BUSY',
]);

export function isConnectionFailure(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && CONNECTION_CODES.has(code)) return true;
  // pg's pool reports an exhausted connect (or pool-wait) timeout without a code.
  return err instanceof Error && /timeout exceeded when trying to connect|Connection terminated/i.test(err.message);
}

/**
 * Replies of a Redis that cannot serve right now (a replica after a failover, a restart loading its data, a
 * cluster in trouble) and ioredis' own timeout: the request was fine, the service is not.
 */
const REDIS_UNAVAILABLE = /^(READONLY|LOADING|MASTERDOWN|TRYAGAIN|CLUSTERDOWN|BUSY)\b|Command timed out|Connection is closed|Stream isn't writeable/i;

/**
 * Runs a Redis command; a Redis that is unreachable or cannot serve now surfaces as DependencyUnavailableError
 * (503), other command errors stay.
 */
export async function redisCall<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    const unavailable = err instanceof Error && (err.name === 'MaxRetriesPerRequestError' || isConnectionFailure(err) || REDIS_UNAVAILABLE.test(err.message));
    throw unavailable ? new DependencyUnavailableError('Redis', err) : err;
  }
}
