import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { dbTarget, forEachDialect } from '../../test/support/server.ts';
import { tier } from '../../test/support/tiers.ts';
import { migrate } from './migrate.ts';
import { connect, openDb } from './open.ts';
import { toPgPlaceholders } from './postgres.ts';
import { MIGRATIONS } from './schema.ts';
import { SqliteDb, STATEMENT_CACHE } from './sqlite.ts';
import { type Db, isUniqueViolation } from './types.ts';

test('placeholders are rewritten outside quotes only', () => {
  assert.equal(toPgPlaceholders('SELECT ? , \'?\' , "a?" , ?'), 'SELECT $1 , \'?\' , "a?" , $2');
});

test('SQLite keeps at most STATEMENT_CACHE prepared statements; a dropped one is prepared again', async () => {
  const { target, cleanup } = await dbTarget('sqlite');
  const { db } = await openDb(target);
  try {
    assert.ok(db instanceof SqliteDb);
    assert.equal((await db.get<{ n: number }>('SELECT 0 AS n'))?.n, 0);
    for (let i = 1; i <= STATEMENT_CACHE + 50; i++) await db.get(`SELECT ${i} AS n`);
    assert.equal(db.cachedStatements, STATEMENT_CACHE);
    assert.equal((await db.get<{ n: number }>('SELECT 0 AS n'))?.n, 0);
    assert.equal(db.cachedStatements, STATEMENT_CACHE);
  } finally {
    await db.close();
    cleanup();
  }
});

forEachDialect('query layer', (dialect) => {
  let db: Db;
  let target: string;
  let cleanup = () => {};
  before(async () => {
    ({ target, cleanup } = await dbTarget(dialect));
    ({ db } = await openDb(target));
  });
  after(async () => {
    await db.close();
    cleanup();
  });

  test('migrations are idempotent on an existing database', async () => {
    const again = await migrate(db, MIGRATIONS);
    assert.deepEqual(
      again.map((s) => s.status),
      MIGRATIONS.map(() => 'already applied'),
    );
  });

  test('a failing migration reports per step and stops', async () => {
    const steps = await migrate(db, [
      ...MIGRATIONS,
      { version: 900, name: 'broken', up: () => ['CREATE TABLE nope ('] },
      { version: 901, name: 'after', up: () => ['CREATE TABLE later (x INTEGER)'] },
    ]);
    assert.equal(steps.at(-2)?.status, 'failed');
    assert.match(steps.at(-2)?.error ?? '', /syntax|incomplete|error/i);
    assert.equal(steps.at(-1)?.status, 'not run');
  });

  test('transactions commit and roll back', async () => {
    await db.transaction(async (tx) => {
      await tx.run('INSERT INTO teams (id, name, created_at) VALUES (?, ?, ?)', ['t1', 'one', 'x']);
    });
    await assert.rejects(
      db.transaction(async (tx) => {
        await tx.run('INSERT INTO teams (id, name, created_at) VALUES (?, ?, ?)', ['t2', 'two', 'x']);
        throw new Error('boom');
      }),
      /boom/,
    );
    const rows = await db.all<{ id: string }>('SELECT id FROM teams ORDER BY id');
    assert.deepEqual(
      rows.map((r) => r.id),
      ['t1'],
    );
  });

  test('afterCommit: at once outside a transaction, after COMMIT inside one, never on rollback', async () => {
    const heard: string[] = [];
    db.afterCommit(() => heard.push('direct'));
    assert.deepEqual(heard, ['direct']);
    await db.transaction(async (tx) => {
      tx.afterCommit(() => heard.push('committed'));
      tx.afterCommit(() => {
        throw new Error('a listener fails');
      });
      assert.deepEqual(heard, ['direct'], 'not before COMMIT');
    });
    assert.deepEqual(heard, ['direct', 'committed']);
    await assert.rejects(
      db.transaction(async (tx) => {
        tx.afterCommit(() => heard.push('rolled back'));
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.deepEqual(heard, ['direct', 'committed']);
  });

  test('a duplicate key is recognised by its error code, a different failure is not', async () => {
    await db.run('INSERT INTO teams (id, name, created_at) VALUES (?, ?, ?)', ['tu', 'u', 'x']);
    const dup = await db
      .run('INSERT INTO teams (id, name, created_at) VALUES (?, ?, ?)', ['tu', 'again', 'x'])
      .catch((e: unknown) => e);
    assert.equal(isUniqueViolation(dup), true);
    const other = await db.run('INSERT INTO no_such_table (x) VALUES (1)').catch((e: unknown) => e);
    assert.ok(other instanceof Error);
    assert.equal(isUniqueViolation(other), false);
    // The message alone proves nothing: only the code does.
    assert.equal(isUniqueViolation(new Error('UNIQUE constraint failed: teams.id')), false);
  });

  // node:sqlite is synchronous, so its transaction lock is ours to get right (Postgres isolates
  // transactions itself): only the SQLite run has this test.
  if (dialect !== 'sqlite') return;
  test('concurrent transactions never interleave (sqlite lock)', async () => {
    await db.run("INSERT INTO teams (id, name, created_at) VALUES ('c', '0', 'x')");
    const bump = () =>
      db.transaction(async (tx) => {
        const r = await tx.get<{ name: string }>("SELECT name FROM teams WHERE id = 'c'");
        await new Promise((res) => setTimeout(res, 2));
        await tx.run("UPDATE teams SET name = ? WHERE id = 'c'", [String(Number(r?.name) + 1)]);
      });
    await Promise.all(Array.from({ length: 10 }, bump));
    const r = await db.get<{ name: string }>("SELECT name FROM teams WHERE id = 'c'");
    assert.equal(r?.name, '10');
  });
});

test('replicas starting together on one fresh Postgres database each migrate it; every step is applied once', {
  skip: tier('postgres'),
}, async () => {
  const { target } = await dbTarget('postgres');
  const opened = await Promise.all([openDb(target), openDb(target), openDb(target)]);
  try {
    const applied = opened.map((o) => o.steps.filter((s) => s.status === 'applied').length);
    assert.deepEqual(
      opened.map((o) => o.steps.filter((s) => s.status === 'failed')),
      [[], [], []],
    );
    assert.equal(
      applied.reduce((a, b) => a + b, 0),
      MIGRATIONS.length,
      `each step applied by one replica: ${applied}`,
    );
    const rows = await opened[0].db.all('SELECT version FROM schema_migrations');
    assert.equal(rows.length, MIGRATIONS.length);
  } finally {
    await Promise.all(opened.map((o) => o.db.close()));
  }
});

forEachDialect('migration 16 (deployment owners)', (dialect) => {
  test('two running deployments of one environment from before it leave one running, the oldest', async () => {
    const { target, cleanup } = await dbTarget(dialect);
    const db = connect(target);
    try {
      const before16 = MIGRATIONS.filter((m) => m.version < 16);
      await migrate(db, before16);
      const row = (id: string, env: string, status: string, at: string) =>
        db.run(
          `INSERT INTO deployments (id, team_id, project_id, env_id, kind, status, created_at)
            VALUES (?, 't', 'p', ?, 'deploy', ?, ?)`,
          [id, env, status, at],
        );
      await row('dep_1', 'env_a', 'running', '2026-01-01T00:00:01.000Z');
      await row('dep_2', 'env_a', 'running', '2026-01-01T00:00:02.000Z');
      await row('dep_3', 'env_b', 'running', '2026-01-01T00:00:03.000Z');
      const steps = await migrate(db, MIGRATIONS);
      assert.equal(steps.find((s) => s.version === 16)?.status, 'applied', JSON.stringify(steps));
      const rows = await db.all<{ id: string; status: string; owner: string }>(
        'SELECT id, status, owner FROM deployments ORDER BY id',
      );
      assert.deepEqual(
        rows.map((r) => [r.id, r.status, r.owner]),
        [
          ['dep_1', 'running', ''],
          ['dep_2', 'pending', ''],
          ['dep_3', 'running', ''],
        ],
      );
    } finally {
      await db.close();
      cleanup();
    }
  });
});
