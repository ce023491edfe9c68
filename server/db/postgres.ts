// Postgres for a `postgres://` DSN. Placeholders are rewritten from `?` to `$n` once per SQL text.
import pg from 'pg';
import { PgChannels } from './pg-channels.ts';
import { type Db, type Dialect, type Param, type Queryable, runCommitted } from './types.ts';

const DIALECT: Dialect = {
  name: 'postgres',
  capabilities: {
    blocksEventLoop: false,
    soleWriter: false,
    cheapSharedCommits: false,
    sharedByReplicas: true,
    writesInWith: true,
  },
  // An arbitrary key, the same in every replica.
  setupLockSql: 'SELECT pg_advisory_xact_lock(7566701)',
  clockMs: 'CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)',
};

/** `?` → `$1..$n`, leaving quoted strings alone. */
export function toPgPlaceholders(sql: string): string {
  let out = '';
  let n = 0;
  let quote: string | null = null;
  for (const ch of sql) {
    if (quote) {
      if (ch === quote) quote = null;
      out += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      out += ch;
    } else if (ch === '?') {
      out += `$${++n}`;
    } else out += ch;
  }
  return out;
}

/**
 * Each statement's rewritten text, kept per database (a pure function of the text, so never
 * stale) and bounded like SQLite's prepared statements: IN lists make a text per length.
 */
const REWRITES_MAX = 512;
class Rewrites {
  readonly #texts = new Map<string, string>();

  of(sql: string): string {
    let out = this.#texts.get(sql);
    if (out === undefined) {
      out = toPgPlaceholders(sql);
      if (this.#texts.size >= REWRITES_MAX) this.#texts.delete(this.#texts.keys().next().value as string);
      this.#texts.set(sql, out);
    }
    return out;
  }
}

/** Statements on `client`; `afterCommit` as given (at once on the pool, queued in a transaction). */
function over(
  client: pg.Pool | pg.PoolClient,
  afterCommit: Queryable['afterCommit'],
  texts: Rewrites,
): Queryable {
  return {
    afterCommit,
    all: async <T>(sql: string, params: readonly Param[] = []) =>
      (await client.query(texts.of(sql), params as unknown[])).rows as T[],
    get: async <T>(sql: string, params: readonly Param[] = []) =>
      (await client.query(texts.of(sql), params as unknown[])).rows[0] as T | undefined,
    run: async (sql: string, params: readonly Param[] = []) => ({
      changes: (await client.query(texts.of(sql), params as unknown[])).rowCount ?? 0,
    }),
  };
}

/** Connections to Postgres at once, per process (SVC_DB_POOL). */
export const DEFAULT_POOL_SIZE = 10;

export class PostgresDb implements Db {
  readonly dialect = DIALECT;
  #pool: pg.Pool;
  #q: Queryable;
  readonly #texts = new Rewrites();
  readonly channels: PgChannels;

  readonly poolSize: number;

  constructor(dsn: string, poolSize = DEFAULT_POOL_SIZE) {
    this.poolSize = poolSize;
    this.#pool = new pg.Pool({ connectionString: dsn, max: poolSize });
    this.channels = new PgChannels(dsn, this.#pool);
    // An idle client that loses its server must not crash the process.
    this.#pool.on('error', () => {});
    this.#q = over(this.#pool, (fn) => runCommitted([fn]), this.#texts);
  }

  all<T>(sql: string, params?: readonly Param[]): Promise<T[]> {
    return this.#q.all<T>(sql, params);
  }
  get<T>(sql: string, params?: readonly Param[]): Promise<T | undefined> {
    return this.#q.get<T>(sql, params);
  }
  run(sql: string, params?: readonly Param[]): Promise<{ changes: number }> {
    return this.#q.run(sql, params);
  }
  afterCommit(fn: () => void): void {
    this.#q.afterCommit(fn);
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    const client = await this.#pool.connect();
    try {
      await client.query('BEGIN');
      const committed: (() => void)[] = [];
      const out = await fn(over(client, (f) => committed.push(f), this.#texts));
      await client.query('COMMIT');
      runCommitted(committed);
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  async close(): Promise<void> {
    await this.channels.close();
    await this.#pool.end();
  }
}
