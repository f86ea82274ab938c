/**
 * Makes the next `n` calls of `target[method]` wait for one another after their own work (before it, with
 * `before`), so that a race between concurrent requests happens on every run instead of by luck. Calls after the
 * n-th no longer wait for the others, only for their stagger; `stagger` ms separate the calls' release, in the order
 * they were called (not the order their work ended: on PostgreSQL two reads on two connections may end either way
 * round). `onArrive` hears every call arrive, with its index. Returns a function that restores the method.
 */
export function holdTogether(
  target: object,
  method: string,
  n: number,
  staggerMs = 0,
  options: { before?: boolean; onArrive?: (index: number) => void } = {},
): () => void {
  const holder = target as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const original = holder[method]!;
  let called = 0;
  let arrived = 0;
  let open!: () => void;
  const all = new Promise<void>((resolve) => (open = resolve));
  const wait = async (index: number) => {
    options.onArrive?.(index);
    if (++arrived === n) open();
    await all;
    if (staggerMs > 0) await new Promise((resolve) => setTimeout(resolve, index * staggerMs));
  };
  holder[method] = async (...args: unknown[]) => {
    const index = called++;
    if (options.before) {
      await wait(index);
      return original.apply(target, args);
    }
    const result = await original.apply(target, args);
    await wait(index);
    return result;
  };
  return () => {
    holder[method] = original;
  };
}

/** Holds the next call of `target[method]` after its work until `release()`; `reached` resolves once it is held. */
export function holdNext(target: object, method: string): { reached: Promise<void>; release: () => void; restore: () => void } {
  const holder = target as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const original = holder[method]!;
  let reach!: () => void;
  let release!: () => void;
  const reached = new Promise<void>((resolve) => (reach = resolve));
  const gate = new Promise<void>((resolve) => (release = resolve));
  let held = false;
  holder[method] = async (...args: unknown[]) => {
    const result = await original.apply(target, args);
    if (!held) {
      held = true;
      reach();
      await gate;
    }
    return result;
  };
  return { reached, release, restore: () => (holder[method] = original) };
}
