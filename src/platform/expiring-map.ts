export interface Expiring<V> {
  value: V;
  /** Milliseconds since the epoch; Infinity never expires. */
  expiresAt: number;
}

/**
 * A map whose entries expire: dropped when read after their time, and swept once a minute so that keys never read
 * again do not hold memory. The in-process cache and counters are built on it.
 */
export class ExpiringMap<V> {
  private readonly entries = new Map<string, Expiring<V>>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(readonly now: () => number = () => Date.now()) {
    this.sweeper = setInterval(() => this.sweep(), 60_000);
    this.sweeper.unref();
  }

  /** The live entry (mutable in place), or undefined when missing or expired. */
  get(key: string, now = this.now()): Expiring<V> | undefined {
    const entry = this.entries.get(key);
    if (entry && entry.expiresAt <= now) {
      this.entries.delete(key);
      return undefined;
    }
    return entry;
  }

  set(key: string, value: V, expiresAt: number): void {
    this.entries.set(key, { value, expiresAt });
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  private sweep(): void {
    const now = this.now();
    for (const [key, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(key);
  }

  close(): void {
    clearInterval(this.sweeper);
    this.entries.clear();
  }
}
