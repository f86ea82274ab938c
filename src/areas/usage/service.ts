import type { Logger } from 'pino';
import { BufferedWriter } from '../../platform/buffered-writer.js';
import type { UsageEvent, UsageScope, UsageStore } from './store.js';

/** Usage metering: one event per model call, buffered and written in batches off the request path. */
export class UsageService {
  private readonly writer: BufferedWriter<UsageEvent>;

  constructor(private readonly store: UsageStore, log: Logger) {
    this.writer = new BufferedWriter({
      name: 'usage',
      write: (batch) => store.insertMany(batch),
      ping: () => store.ping(),
      describe: (event) => ({ usageId: event.id, requestId: event.requestId }),
      log,
    });
  }

  record(event: UsageEvent): void {
    this.writer.push(event);
  }

  flush(): Promise<void> {
    return this.writer.flush();
  }

  /** Stored tokens and cost since a moment (hour-aligned): what budgets start from after a restart. */
  totalsSince(scope: UsageScope, since: number): Promise<{ tokens: number; cost: number }> {
    return this.store.totalsSince(scope, since);
  }

  close(): Promise<void> {
    return this.writer.close();
  }
}
