// This process as one replica among those sharing the database: a row with a lease its heartbeat
// renews, so the others can tell it is alive and, once the lease lapses, take over what it held
// (fail the commands it waited for, mark the hosts it held unreachable). On a database only one
// replica may use (SQLite), a second one is refused at start while the first one's lease holds;
// a lease left by a killed process does not block a restart (it lapses, and on the same machine a
// holder whose pid no longer runs is stale at once).
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { newId, PREFIX } from '../../protocol/ids.ts';
import { guard } from '../../shared/faults.ts';
import type { Db } from '../db/types.ts';
import { failCommandsOf } from '../hosts/command-store.ts';
import {
  insertReplica,
  type ReplicaRow,
  removeReplica,
  renewReplica,
  replicas,
  setReplicaUrl,
} from './replica-store.ts';

export interface ReplicaTiming {
  /** How often the lease is renewed (and dead replicas looked for). */
  heartbeatMs: number;
  /** How long a lease lasts past each renewal: a replica silent this long is dead to the others. */
  leaseMs: number;
}

export const REPLICA_TIMING: ReplicaTiming = { heartbeatMs: 2_000, leaseMs: 10_000 };

/** A second replica on a database that supports one (the message says what to do instead). */
export class ReplicaRefused extends Error {}

export interface ReplicaLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface ReplicaTick {
  /** Live replicas other than this one, by id. */
  live: Set<string>;
  /** Replicas found dead on this tick, with the hosts they held. */
  dead: { id: string; hosts: string[] }[];
  /** This replica's own row had been taken away (it was silent past its lease) and was made again. */
  revived: boolean;
}

export class Replica {
  readonly id = newId(PREFIX.replica);
  readonly timing: ReplicaTiming;
  #db: Db;
  #log: ReplicaLogger;
  #timer: NodeJS.Timeout | null = null;
  #ticking: Promise<void> | null = null;
  #onTick: ((t: ReplicaTick) => Promise<void> | void)[] = [];
  /** Live replicas other than this one, as of the last tick. */
  live = new Set<string>();

  constructor(db: Db, log: ReplicaLogger, timing: Partial<ReplicaTiming> = {}) {
    this.#db = db;
    this.#log = log;
    this.timing = { ...REPLICA_TIMING, ...timing };
  }

  /**
   * Registers this replica. Throws ReplicaRefused on a database for one replica while another live
   * one holds it; dead replicas found now are removed first (and what they waited for failed).
   */
  async register(): Promise<void> {
    const me = { hostname: hostname(), pid: process.pid };
    const others = await replicas(this.#db);
    for (const r of others) {
      if (r.live && !stale(r, me)) {
        if (this.#db.dialect.capabilities.sharedByReplicas) continue;
        throw new ReplicaRefused(
          `another replica (${r.id}, pid ${r.pid} on ${r.hostname || 'an unknown host'}) holds this database ` +
            `(its lease runs until ${new Date(r.lease_until).toISOString()}): SQLite supports one replica; ` +
            'use Postgres for several',
        );
      }
      await this.#bury(r.id, r.live ? 'its process is gone' : 'its lease lapsed');
    }
    await insertReplica(this.#db, { id: this.id, ...me, leaseMs: this.timing.leaseMs });
    this.live = new Set(others.filter((r) => r.live && !stale(r, me)).map((r) => r.id));
  }

  /** The address it serves on (for operators reading the table). */
  setUrl(url: string): Promise<void> {
    return setReplicaUrl(this.#db, this.id, url);
  }

  /** `fn` runs after each heartbeat with what it found (guarded; one tick at a time). */
  onTick(fn: (t: ReplicaTick) => Promise<void> | void): void {
    this.#onTick.push(fn);
  }

  start(): void {
    this.#timer ??= setInterval(
      guard('replica: heartbeat', () => this.tick()),
      this.timing.heartbeatMs,
    );
    this.#timer.unref();
  }

  /** One heartbeat now (also what the timer runs); a tick still running is joined, not doubled. */
  tick(): Promise<void> {
    this.#ticking ??= this.#tick()
      .catch((err) => this.#log.warn({ err: (err as Error).message }, 'replica heartbeat failed'))
      .finally(() => {
        this.#ticking = null;
      });
    return this.#ticking;
  }

  async #tick(): Promise<void> {
    let revived = false;
    if (!(await renewReplica(this.#db, this.id, this.timing.leaseMs))) {
      // Silent past its lease (a stalled loop, a lost database): the others have failed what it
      // waited for. It goes on as the same replica, and its holders put their hosts back.
      this.#log.warn({ replica: this.id }, 'this replica was taken for dead; registering again');
      await insertReplica(this.#db, {
        id: this.id,
        hostname: hostname(),
        pid: process.pid,
        leaseMs: this.timing.leaseMs,
      });
      revived = true;
    }
    const all = await replicas(this.#db);
    const dead: ReplicaTick['dead'] = [];
    for (const r of all) {
      if (r.id === this.id || r.live) continue;
      const hosts = await this.#bury(r.id, 'its lease lapsed');
      dead.push({ id: r.id, hosts });
    }
    this.live = new Set(all.filter((r) => r.live && r.id !== this.id).map((r) => r.id));
    for (const fn of this.#onTick) await fn({ live: this.live, dead, revived });
  }

  /** What a dead replica leaves: its waited-for commands fail, its hosts are unreachable. */
  async #bury(id: string, why: string): Promise<string[]> {
    const failed = await failCommandsOf(
      this.#db,
      id,
      `the control-plane replica waiting for it stopped (${why})`,
    );
    const hosts = await removeReplica(this.#db, id);
    this.#log.warn({ replica: id, why, failed_commands: failed, hosts: hosts.length }, 'a replica is gone');
    return hosts;
  }

  /** Stops the heartbeat; `clean` also removes the row, so the others need not wait for the lease. */
  async stop(clean: boolean): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#ticking;
    if (clean) await removeReplica(this.#db, this.id).catch(() => []);
  }
}

/** A live-looking row on this machine whose process no longer runs: a killed predecessor. */
function stale(r: ReplicaRow, me: { hostname: string; pid: number }): boolean {
  if (r.hostname !== me.hostname) return false;
  if (r.pid === me.pid) return false;
  try {
    process.kill(r.pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
  // Killed but not yet reaped by its parent (a zombie) is gone too.
  try {
    const stat = readFileSync(`/proc/${r.pid}/stat`, 'latin1');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
  } catch {
    return false;
  }
}
