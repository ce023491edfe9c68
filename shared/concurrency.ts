// The one set of concurrency helpers every program uses (server, sidecar, CLI): a keyed serial
// queue, deadlines as AbortSignals, and waits, retries and backoff. It imports nothing, so any
// program may depend on it without breaking "programs -> server | sidecar | cli -> protocol".
import { channel } from 'node:diagnostics_channel';

/**
 * `{ key }` is published here when a task has to wait for an earlier task of its key: the event
 * after which a test may assert that the task has not run yet (it cannot until the earlier one
 * settles). With no subscriber a publish costs a boolean check.
 */
export const QUEUE_WAIT_CHANNEL = 'svc:queue-wait';
const queueWait = channel(QUEUE_WAIT_CHANNEL);

/**
 * Runs tasks one at a time per key, in the order they were submitted; a task that fails does not
 * stop the next. An empty key is no key: its task runs at once, beside everything else.
 */
export class KeyedQueue {
  #tails = new Map<string, Promise<void>>();

  /**
   * Runs `fn` once every earlier task of `key` has settled. When `signal` aborts while the task
   * is still waiting for its turn, it gives the turn up: `fn` never runs and this rejects with the
   * signal's reason (the tasks after it still wait for the ones before it).
   */
  async run<T>(key: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (!key) return fn();
    const earlier = this.#tails.get(key);
    let done!: () => void;
    const mine = new Promise<void>((r) => {
      done = r;
    });
    const tail = earlier ? earlier.then(() => mine) : mine;
    this.#tails.set(key, tail);
    if (earlier && queueWait.hasSubscribers) queueWait.publish({ key });
    try {
      // With nothing earlier for the key (the exec hot path: one command per environment at a
      // time) the task starts now, without waiting on promises that are already settled.
      if (!earlier) {
        if (signal?.aborted) throw signal.reason;
      } else {
        await untilAborted(
          earlier.then(
            () => {},
            () => {},
          ),
          signal,
        );
      }
      return await fn();
    } finally {
      done();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }

  /** Keys with a task queued or running. */
  get size(): number {
    return this.#tails.size;
  }
}

/**
 * Runs at most `limit` tasks at once; the others start in the order they came, each as one
 * before it settles. A task that has to wait says so on the queue-wait channel as `{ key: name }`.
 */
export class Limiter {
  readonly limit: number;
  readonly name: string;
  #running = 0;
  #waiting: (() => void)[] = [];

  constructor(limit: number, name: string) {
    this.limit = Math.max(1, limit);
    this.name = name;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#running < this.limit) this.#running++;
    else {
      if (queueWait.hasSubscribers) queueWait.publish({ key: this.name });
      // The slot of the task that settles is handed over as it is: #running stays.
      await new Promise<void>((r) => this.#waiting.push(r));
    }
    try {
      return await fn();
    } finally {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#running--;
    }
  }
}

/** Settles as `p` does, unless `signal` aborts first: then rejects with the signal's reason. */
export function untilAborted<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

export interface Deadline {
  /** Aborts at the deadline, or when the parent signal aborts. */
  readonly signal: AbortSignal;
  /** Stops the timer and forgets the parent (call it when the work is over). */
  clear(): void;
}

/**
 * A signal that aborts with `onTimeout()` after `ms`, or earlier when `parent` aborts: then with
 * `onParent(parent.reason)` (by default the parent's own reason).
 */
export function deadline(
  ms: number,
  onTimeout: () => unknown,
  parent?: AbortSignal,
  onParent: (reason: unknown) => unknown = (reason) => reason,
): Deadline {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(onTimeout()), ms);
  const fromParent = () => ac.abort(onParent(parent?.reason));
  if (parent?.aborted) fromParent();
  else parent?.addEventListener('abort', fromParent, { once: true });
  return {
    signal: ac.signal,
    clear() {
      clearTimeout(timer);
      parent?.removeEventListener('abort', fromParent);
    },
  };
}

/**
 * `untilAborted(p, deadline(ms, onTimeout, signal, onAbort).signal)` as one promise and one timer,
 * without an AbortController or a listener when there is no `signal` (this runs once per command
 * on the exec hot path). Settles as `p` does, unless `ms` pass first (rejects with `onTimeout()`)
 * or `signal` aborts (rejects with `onAbort(signal.reason)`).
 */
export function bounded<T>(
  p: Promise<T>,
  ms: number,
  onTimeout: () => unknown,
  signal?: AbortSignal,
  onAbort: (reason: unknown) => unknown = (reason) => reason,
): Promise<T> {
  if (signal?.aborted) return Promise.reject(onAbort(signal.reason));
  return new Promise<T>((resolve, reject) => {
    const stop = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', aborted);
    };
    const aborted = () => {
      stop();
      reject(onAbort(signal?.reason));
    };
    const timer = setTimeout(() => {
      stop();
      reject(onTimeout());
    }, ms);
    signal?.addEventListener('abort', aborted, { once: true });
    p.then(
      (v) => {
        stop();
        resolve(v);
      },
      (err: unknown) => {
        stop();
        reject(err);
      },
    );
  });
}

/** Settles as `p` does within `ms`; otherwise rejects with `onTimeout()`. */
export function withTimeout<T>(p: Promise<T>, ms: number, onTimeout: () => unknown): Promise<T> {
  return bounded(p, ms, onTimeout);
}

/** Waits for `p` to settle, but at most `ms`: true when it settled (its outcome is ignored). */
export function settledWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  const settled = p.then(
    () => true,
    () => true,
  );
  // `settled` never rejects, so a rejection here is the deadline.
  return withTimeout(settled, ms, () => 'timed out').catch(() => false);
}

/** Waits `ms`; returns early (without an error) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

export interface Backoff {
  baseMs: number;
  capMs: number;
  /** Up to this fraction is added at random (never subtracted), so peers do not retry in step. */
  jitter?: number;
}

/** base·2^attempt, capped; the jitter only adds and the cap holds after it. */
export function backoff(attempt: number, o: Backoff): number {
  const base = Math.min(o.capMs, o.baseMs * 2 ** Math.max(0, attempt));
  return Math.min(o.capMs, Math.round(base * (1 + Math.random() * (o.jitter ?? 0))));
}

/** Returned by a `retry` attempt that should be tried again after the delay. */
export const AGAIN: unique symbol = Symbol('again');

export interface RetryOptions {
  /** The wait after attempt `n` (0-based) before the next one. */
  delayMs: number | ((n: number) => number);
  /** Ends the retries: the wait is cut short and `retry` rejects with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * Calls `attempt(0)`, `attempt(1)`, ... until one returns something other than AGAIN, and returns
 * that. An attempt that throws ends the retries with its error (it decides what is final).
 */
export async function retry<T>(
  attempt: (n: number) => Promise<T | typeof AGAIN>,
  o: RetryOptions,
): Promise<T> {
  for (let n = 0; ; n++) {
    if (o.signal?.aborted) throw o.signal.reason;
    const r = await attempt(n);
    if (r !== AGAIN) return r;
    await sleep(typeof o.delayMs === 'number' ? o.delayMs : o.delayMs(n), o.signal);
  }
}

export interface RetryFailuresOptions {
  /** Tries at most this many times; the last failure is thrown. */
  attempts: number;
  /** Whether failure `err` of attempt `n` is worth another try (anything else is thrown at once). */
  when: (err: Error, n: number) => boolean | Promise<boolean>;
  /** The waits between tries (none: tried again at once). */
  backoff?: Backoff;
  signal?: AbortSignal;
}

/**
 * Calls `fn(0)`, `fn(1)`, ... until one resolves, while its failures are ones `when` says pass:
 * the one loop for "try again after a transient failure", with its bound and jitter.
 */
export function retryFailures<T>(fn: (n: number) => Promise<T>, o: RetryFailuresOptions): Promise<T> {
  return retry<T>(
    async (n) => {
      try {
        return await fn(n);
      } catch (err) {
        if (n + 1 >= o.attempts || !(await o.when(err as Error, n))) throw err;
        return AGAIN;
      }
    },
    { delayMs: (n) => (o.backoff ? backoff(n, o.backoff) : 0), signal: o.signal },
  );
}
