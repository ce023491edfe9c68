// Preloaded into a replica by bench/replicas/hub.ts --pool-probe (NODE_OPTIONS=--import): where a
// replica's time goes after a failover. Every 100 ms it appends one line to the file named by
// SVC_BENCH_POOL_PROBE: the Postgres pool's queries waiting for a connection (the pool holds 10),
// the queries answered in the slice and their time from the call to the answer (the wait for a
// connection included), and how late a 10 ms timer ran (a busy or starved event loop).
import { appendFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import pg from 'pg';

export interface PoolSample {
  /** Epoch ms at the end of the slice. */
  t: number;
  waiting: number;
  total: number;
  done: number;
  msSum: number;
  msMax: number;
  /** Event-loop delay in the slice, max, ms. */
  loopMax: number;
}

/** Statements answered in one second (ending at `t`), by their text's first 90 characters: [count, ms]. */
export interface SqlSample {
  t: number;
  sql: Record<string, [number, number]>;
}

const file = process.env.SVC_BENCH_POOL_PROBE;
if (file) {
  const pools = new Set<pg.Pool>();
  let slice = { done: 0, msSum: 0, msMax: 0 };
  let sql: SqlSample['sql'] = {};
  const query = pg.Pool.prototype.query as (...args: unknown[]) => unknown;
  // Only the promise form is timed: the server never passes a callback.
  pg.Pool.prototype.query = function (this: pg.Pool, ...args: unknown[]) {
    pools.add(this);
    const out = query.apply(this, args);
    if (!(out instanceof Promise)) return out;
    const t0 = performance.now();
    const q = args[0];
    const text = (typeof q === 'string' ? q : String((q as { text?: string })?.text ?? '?'))
      .replace(/\s+/g, ' ')
      .slice(0, 90);
    const done = () => {
      const ms = performance.now() - t0;
      const e = sql[text] ?? [0, 0];
      e[0]++;
      e[1] += ms;
      sql[text] = e;
      slice.done++;
      slice.msSum += ms;
      slice.msMax = Math.max(slice.msMax, ms);
    };
    out.then(done, done);
    return out;
  } as typeof pg.Pool.prototype.query;
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  setInterval(() => {
    let waiting = 0;
    let total = 0;
    for (const p of pools) {
      waiting += p.waitingCount;
      total += p.totalCount;
    }
    const s: PoolSample = { t: Date.now(), waiting, total, ...slice, loopMax: loop.max / 1e6 };
    slice = { done: 0, msSum: 0, msMax: 0 };
    loop.reset();
    appendFileSync(file, `${JSON.stringify(s)}\n`);
  }, 100).unref();
  setInterval(() => {
    appendFileSync(`${file}.sql`, `${JSON.stringify({ t: Date.now(), sql } satisfies SqlSample)}\n`);
    sql = {};
  }, 1000).unref();
}
