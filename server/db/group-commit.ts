// Group commit for small hot writes on SQLite (the exec hot path). On the embedded
// database a row write costs mostly its commit; writes asked for in the same turn of the event
// loop share one transaction instead. Each write still resolves only once committed, so "recorded
// before written" (spec "Command lifecycle" 1) holds. Postgres writes go straight through: there a
// transaction costs round trips rather than saving them.
//
// Optionally (`delayMs` > 0, off by default; see COMMIT_DELAY_MS), under load (`busy()`: other
// writers are in flight, like Postgres's commit_delay with commit_siblings) the transaction also
// waits `delayMs` for their writes: fewer commits for less CPU per exec, at the price of that delay
// on each of a command's two row writes. A lone writer never waits.
import { guard } from '../../shared/faults.ts';
import type { Db, Queryable } from './types.ts';

interface Queued {
  write: (q: Queryable) => Promise<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

/**
 * How long a busy transaction waits for more writes (`SVC_COMMIT_DELAY_MS`; 0, the default: never
 * waits). Off by default, like Postgres's commit_delay: at 2,000 exec/s on 10,000 hosts 1 ms saved
 * ~15 µs of CPU per exec but tripled p50 (0.9 → 3 ms) and put p99 at 28–61 ms against 14–15 ms
 * (docs/benchmarks.md).
 */
const delaySetting = Number(process.env.SVC_COMMIT_DELAY_MS ?? 0);
export const COMMIT_DELAY_MS = Number.isFinite(delaySetting) && delaySetting > 0 ? delaySetting : 0;

/** Writes that end a wait at once. */
export const FULL_BATCH = 64;

export interface GroupCommitOptions {
  /** True while other writers are in flight, so waiting `delayMs` can gather their writes. */
  busy?: () => boolean;
  delayMs?: number;
}

export class GroupCommit {
  #db: Db;
  #queued: Queued[] = [];
  #busy: () => boolean;
  #delayMs: number;
  #timer: NodeJS.Timeout | null = null;
  /** Writes per transaction so far, and how many transactions waited (tests and benchmarks read it). */
  readonly stats = { writes: 0, commits: 0, delayed: 0 };

  constructor(db: Db, opts: GroupCommitOptions = {}) {
    this.#db = db;
    this.#busy = opts.busy ?? (() => false);
    this.#delayMs = opts.delayMs ?? COMMIT_DELAY_MS;
  }

  /** Runs `write` in the next shared transaction; resolves with its value once that commits. */
  write<T>(write: (q: Queryable) => Promise<T>): Promise<T> {
    if (!this.#db.dialect.capabilities.cheapSharedCommits) return write(this.#db);
    return new Promise<T>((resolve, reject) => {
      this.#queued.push({ write, resolve: resolve as (v: unknown) => void, reject });
      if (this.#queued.length === FULL_BATCH && this.#timer) {
        // A full batch gains nothing by waiting longer (a backlog is being read): commit it now.
        clearTimeout(this.#timer);
        this.#timer = null;
        setImmediate(this.#flushGuarded);
      }
      if (this.#queued.length > 1) return;
      // setImmediate, not a microtask: it collects the writes of every request read in this turn.
      if (this.#delayMs <= 0 || !this.#busy()) setImmediate(this.#flushGuarded);
      else {
        this.stats.delayed++;
        this.#timer = setTimeout(() => {
          this.#timer = null;
          this.#flushGuarded();
        }, this.#delayMs);
      }
    });
  }

  /** #flush as a timer callback: a write that throws instead of rejecting is a fault, logged. */
  readonly #flushGuarded = guard('group commit: flush', () => this.#flush());

  async #flush(): Promise<void> {
    const batch = this.#queued;
    this.#queued = [];
    this.stats.writes += batch.length;
    this.stats.commits++;
    if (batch.length === 1) {
      const [one] = batch;
      await one.write(this.#db).then(one.resolve, one.reject);
      return;
    }
    // A failing statement fails only its own write (SQLite rolls back just that statement); a
    // failed commit fails them all.
    const outcomes: { ok: boolean; v: unknown }[] = [];
    try {
      await this.#db.transaction(async (tx) => {
        for (const q of batch) {
          outcomes.push(
            await q.write(tx).then(
              (v) => ({ ok: true, v }),
              (v) => ({ ok: false, v }),
            ),
          );
        }
      });
    } catch (err) {
      for (const q of batch) q.reject(err);
      return;
    }
    for (const [i, q] of batch.entries()) {
      if (outcomes[i].ok) q.resolve(outcomes[i].v);
      else q.reject(outcomes[i].v);
    }
  }
}
