/**
 * An async iterator's results again, starting with one already read from it. A reader that had to look at the first
 * result (to pick a parser, or to fail over to another model before anything reached the client) hands the stream on
 * whole this way, with no generator in between: each later `next()` is the iterator's own. Closing it early closes
 * the iterator.
 */
export function withFirst<T>(first: IteratorResult<T>, rest: AsyncIterator<T>): AsyncIterable<T> {
  let pending: IteratorResult<T> | null = first;
  const iterator: AsyncIterator<T> = {
    next: () => {
      if (!pending) return rest.next();
      const result = pending;
      pending = null;
      return Promise.resolve(result);
    },
    return: async (value?: unknown) => {
      pending = null;
      return rest.return ? rest.return(value) : { done: true, value: value as T };
    },
  };
  return { [Symbol.asyncIterator]: () => iterator };
}
