// Known hosts' hellos written together. When a replica dies, its thousands of hosts say hello to a
// survivor within about a second; a statement per hello would queue them all in the survivor's
// database pool, ahead of the first commands on those hosts. Here a lone hello is written at once,
// and hellos that arrive while earlier ones are being written go together in the next statement.
import { guard } from '../../shared/faults.ts';
import type { Db } from '../db/types.ts';
import { connectKnownHosts, type KnownHello, type KnownHost } from './store.ts';

/** Hellos in one statement at most (4 parameters each). */
export const HELLO_BATCH_MAX = 500;
/** Statements of hellos in flight at once: the pool's other connections stay for commands. */
export const HELLO_BATCHES_AT_ONCE = 2;

interface Entry {
  h: KnownHello;
  resolve: (k: KnownHost | undefined) => void;
  reject: (err: unknown) => void;
}

export class KnownHellos {
  #db: Db;
  #replicaId: string | undefined;
  #queued: Entry[] = [];
  #inFlight = 0;
  #scheduled = false;
  /** Batches written and the hellos in them (tests, benchmarks). */
  readonly stats = { batches: 0, hellos: 0 };

  /** With `replicaId`, each host's location is written with its hello. */
  constructor(db: Db, replicaId?: string) {
    this.#db = db;
    this.#replicaId = replicaId;
  }

  /**
   * connectKnownHost, in the next batch (one statement where WITH may write; elsewhere, SQLite,
   * the batch's hellos one after another). A host's hellos are written in the order they came.
   */
  readonly admit = (h: KnownHello): Promise<KnownHost | undefined> => {
    return new Promise((resolve, reject) => {
      this.#queued.push({ h, resolve, reject });
      this.#kick();
    });
  };

  /** The next statement goes out on the next turn (collecting that turn's hellos), if one may. */
  #kick(): void {
    if (this.#scheduled || this.#inFlight >= HELLO_BATCHES_AT_ONCE || this.#queued.length === 0) return;
    this.#scheduled = true;
    setImmediate(this.#flushGuarded);
  }

  readonly #flushGuarded = guard('known hellos: write', () => {
    this.#scheduled = false;
    void this.#flush();
  });

  async #flush(): Promise<void> {
    if (this.#inFlight >= HELLO_BATCHES_AT_ONCE) return;
    // A host twice in one statement would be written twice: its later hello waits for the next.
    const batch: Entry[] = [];
    const ids = new Set<string>();
    const later: Entry[] = [];
    for (const e of this.#queued) {
      if (batch.length < HELLO_BATCH_MAX && !ids.has(e.h.id)) {
        ids.add(e.h.id);
        batch.push(e);
      } else later.push(e);
    }
    this.#queued = later;
    if (batch.length === 0) return;
    this.#inFlight++;
    try {
      const known = await this.#write(batch.map((e) => e.h));
      for (const e of batch) e.resolve(known.get(e.h.id));
    } catch (err) {
      for (const e of batch) e.reject(err);
    } finally {
      this.#inFlight--;
      this.#kick();
    }
  }

  #write(hellos: KnownHello[]): Promise<Map<string, KnownHost>> {
    this.stats.batches++;
    this.stats.hellos += hellos.length;
    return connectKnownHosts(this.#db, hellos, this.#replicaId);
  }
}
