/**
 * A read-change-write whose write is a compare-and-set: `attempt` reads, changes and writes, and answers null when
 * another change landed between its read and its write; it then runs again from the newer state, so that concurrent
 * changes of different fields all land. After `attempts` lost races in a row it gives up (null): the caller's 409.
 */
export async function untilWritten<T>(attempts: number, attempt: () => Promise<T | null>): Promise<T | null> {
  for (let tried = 0; tried < attempts; tried++) {
    const written = await attempt();
    if (written !== null) return written;
  }
  return null;
}

/** The updatedAt of a change: now, and always later than the one it replaces, even within one millisecond. */
export function changedAt(previous: number): number {
  return Math.max(Date.now(), previous + 1);
}
