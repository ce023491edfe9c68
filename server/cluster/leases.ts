// Named leases: a periodic job that must run on one control-plane replica at a time (the warm
// pool's refill, the uploads sweep) holds a row `leases (name, holder, until)`. Taking or renewing
// it is one conditional UPSERT, atomic on both engines: it succeeds when the row is missing, is
// this holder's, or has lapsed. A holder that dies stops renewing and another replica takes the job
// over once `until` has passed. Times are the replicas' clocks (kept by NTP); a lease is many
// seconds long, so a skew of a few hundred milliseconds only shortens or lengthens a takeover.
import type { Db } from '../db/types.ts';
import { releaseLease, tryLease } from './store.ts';

export { leaseHolder, releaseLease, tryLease } from './store.ts';

/**
 * One named lease as seen by one replica. `held()` renews it when half of it has run out (so a
 * job ticking every second writes the row every few seconds, not every tick) and says whether this
 * replica may run the job now; `release()` gives it up on close.
 */
export class Lease {
  readonly name: string;
  readonly holder: string;
  readonly ttlMs: number;
  readonly #db: Db;
  /** Until when this replica knows it holds the lease (0: it does not). */
  #until = 0;

  constructor(db: Db, name: string, holder: string, ttlMs: number) {
    this.#db = db;
    this.name = name;
    this.holder = holder;
    this.ttlMs = ttlMs;
  }

  async held(at = Date.now()): Promise<boolean> {
    if (this.#until - at > this.ttlMs / 2) return true;
    const ok = await tryLease(this.#db, this.name, this.holder, this.ttlMs, at);
    this.#until = ok ? at + this.ttlMs : 0;
    return ok;
  }

  async release(): Promise<void> {
    this.#until = 0;
    await releaseLease(this.#db, this.name, this.holder);
  }
}
