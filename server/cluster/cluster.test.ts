// The shared rows of control-plane replicas on both engines: named leases (one holder at a time,
// renewal, release, takeover after a lapse, one winner among racing takers) and rate windows (no
// hit lost when many count at once, a new window once one ended, bounded cleanup).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { dbTarget, forEachDialect } from '../../test/support/server.ts';
import { openDb } from '../db/open.ts';
import type { Db } from '../db/types.ts';
import { Lease, leaseHolder, releaseLease, tryLease } from './leases.ts';
import { dropExpired, hitWindow, peekWindow, windowsOver } from './store.ts';

forEachDialect('cluster rows', (dialect) => {
  let db: Db;
  let cleanup = () => {};
  before(async () => {
    const t = await dbTarget(dialect);
    cleanup = t.cleanup;
    ({ db } = await openDb(t.target));
  });
  after(async () => {
    await db.close();
    cleanup();
  });

  test('a lease has one holder until it is released or lapses', async () => {
    const at = Date.parse('2030-01-01T00:00:00Z');
    assert.equal(await tryLease(db, 'job', 'r1', 10_000, at), true);
    assert.equal(await tryLease(db, 'job', 'r2', 10_000, at + 1), false);
    assert.equal(await tryLease(db, 'job', 'r1', 10_000, at + 5_000), true, 'the holder renews');
    assert.equal(await tryLease(db, 'job', 'r2', 10_000, at + 14_999), false, 'renewed: still live');
    assert.equal(await tryLease(db, 'job', 'r2', 10_000, at + 15_000), true, 'lapsed: taken over');
    assert.equal((await leaseHolder(db, 'job'))?.holder, 'r2');
    await releaseLease(db, 'job', 'r1');
    assert.equal((await leaseHolder(db, 'job'))?.holder, 'r2', 'only the holder releases');
    await releaseLease(db, 'job', 'r2');
    assert.equal(await leaseHolder(db, 'job'), undefined);
    assert.equal(await tryLease(db, 'job', 'r3', 10_000, at + 15_001), true, 'free again at once');
  });

  test('of many racing for a free lease, exactly one gets it', async () => {
    const got = await Promise.all(
      Array.from({ length: 12 }, (_, i) => tryLease(db, 'race', `r${i}`, 60_000)),
    );
    assert.equal(got.filter(Boolean).length, 1);
  });

  test('Lease.held renews only once half of it has run out', async () => {
    const lease = new Lease(db, 'renew', 'me', 10_000);
    const at = Date.parse('2031-01-01T00:00:00Z');
    assert.equal(await lease.held(at), true);
    const first = (await leaseHolder(db, 'renew'))?.until;
    assert.equal(await lease.held(at + 4_000), true);
    assert.equal((await leaseHolder(db, 'renew'))?.until, first, 'not written again');
    assert.equal(await lease.held(at + 6_000), true);
    assert.notEqual((await leaseHolder(db, 'renew'))?.until, first, 'renewed');
    await lease.release();
    assert.equal(await leaseHolder(db, 'renew'), undefined);
  });

  test('rate windows count every hit of racing callers, and start again after they end', async () => {
    const at = Date.parse('2032-01-01T00:00:00Z');
    const hits = await Promise.all(Array.from({ length: 20 }, () => hitWindow(db, 'k:1', 60_000, at)));
    assert.deepEqual(
      hits.map((h) => h.count).sort((x, y) => x - y),
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
    assert.equal(hits[0].resetAt, at + 60_000);
    assert.equal((await peekWindow(db, 'k:1', at + 59_999)).count, 20);
    assert.equal((await peekWindow(db, 'k:1', at + 60_000)).count, 0);
    const next = await hitWindow(db, 'k:1', 60_000, at + 60_000);
    assert.deepEqual(next, { count: 1, resetAt: at + 120_000 });
    await hitWindow(db, 'k:2', 60_000, at + 60_000);
    const over = await windowsOver(db, 'k:', 1, 10, at + 60_001);
    assert.deepEqual(over.map((o) => o.key).sort(), ['k:1', 'k:2']);
    assert.deepEqual(await windowsOver(db, 'k:', 2, 10, at + 60_001), []);
  });

  test('expired rows are deleted a bounded batch at a time', async () => {
    const at = Date.parse('2033-01-01T00:00:00Z');
    for (let i = 0; i < 7; i++) await hitWindow(db, `old:${i}`, 1000, at);
    const after = new Date(at + 2000).toISOString();
    assert.equal(await dropExpired(db, 'rate_windows', 'key', 'reset_at', after, 5), 5);
    assert.ok((await dropExpired(db, 'rate_windows', 'key', 'reset_at', after, 5)) >= 2);
    assert.deepEqual(await windowsOver(db, 'old:', 1, 10, at), []);
  });
});
