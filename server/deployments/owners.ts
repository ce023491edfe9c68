// Which replica runs which deployment, when several control-plane replicas share one database.
// Every unfinished deployment has an owner replica and a lease; the owner renews the leases of all
// its deployments on one timer (one UPDATE), and a replica whose deployment was adopted by another
// (its lease had lapsed: this process stalled or lost the database) stops that run. On the same
// tick each replica looks for deployments whose lease lapsed (their owner died) and adopts them,
// one replica each. A deployment starts by claiming its environment (lease-store.ts): it waits
// while another deployment of the environment runs anywhere.
// On a database only this process writes (SQLite) there is one replica: no timer, and the engine's
// in-process queue orders deployments of one environment.
import { guard } from '../../shared/faults.ts';
import type { Db } from '../db/types.ts';
import { now } from '../db/types.ts';
import {
  claimEnvironment,
  lapsedDeployments,
  ownedByOthers,
  renewLeases,
  type Unowned,
} from './lease-store.ts';

/** How long a replica's deployment lease lasts without a renewal (SVC_DEPLOY_LEASE). */
export const DEPLOY_LEASE_MS = 30_000;

/** Why a run stopped: another replica owns its deployment now. */
export class LeaseLost extends Error {}

/** Throws when another replica adopted the deployment: from then on it writes, this one does not. */
export function fence(lost: AbortSignal): void {
  if (lost.aborted) throw lost.reason instanceof Error ? lost.reason : new LeaseLost('lease lost');
}

export class Ownership {
  readonly replica: string;
  readonly leaseMs: number;
  /** How often a deployment waiting for its environment asks again (it is also woken locally). */
  claimPollMs = 500;
  /** How many times each deployment waiting for its environment found it held (tests wait on it). */
  readonly waits = new Map<string, number>();
  #db: Db;
  #log: { warn(obj: object, msg: string): void };
  /** The deployments this replica runs or waits to run, each with what stops it when it is lost. */
  #runs = new Map<string, AbortController>();
  #wakers = new Map<string, Set<() => void>>();
  #timer: NodeJS.Timeout | null = null;
  #ticking = false;
  #closed = new AbortController();

  constructor(db: Db, replica: string, leaseMs: number, log: { warn(obj: object, msg: string): void }) {
    this.#db = db;
    this.replica = replica;
    this.leaseMs = leaseMs;
    this.#log = log;
  }

  /** Whether other replicas may share the database (then leases and claims in order are needed). */
  get shared(): boolean {
    return !this.#db.dialect.capabilities.soleWriter;
  }

  /** A new lease's end; none on a sole writer (nothing else could adopt). */
  until(): string | null {
    return this.shared ? new Date(Date.now() + this.leaseMs).toISOString() : null;
  }

  /** Starts tracking a run; its signal aborts when another replica adopted the deployment. */
  track(id: string): AbortSignal {
    const c = new AbortController();
    this.#runs.set(id, c);
    return c.signal;
  }

  untrack(id: string): void {
    this.#runs.delete(id);
    this.waits.delete(id);
  }

  /** Whether this replica runs (or waits to run) the deployment. */
  runs(id: string): boolean {
    return this.#runs.has(id);
  }

  /**
   * Waits until the deployment holds its environment (it is `running`); false when the run must
   * not go on (lost to another replica, or this replica is closing).
   */
  async claim(id: string, envId: string, lost: AbortSignal): Promise<boolean> {
    for (;;) {
      if (lost.aborted || this.#closed.signal.aborted) return false;
      if (await claimEnvironment(this.#db, id, this.replica, this.until(), this.shared)) return true;
      // A sole writer's queue let this deployment go: nothing else can hold its environment.
      if (!this.shared) throw new Error('the environment is held by another deployment');
      if (this.waits.get(id) === undefined)
        this.#log.warn(
          { deployment: id, env: envId },
          'deployment waits for another deployment of its environment',
        );
      this.waits.set(id, (this.waits.get(id) ?? 0) + 1);
      await this.#wait(envId, lost);
    }
  }

  /** Lets deployments of `envId` waiting on this replica try again now (one of its deployments ended). */
  wake(envId: string): void {
    for (const w of this.#wakers.get(envId) ?? []) w();
  }

  #wait(envId: string, lost: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const set = this.#wakers.get(envId) ?? new Set<() => void>();
      this.#wakers.set(envId, set);
      const done = () => {
        clearTimeout(timer);
        lost.removeEventListener('abort', done);
        this.#closed.signal.removeEventListener('abort', done);
        set.delete(done);
        if (set.size === 0 && this.#wakers.get(envId) === set) this.#wakers.delete(envId);
        resolve();
      };
      const timer = setTimeout(done, this.claimPollMs);
      set.add(done);
      lost.addEventListener('abort', done);
      this.#closed.signal.addEventListener('abort', done);
    });
  }

  /**
   * Renews this replica's leases and adopts lapsed deployments every third of a lease, handing
   * each adopted one to `adopt`. Nothing on a sole writer.
   */
  start(adopt: (rows: Unowned[]) => Promise<void>): void {
    if (!this.shared || this.#timer) return;
    const tick = () => {
      if (this.#ticking || this.#closed.signal.aborted) return;
      this.#ticking = true;
      this.#tick(adopt)
        .catch((err: unknown) =>
          this.#log.warn({ err, replica: this.replica }, 'deployment leases: tick failed'),
        )
        .finally(() => {
          this.#ticking = false;
        });
    };
    this.#timer = setInterval(
      guard('deployment leases: tick', tick),
      Math.max(1, Math.floor(this.leaseMs / 3)),
    );
    this.#timer.unref();
  }

  async #tick(adopt: (rows: Unowned[]) => Promise<void>): Promise<void> {
    const owned = await renewLeases(this.#db, this.replica, this.until() as string);
    const missing = [...this.#runs.keys()].filter((id) => !owned.has(id));
    for (const id of await ownedByOthers(this.#db, missing, this.replica)) {
      this.#log.warn(
        { deployment: id, replica: this.replica },
        'another replica adopted a deployment: stopping it here',
      );
      this.#runs.get(id)?.abort(new LeaseLost('another control-plane replica adopted this deployment'));
    }
    const lapsed = await lapsedDeployments(this.#db, now());
    if (lapsed.length) await adopt(lapsed);
  }

  /** Stops renewing (the leases lapse and other replicas adopt what is left) and ends every wait. */
  close(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.#closed.abort();
  }
}
