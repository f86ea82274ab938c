import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import { connectRedis, REDIS_KEY_PREFIX } from './redis.js';

export type BusHandler = (message: string) => void;

/**
 * Fire-and-forget notices between instances (for example "token revoked: drop it from your cache").
 * In-process by default; Redis pub/sub when REDIS_URL is set. Delivery is best effort: receivers must
 * also be correct without the notice (caches expire), the notice only makes them correct sooner.
 */
export interface Bus {
  publish(topic: string, message: string): Promise<void>;
  subscribe(topic: string, handler: BusHandler): Promise<void>;
  close(): Promise<void>;
}

export class MemoryBus implements Bus {
  private readonly emitter = new EventEmitter();

  async publish(topic: string, message: string): Promise<void> {
    this.emitter.emit(topic, message);
  }

  async subscribe(topic: string, handler: BusHandler): Promise<void> {
    this.emitter.on(topic, handler);
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
  }
}

export class RedisBus implements Bus {
  private readonly publisher: Redis;
  private readonly subscriber: Redis;
  private readonly emitter = new EventEmitter();

  constructor(url: string, private readonly prefix = REDIS_KEY_PREFIX) {
    this.publisher = connectRedis(url);
    this.subscriber = connectRedis(url, { subscriber: true });
    this.subscriber.on('message', (channel: string, message: string) => {
      this.emitter.emit(channel.slice(this.prefix.length), message);
    });
    // Subscriptions are (re)made whenever the connection becomes ready, so a Redis that is down at start or
    // restarts later does not leave this instance deaf.
    this.subscriber.on('ready', () => void this.resubscribe());
  }

  private async resubscribe(): Promise<void> {
    const channels = this.emitter.eventNames().map((topic) => this.prefix + String(topic));
    if (channels.length > 0) await this.subscriber.subscribe(...channels).catch(() => undefined);
  }

  async publish(topic: string, message: string): Promise<void> {
    await this.publisher.publish(this.prefix + topic, message);
  }

  async subscribe(topic: string, handler: BusHandler): Promise<void> {
    const first = this.emitter.listenerCount(topic) === 0;
    this.emitter.on(topic, handler);
    if (first && this.subscriber.status === 'ready') await this.subscriber.subscribe(this.prefix + topic);
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
    await Promise.all([this.publisher, this.subscriber].map((r) => r.quit().catch(() => r.disconnect())));
  }
}

export function createBus(redisUrl: string | undefined, prefix?: string): Bus {
  return redisUrl ? new RedisBus(redisUrl, prefix) : new MemoryBus();
}
