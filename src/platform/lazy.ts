/**
 * A value built on its first use and kept after: tables that only some deployments ever need (a guardrail engine's
 * phrase sets) stay out of the memory of the others.
 */
export function lazy<T>(build: () => T): () => T {
  let value: T | undefined;
  let built = false;
  return () => {
    if (!built) {
      value = build();
      built = true;
    }
    return value as T;
  };
}
