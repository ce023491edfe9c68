// The embedded default: node:sqlite (built into Node 24, no native addon). WAL with a 5 s busy
// timeout (spec "Process rules" 1). node:sqlite is synchronous, so a transaction that awaits must
// not let other callers' statements run inside it: a lock queues everyone else until it ends.
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { RowMemo } from './row-memo.ts';
import { type Db, type Dialect, type Param, type Queryable, runCommitted } from './types.ts';

const DIALECT: Dialect = {
  name: 'sqlite',
  capabilities: {
    blocksEventLoop: true,
    soleWriter: true,
    cheapSharedCommits: true,
    sharedByReplicas: false,
    writesInWith: false,
  },
  setupLockSql: null,
  clockMs: "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
};

/**
 * Prepared statements kept by their text. SQL built with a varying number of placeholders (batch
 * updates, IN lists) has a text per length, so past this many the oldest kept is dropped and
 * prepared again when next used.
 */
export const STATEMENT_CACHE = 512;

export class SqliteDb implements Db {
  readonly dialect = DIALECT;
  #db: DatabaseSync;
  #stmts = new Map<string, StatementSync>();
  #lock: Promise<void> | null = null;
  /** Rows may be kept because this process is the file's only writer (row-memo.ts). */
  readonly rows = DIALECT.capabilities.soleWriter ? new RowMemo() : undefined;

  constructor(path: string) {
    this.#db = new DatabaseSync(path, { timeout: 5000 });
    this.#db.exec('PRAGMA journal_mode = WAL');
    this.#db.exec('PRAGMA synchronous = NORMAL');
    this.#db.exec('PRAGMA foreign_keys = ON');
  }

  #stmt(sql: string): StatementSync {
    let s = this.#stmts.get(sql);
    if (!s) {
      s = this.#db.prepare(sql);
      if (this.#stmts.size >= STATEMENT_CACHE) this.#stmts.delete(this.#stmts.keys().next().value as string);
      this.#stmts.set(sql, s);
    }
    return s;
  }

  /** How many prepared statements are kept (tests). */
  get cachedStatements(): number {
    return this.#stmts.size;
  }

  #direct: Queryable = {
    all: async <T>(sql: string, params: readonly Param[] = []) => this.#stmt(sql).all(...params) as T[],
    get: async <T>(sql: string, params: readonly Param[] = []) =>
      this.#stmt(sql).get(...params) as T | undefined,
    run: async (sql: string, params: readonly Param[] = []) => {
      const r = this.#stmt(sql).run(...params);
      return { changes: Number(r.changes) };
    },
    afterCommit: (fn) => runCommitted([fn]),
    rows: this.rows,
  };

  async #idle(): Promise<void> {
    while (this.#lock) await this.#lock;
  }

  async all<T>(sql: string, params?: readonly Param[]): Promise<T[]> {
    if (this.#lock) await this.#idle();
    return this.#direct.all<T>(sql, params);
  }

  async get<T>(sql: string, params?: readonly Param[]): Promise<T | undefined> {
    if (this.#lock) await this.#idle();
    return this.#direct.get<T>(sql, params);
  }

  async run(sql: string, params?: readonly Param[]): Promise<{ changes: number }> {
    if (this.#lock) await this.#idle();
    return this.#direct.run(sql, params);
  }

  afterCommit(fn: () => void): void {
    runCommitted([fn]);
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    // Check and take the lock in the same continuation, so two waiters cannot both take it.
    while (this.#lock) await this.#lock;
    let release!: () => void;
    this.#lock = new Promise<void>((r) => {
      release = r;
    });
    try {
      this.#db.exec('BEGIN IMMEDIATE');
      const committed: (() => void)[] = [];
      try {
        const out = await fn({ ...this.#direct, afterCommit: (f) => committed.push(f) });
        this.#db.exec('COMMIT');
        runCommitted(committed);
        return out;
      } catch (err) {
        this.#db.exec('ROLLBACK');
        throw err;
      }
    } finally {
      this.#lock = null;
      release();
    }
  }

  async close(): Promise<void> {
    await this.#idle();
    this.#stmts.clear();
    if (this.#db.isOpen) this.#db.close();
  }
}
