// One query layer over both storage engines. SQL is written once with `?` placeholders and
// portable types (TEXT, INTEGER); dialect differences are capability flags, not branches
// scattered through repositories.
import { isoNow } from '../../protocol/time.ts';
import type { RowMemo } from './row-memo.ts';

export type Param = string | number | bigint | null;

/**
 * What an engine can do, declared by its dialect and read by the code that depends on it (stores,
 * group commit), which never compares dialect names.
 */
export interface Capabilities {
  /**
   * Statements run synchronously on the event loop (the embedded engine): a long batch of writes is
   * cut into small chunks that yield to I/O between them, or it stalls every request meanwhile.
   */
  blocksEventLoop: boolean;
  /**
   * Only this process writes the database (an embedded file), so a process-local cache that forgets
   * a row before and after each write of it sees every change; a shared server can be written by
   * others (another replica, an operator), so there a cache could serve stale rows.
   */
  soleWriter: boolean;
  /**
   * A transaction costs one local commit, not network round trips: small writes asked for in the
   * same turn of the event loop gain by sharing one (group commit). Without it, writes go straight
   * through.
   */
  cheapSharedCommits: boolean;
  /**
   * Several control-plane processes (replicas) may share the database: they coordinate through it
   * and tell each other of changes on `Db.channels`. Without it, one replica holds the database
   * and everything stays in-process (a second one is refused at start).
   */
  sharedByReplicas: boolean;
  /**
   * A WITH clause may hold INSERT and UPDATE statements whose rows the rest of the statement uses
   * (Postgres): several writes that go together cost one round trip. Without it (SQLite, where a
   * statement is a local call anyway) they are separate statements.
   */
  writesInWith: boolean;
}

export interface Dialect {
  name: 'sqlite' | 'postgres';
  capabilities: Capabilities;
  /**
   * A statement that, inside a transaction, waits for and holds until its end the one lock that
   * serialises setting a database up (schema migrations, the first team) across processes:
   * replicas starting together on one server. Null where one process opens the database anyway.
   */
  setupLockSql: string | null;
  /**
   * A SQL expression for the database's clock in milliseconds since the epoch (an integer):
   * leases between replicas are measured on one clock, the database's, not on each machine's.
   */
  clockMs: string;
}

/** A notification payload's limit (Postgres allows just under 8,000 bytes; headroom kept). */
export const MAX_NOTIFICATION_BYTES = 7 * 1024;

/**
 * Notifications between replicas (LISTEN/NOTIFY): present only on an engine `sharedByReplicas`.
 * Listening holds one dedicated connection, connected again (with backoff) when it drops;
 * notifications sent while it was down may be lost, so a listener re-reads what it waits for in
 * `onReconnect` (rows stay the truth).
 */
export interface Channels {
  /** Subscribes `fn` to `channel` (a lowercase identifier); resolves once the database listens. */
  listen(channel: string, fn: (payload: string) => void): Promise<void>;
  /**
   * Queues one notification (at most MAX_NOTIFICATION_BYTES, else it throws); the notifications of
   * one turn go in one round trip, in the order queued. Delivery is at most once.
   */
  notify(channel: string, payload: string): void;
  /** `fn` runs each time the listening connection is established again after it dropped. */
  onReconnect(fn: () => void): void;
  close(): Promise<void>;
}

export interface Queryable {
  all<T = Record<string, unknown>>(sql: string, params?: readonly Param[]): Promise<T[]>;
  get<T = Record<string, unknown>>(sql: string, params?: readonly Param[]): Promise<T | undefined>;
  run(sql: string, params?: readonly Param[]): Promise<{ changes: number }>;
  /**
   * Runs `fn` once what was written through this handle is committed: at once outside a
   * transaction, after COMMIT inside one, never when it rolls back. A throw in `fn` is dropped
   * (the write is done; a listener's failure is not the writer's).
   */
  afterCommit(fn: () => void): void;
  /**
   * Rows kept in memory for hot reads, present only on a `soleWriter` engine (every write passes
   * through this process); the same memo on the database and on its transactions. See row-memo.ts.
   */
  readonly rows?: RowMemo;
}

export interface Db extends Queryable {
  readonly dialect: Dialect;
  /** Notifications between replicas; present only when the dialect is `sharedByReplicas`. */
  readonly channels?: Channels;
  /** Runs `fn` in one transaction; commits when it resolves, rolls back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** Calls each of `fns`, none of their throws escaping: they run after a commit, past any caller. */
export function runCommitted(fns: readonly (() => void)[]): void {
  for (const fn of fns) {
    try {
      fn();
    } catch {
      // See Queryable.afterCommit.
    }
  }
}

/** Booleans are stored as 0/1 in both dialects. */
export const bool = (v: boolean): number => (v ? 1 : 0);
export const isTrue = (v: unknown): boolean => v === 1 || v === '1' || v === true;

export function json(value: unknown): string {
  return JSON.stringify(value ?? null);
}

export function parseJson<T>(text: unknown, fallback: T): T {
  if (typeof text !== 'string' || text === '') return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback;
  }
}

/** The time now as ISO 8601 text (formatted once per millisecond). */
export const now = (): string => isoNow();

/**
 * `UPDATE <table> SET <only the defined columns> WHERE <where>`: the one way repositories apply
 * a partial patch. Table and column names come from code, never from input.
 */
export async function updateColumns(
  q: Queryable,
  table: string,
  cols: Record<string, Param | undefined>,
  where: string,
  whereParams: readonly Param[],
): Promise<number> {
  const set = Object.entries(cols).filter(([, v]) => v !== undefined);
  if (set.length === 0) return 0;
  const r = await q.run(`UPDATE ${table} SET ${set.map(([c]) => `${c} = ?`).join(', ')} WHERE ${where}`, [
    ...set.map(([, v]) => v as Param),
    ...whereParams,
  ]);
  return r.changes;
}

/** True for a UNIQUE/PRIMARY KEY conflict in either dialect (SQLite message, Postgres 23505). */
/** SQLite extended result codes (node:sqlite puts them in `errcode`): UNIQUE and PRIMARY KEY. */
const SQLITE_CONSTRAINT_UNIQUE = 2067;
const SQLITE_CONSTRAINT_PRIMARYKEY = 1555;
/** Postgres SQLSTATE (pg puts it in `code`): unique_violation. */
const PG_UNIQUE_VIOLATION = '23505';

export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: unknown; errcode?: unknown } | null;
  if (!e) return false;
  if (e.code === PG_UNIQUE_VIOLATION) return true;
  return e.errcode === SQLITE_CONSTRAINT_UNIQUE || e.errcode === SQLITE_CONSTRAINT_PRIMARYKEY;
}
