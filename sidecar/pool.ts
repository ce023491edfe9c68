// A bounded worker pool for the host's stack operations (density): env.create, env.fork
// and env.rollback (setup) and env.destroy (teardown) each run compose, create or remove a Docker
// network and containers, and change firewall rules. Two hundred of them at once make the engine
// and the CPU thrash, so at most `size` run at a time and the rest wait in arrival order, each
// told through its progress how many are ahead. Teardowns go before waiting setups: they free
// what the setups need, and a lifecycle's destroy should not wait behind every later create.
import { availableParallelism } from 'node:os';

export type Lane = 'setup' | 'teardown';

interface Waiter {
  lane: Lane;
  start: () => void;
}

export interface PoolStats {
  size: number;
  running: number;
  queued: { setup: number; teardown: number };
}

export class StackPool {
  readonly size: number;
  #running = 0;
  #waiting: Waiter[] = [];

  constructor(size: number) {
    if (!Number.isInteger(size) || size < 1)
      throw new Error(`stack pool size must be a positive integer, not ${size}`);
    this.size = size;
  }

  /**
   * Runs `fn` once a slot is free. `onQueued` hears, when it has to wait, how many operations
   * are ahead of it (waiting ones it will not overtake plus running ones), then when it starts.
   */
  async run<T>(lane: Lane, fn: () => Promise<T>, onQueued?: (message: string) => void): Promise<T> {
    if (this.#running >= this.size || this.#waiting.length) {
      const ahead = this.#ahead(lane);
      const since = Date.now();
      onQueued?.(
        `queued: ${ahead} stack operation${ahead === 1 ? '' : 's'} ahead on this host (${this.#running} running, at most ${this.size} at once)`,
      );
      await new Promise<void>((start) => this.#waiting.push({ lane, start }));
      onQueued?.(`started after ${Date.now() - since} ms in the host's queue`);
    } else {
      this.#running++;
    }
    try {
      return await fn();
    } finally {
      this.#next();
    }
  }

  stats(): PoolStats {
    const count = (lane: Lane) => this.#waiting.filter((w) => w.lane === lane).length;
    return {
      size: this.size,
      running: this.#running,
      queued: { setup: count('setup'), teardown: count('teardown') },
    };
  }

  /** A teardown waits only for the running ones and earlier teardowns; a setup for everyone. */
  #ahead(lane: Lane): number {
    const waiting =
      lane === 'teardown' ? this.#waiting.filter((w) => w.lane === 'teardown').length : this.#waiting.length;
    return this.#running + waiting;
  }

  /** Hands the freed slot to the first waiting teardown, else the first waiting setup. */
  #next(): void {
    let i = this.#waiting.findIndex((w) => w.lane === 'teardown');
    if (i < 0) i = this.#waiting.length ? 0 : -1;
    if (i < 0) {
      this.#running--;
      return;
    }
    const [w] = this.#waiting.splice(i, 1);
    w.start(); // the slot passes on: #running stays
  }
}

export const DEFAULT_STACK_WORKERS = Math.max(2, availableParallelism() * 2);

/** SVC_STACK_WORKERS, else twice the CPUs (at least 2). */
export function stackPoolFromEnv(env: NodeJS.ProcessEnv = process.env): StackPool {
  const raw = env.SVC_STACK_WORKERS;
  if (!raw) return new StackPool(DEFAULT_STACK_WORKERS);
  const n = Number(raw);
  if (!/^\d{1,4}$/.test(raw) || n < 1)
    throw new Error(`SVC_STACK_WORKERS must be a whole number from 1 to 9999, not '${raw.slice(0, 20)}'`);
  return new StackPool(n);
}
