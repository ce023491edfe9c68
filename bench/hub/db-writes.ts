// What the hub's database writes cost, apart from everything else: the row writes of every command
// (insert and finish, the ack time carried by the finish; server/hosts/command-store.ts; the
// ack was once a third write, kept here as the baseline) and the heartbeat flush every 5 s
// (server/hosts/hub.ts), measured as the control plane does them and as proposed alternatives.
// CPU time per command is the figure that matters on a 2-core machine; wall time is shown too.
//   node bench/hub/db-writes.ts [--commands 20000] [--hosts 10000] [--db sqlite,postgres]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { parseArgs } from 'node:util';
import { newId, PREFIX } from '../../protocol/ids.ts';
import { openDb } from '../../server/db/open.ts';
import { type Db, now } from '../../server/db/types.ts';
import { finishCommand, insertCommand, markAcked } from '../../server/hosts/command-store.ts';
import { setLastSeen } from '../../server/hosts/store.ts';
import { createDatabase, startCluster } from '../../test/support/postgres.ts';
import { processTree, watch } from './measure.ts';
import { postmasterPid } from './proc.ts';

const { values } = parseArgs({
  options: {
    commands: { type: 'string', default: '20000' },
    hosts: { type: 'string', default: '10000' },
    db: { type: 'string', default: 'sqlite,postgres' },
  },
});
const COMMANDS = Number(values.commands);
const HOSTS = Number(values.hosts);
/** Commands in flight at once, as at 2,000/s with a few ms round trip. */
const CONCURRENCY = 8;
const PAYLOAD = { service: 'main', cmd: ['true'], timeout_sec: 20 };
const RESULT = { exit_code: 0, stdout: '', stderr: '' };

/** The Postgres cluster's processes, whose CPU is added when the run uses it. */
let dbPids: (() => number[]) | null = null;

async function timed(label: string, n: number, fn: () => Promise<void>): Promise<void> {
  const c0 = process.cpuUsage();
  const pg = dbPids ? watch(dbPids) : null;
  const t0 = performance.now();
  await fn();
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  const pgMs = pg ? (pg.stop().cpuPct * wall) / 100 : null;
  const per = (x: number) => ((x * 1000) / n).toFixed(1).padStart(7);
  process.stdout.write(
    `${label.padEnd(74)} ${per(wall)} µs wall ${per((c.user + c.system) / 1000)} µs CPU` +
      `${pgMs === null ? '' : ` + ${per(pgMs)} µs Postgres CPU`} per item (${n})\n`,
  );
}

/** Runs `one` for COMMANDS commands, CONCURRENCY at a time. */
async function commands(one: (id: string) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < COMMANDS) {
      next++;
      await one(newId(PREFIX.command));
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

const row = (id: string) => ({
  id,
  hostId: 'h1',
  envId: 'e1',
  teamId: 't1',
  kind: 'env.exec',
  payload: PAYLOAD,
});

async function commandWrites(db: Db): Promise<void> {
  await timed(
    `${db.dialect.name}: insert, ack, finish (before group commit and the deferred ack)`,
    COMMANDS,
    () =>
      commands(async (id) => {
        await insertCommand(db, row(id));
        await markAcked(db, id);
        await finishCommand(db, id, { ok: true, result: RESULT });
      }),
  );
  // The dispatcher writes the ack on its own only when no result came within ACK_WRITE_AFTER_MS.
  await timed(`${db.dialect.name}: insert, finish with acked_at (today)`, COMMANDS, () =>
    commands(async (id) => {
      await insertCommand(db, row(id));
      await finishCommand(db, id, { ok: true, result: RESULT }, now());
    }),
  );
}

async function seedHosts(db: Db): Promise<string[]> {
  const ids = Array.from({ length: HOSTS }, () => newId(PREFIX.host));
  await db.transaction(async (tx) => {
    await tx.run(`INSERT INTO teams (id, name, created_at) VALUES ('t1', 'bench', ?)`, [now()]);
    for (const id of ids) {
      await tx.run(
        `INSERT INTO hosts (id, team_id, name, status, created_at, capabilities, kind)
         VALUES (?, 't1', 'h', 'connected', ?, '{}', 'sidecar')`,
        [id, now()],
      );
    }
  });
  return ids;
}

/** Half the hosts heartbeat between two 5 s sweeps. */
async function heartbeatFlush(db: Db): Promise<void> {
  const ids = (await seedHosts(db)).slice(0, HOSTS / 2);
  const name = db.dialect.name;
  let blocked = 0;
  await timed(
    `${name}: flush ${ids.length} heartbeats, one UPDATE each, one transaction`,
    ids.length,
    async () => {
      const probe = eventLoopProbe();
      const at = now();
      await db.transaction(async (tx) => {
        for (const id of ids) await tx.run('UPDATE hosts SET last_seen_at = ? WHERE id = ?', [at, id]);
      });
      blocked = probe();
    },
  );
  process.stdout.write(`${''.padEnd(74)} longest event-loop stall ${blocked.toFixed(0)} ms\n`);
  await timed(`${name}: flush ${ids.length} heartbeats with setLastSeen (today)`, ids.length, async () => {
    const probe = eventLoopProbe();
    const at = now();
    await setLastSeen(
      db,
      ids.map((id) => [id, at]),
    );
    blocked = probe();
  });
  process.stdout.write(`${''.padEnd(74)} longest event-loop stall ${blocked.toFixed(0)} ms\n`);
  await timed(
    `${name}: flush ${ids.length} heartbeats, 500 (id, time) per UPDATE FROM VALUES`,
    ids.length,
    async () => {
      const probe = eventLoopProbe();
      const pairs = ids.map((id) => [id, now()]);
      await db.transaction(async (tx) => {
        for (let i = 0; i < pairs.length; i += 500) {
          const chunk = pairs.slice(i, i + 500);
          // Both dialects name a VALUES list's columns column1, column2; each host keeps its own time.
          await tx.run(
            `UPDATE hosts SET last_seen_at = v.column2 FROM (VALUES ${chunk.map(() => '(?, ?)').join(', ')}) AS v
           WHERE hosts.id = v.column1`,
            chunk.flat(),
          );
        }
      });
      blocked = probe();
    },
  );
  process.stdout.write(`${''.padEnd(74)} longest event-loop stall ${blocked.toFixed(0)} ms\n`);
  await timed(
    `${name}: flush ${ids.length} heartbeats, 500 ids per UPDATE (one time)`,
    ids.length,
    async () => {
      const probe = eventLoopProbe();
      const at = now();
      await db.transaction(async (tx) => {
        for (let i = 0; i < ids.length; i += 500) {
          const chunk = ids.slice(i, i + 500);
          await tx.run(`UPDATE hosts SET last_seen_at = ? WHERE id IN (${chunk.map(() => '?').join(',')})`, [
            at,
            ...chunk,
          ]);
        }
      });
      blocked = probe();
    },
  );
  process.stdout.write(`${''.padEnd(74)} longest event-loop stall ${blocked.toFixed(0)} ms\n`);
}

/** Measures the longest gap between 1 ms timers while it runs: how long the loop was blocked. */
function eventLoopProbe(): () => number {
  let last = performance.now();
  let worst = 0;
  const t = setInterval(() => {
    const n = performance.now();
    worst = Math.max(worst, n - last);
    last = n;
  }, 1);
  return () => {
    clearInterval(t);
    return Math.max(worst, performance.now() - last);
  };
}

/** The same three writes on a raw connection with `locking_mode = EXCLUSIVE` (one process owns the file). */
async function sqliteExclusive(path: string): Promise<void> {
  const db = new DatabaseSync(path, { timeout: 5000 });
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = NORMAL');
  db.exec('PRAGMA locking_mode = EXCLUSIVE');
  const ins = db.prepare(
    `INSERT INTO commands (id, host_id, env_id, team_id, kind, payload, status, created_at)
     VALUES (?, ?, ?, ?, ?, ?, 'sent', ?)`,
  );
  const ack = db.prepare(
    `UPDATE commands SET status = 'acked', acked_at = ? WHERE id = ? AND status = 'sent'`,
  );
  const fin = db.prepare(
    `UPDATE commands SET status = 'succeeded', result = ?, finished_at = ? WHERE id = ? AND finished_at IS NULL`,
  );
  const insert = (id: string) => ins.run(id, 'h1', 'e1', 't1', 'env.exec', JSON.stringify(PAYLOAD), now());
  await timed('sqlite: insert, ack, finish with locking_mode = EXCLUSIVE', COMMANDS, () =>
    commands(async (id) => {
      insert(id);
      await Promise.resolve();
      ack.run(now(), id);
      await Promise.resolve();
      fin.run(JSON.stringify(RESULT), now(), id);
    }),
  );
  await timed('sqlite: EXCLUSIVE, and the writes of 8 commands per transaction', COMMANDS, async () => {
    for (let i = 0; i < COMMANDS; i += 8) {
      const ids = Array.from({ length: 8 }, () => newId(PREFIX.command));
      for (const stage of [insert, (id: string) => ack.run(now(), id)]) {
        db.exec('BEGIN');
        for (const id of ids) stage(id);
        db.exec('COMMIT');
      }
      db.exec('BEGIN');
      for (const id of ids) fin.run(JSON.stringify(RESULT), now(), id);
      db.exec('COMMIT');
    }
  });
  db.close();
}

/**
 * The same three writes through pg with named statements: each connection parses and plans a
 * statement once, instead of once per query (what server/db/postgres.ts does today).
 */
async function postgresNamed(dsn: string): Promise<void> {
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({ connectionString: dsn, max: 10 });
  const q = (name: string, text: string, values: unknown[]) => pool.query({ name, text, values });
  await timed('postgres: insert, ack, finish as named prepared statements', COMMANDS, () =>
    commands(async (id) => {
      await q(
        'ins',
        `INSERT INTO commands (id, host_id, env_id, team_id, kind, payload, status, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, 'sent', $7)`,
        [id, 'h1', 'e1', 't1', 'env.exec', JSON.stringify(PAYLOAD), now()],
      );
      await q(
        'ack',
        `UPDATE commands SET status = 'acked', acked_at = $1 WHERE id = $2 AND status = 'sent'`,
        [now(), id],
      );
      await q(
        'fin',
        `UPDATE commands SET status = 'succeeded', result = $1, finished_at = $2 WHERE id = $3 AND finished_at IS NULL`,
        [JSON.stringify(RESULT), now(), id],
      );
    }),
  );
  await pool.end();
}

async function main(): Promise<void> {
  for (const kind of values.db.split(',')) {
    if (kind === 'sqlite') {
      const dir = mkdtempSync(join(tmpdir(), 'svc-bench-dbw-'));
      try {
        const path = join(dir, 'svc.db');
        const { db } = await openDb(path);
        await commandWrites(db);
        await heartbeatFlush(db);
        await db.close();
        await sqliteExclusive(path);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    } else {
      const cluster = await startCluster();
      try {
        const pm = postmasterPid(Number(new URL(cluster.dsn).port));
        if (pm) dbPids = () => processTree(pm);
        const dsn = await createDatabase(cluster.dsn, 'dbw');
        const { db } = await openDb(dsn);
        await commandWrites(db);
        await heartbeatFlush(db);
        await db.close();
        await postgresNamed(dsn);
      } finally {
        dbPids = null;
        cluster.stop();
      }
    }
  }
}

await main();
