/** What every benchmark script parses and sets up alike: whole-number options, --entry, and clean-up on exit. */

/** How the benchmarked Waygate is started: transpiled sources (build), tsx, or dist/. */
export type Entry = 'build' | 'tsx' | 'dist';

/** The whole number option `--name` gave (`raw`), at least `min`; anything else stops the benchmark with one line. */
export function wholeNumber(name: string, raw: string | undefined, min = 1): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`--${name} must be a whole number >= ${min}, got ${raw}`);
  return value;
}

/** The load options the concurrency-1 and concurrency-N measurements of every benchmark share. */
export interface LoadOptions {
  rounds: number;
  requests: number;
  warmupRequests: number;
  duration: number;
  warmup: number;
  connections: number;
}

/** LoadOptions from parseArgs values (`--rounds`, `--requests`, `--warmup-requests`, `--duration`, `--warmup`, `--connections`). */
export function loadOptions(values: Partial<Record<'rounds' | 'requests' | 'warmup-requests' | 'duration' | 'warmup' | 'connections', string>>): LoadOptions {
  return {
    rounds: wholeNumber('rounds', values.rounds),
    requests: wholeNumber('requests', values.requests),
    warmupRequests: wholeNumber('warmup-requests', values['warmup-requests'], 0),
    duration: wholeNumber('duration', values.duration),
    warmup: wholeNumber('warmup', values.warmup, 0),
    connections: wholeNumber('connections', values.connections),
  };
}

/** The --entry option, one of the entries the benchmark supports. */
export function entryOption<E extends Entry>(raw: string | undefined, allowed: readonly E[]): E {
  if (!allowed.some((entry) => entry === raw)) throw new Error(`--entry must be ${allowed.slice(0, -1).join(', ')} or ${allowed.at(-1)}`);
  return raw as E;
}

export interface Cleanups {
  add(cleanup: () => Promise<void>): void;
  /** Runs every clean-up, newest first (a failing one does not stop the rest), and stops listening for signals. */
  run(): Promise<void>;
}

/** Clean-ups (servers, upstreams, temp files) that also run on SIGINT or SIGTERM, before exiting with 130. */
export function cleanupsOnExit(): Cleanups {
  const cleanups: (() => Promise<void>)[] = [];
  const runAll = async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  };
  const onSignal = () => void runAll().then(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return {
    add: (cleanup) => void cleanups.push(cleanup),
    async run() {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      await runAll();
    },
  };
}
