// Group commit: writes asked for in one turn share a transaction on SQLite, each
// resolves only once its row is committed, and one failing write fails only itself; while other
// writers are busy, a transaction waits for the writes of later turns too.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { dbTarget, forEachDialect } from '../../test/support/server.ts';
import { FULL_BATCH, GroupCommit } from './group-commit.ts';
import { openDb } from './open.ts';
import type { Db, Queryable } from './types.ts';

forEachDialect('group commit', (dialect) => {
  let db: Db;
  let cleanup = () => {};
  before(async () => {
    const t = await dbTarget(dialect);
    cleanup = t.cleanup;
    ({ db } = await openDb(t.target));
    await db.run('CREATE TABLE gc_rows (id TEXT PRIMARY KEY, n INTEGER NOT NULL)');
  });
  after(async () => {
    await db.close();
    cleanup();
  });

  const insert = (id: string, n: number) => (q: Queryable) =>
    q.run('INSERT INTO gc_rows (id, n) VALUES (?, ?)', [id, n]);
  const count = async (prefix: string) =>
    Number(
      (await db.get<{ c: number }>('SELECT COUNT(*) AS c FROM gc_rows WHERE id LIKE ?', [`${prefix}%`]))?.c,
    );

  test('every write is committed when it resolves; one turn is one transaction on SQLite', async () => {
    const gc = new GroupCommit(db);
    const writes = Array.from({ length: 20 }, (_, i) => gc.write(insert(`a${i}`, i)));
    const out = await Promise.all(writes);
    assert.deepEqual(
      out.map((r) => r.changes),
      writes.map(() => 1),
    );
    assert.equal(await count('a'), 20);
    if (dialect === 'sqlite') assert.deepEqual(gc.stats, { writes: 20, commits: 1, delayed: 0 });
    else assert.deepEqual(gc.stats, { writes: 0, commits: 0, delayed: 0 });
  });

  const nextTurn = () => new Promise<void>((r) => setImmediate(r));

  test('while others are busy, writes of later turns join the waiting transaction', async () => {
    // The delay only bounds the wait; nothing here depends on how long it takes.
    const gc = new GroupCommit(db, { busy: () => true, delayMs: 500 });
    const first = gc.write(insert('d0', 0));
    await nextTurn();
    const second = gc.write(insert('d1', 1));
    await nextTurn();
    const third = gc.write(insert('d2', 2));
    await Promise.all([first, second, third]);
    assert.equal(await count('d'), 3);
    if (dialect === 'sqlite') assert.deepEqual(gc.stats, { writes: 3, commits: 1, delayed: 1 });
  });

  test('a full batch is committed without waiting out the delay', async () => {
    const gc = new GroupCommit(db, { busy: () => true, delayMs: 60_000 });
    await Promise.all(Array.from({ length: FULL_BATCH }, (_, i) => gc.write(insert(`f${i}`, i))));
    assert.equal(await count('f'), FULL_BATCH);
    if (dialect === 'sqlite') assert.deepEqual(gc.stats, { writes: FULL_BATCH, commits: 1, delayed: 1 });
  });

  test('a lone writer does not wait: each turn commits on its own', async () => {
    const gc = new GroupCommit(db, { busy: () => false, delayMs: 60_000 });
    await gc.write(insert('e0', 0));
    await nextTurn();
    await gc.write(insert('e1', 1));
    assert.equal(await count('e'), 2);
    if (dialect === 'sqlite') assert.deepEqual(gc.stats, { writes: 2, commits: 2, delayed: 0 });
  });

  test('a failing write fails alone; the others in its turn are kept', async () => {
    const gc = new GroupCommit(db);
    await gc.write(insert('b0', 0));
    const [ok1, dup, ok2] = await Promise.allSettled([
      gc.write(insert('b1', 1)),
      gc.write(insert('b0', 9)),
      gc.write(insert('b2', 2)),
    ]);
    assert.equal(ok1.status, 'fulfilled');
    assert.equal(dup.status, 'rejected');
    assert.equal(ok2.status, 'fulfilled');
    assert.equal(await count('b'), 3);
    const b0 = await db.get<{ n: number }>('SELECT n FROM gc_rows WHERE id = ?', ['b0']);
    assert.equal(Number(b0?.n), 0);
  });

  test('a transaction in progress is waited for, not joined', async () => {
    const gc = new GroupCommit(db);
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const tx = db.transaction(async (t) => {
      await t.run('INSERT INTO gc_rows (id, n) VALUES (?, ?)', ['c0', 0]);
      await held;
      throw new Error('rolled back');
    });
    const w = gc.write(insert('c1', 1));
    release();
    await assert.rejects(tx, /rolled back/);
    await w;
    assert.equal(await count('c0'), 0);
    assert.equal(await count('c1'), 1);
  });
});
