// Rows kept in memory for a hot read path, owned by one database handle (so two databases in one
// process never share rows). Only a database whose every write passes through this process can
// offer it (the embedded SQLite file): with Postgres, other replicas write too, and a kept row
// could be stale for as long as it is kept, so there is none and readers go to the database.
//
// How a kept row stays right: writers `forget` a key before and after they write it, and a read
// that raced a write (the generation moved while it read) is not kept. Reads through the Db wait
// for open transactions, so nothing uncommitted is kept; the short bound covers anything else
// that writes the file.

export const ROW_MEMO_MS = 1000;
export const ROW_MEMO_MAX = 10_000;

export class RowMemo {
  readonly #rows = new Map<string, { row: unknown; until: number }>();
  #generation = 0;

  /** Drops `key` and fails every read of any key in flight now (it may have read the old row). */
  forget(key: string): void {
    this.#rows.delete(key);
    this.#generation++;
  }

  /** Runs `write` with `key` forgotten before and after it. */
  async changing<T>(key: string, write: () => Promise<T>): Promise<T> {
    this.forget(key);
    try {
      return await write();
    } finally {
      this.forget(key);
    }
  }

  /** The kept row of `key`, or what `load` reads (kept unless a write raced it). */
  async read<R>(key: string, load: () => Promise<R | undefined>): Promise<R | undefined> {
    const at = Date.now();
    const kept = this.#rows.get(key);
    if (kept && kept.until > at) return kept.row as R;
    const gen = this.#generation;
    const row = await load();
    if (row === undefined) return undefined;
    if (gen === this.#generation) {
      if (this.#rows.size >= ROW_MEMO_MAX) this.#rows.clear();
      this.#rows.set(key, { row, until: at + ROW_MEMO_MS });
    }
    return row;
  }
}
