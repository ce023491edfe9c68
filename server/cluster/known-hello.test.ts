// A known host's hello on a replica: its secret checked, the host connected with the hello's
// capabilities and its location written, in one statement where the engine allows it (when a
// replica dies, every host it held says hello to the survivors at once, and each statement waits
// in the survivor's pool); and the replica's order of a host's location changes: an earlier
// stream's end never takes back the location of a newer stream admitted but not yet open.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { watchAlive } from '../../test/support/alive.ts';
import { dbTarget, forEachDialect } from '../../test/support/server.ts';
import { openDb } from '../db/open.ts';
import type { Db } from '../db/types.ts';
import { HELLO_BATCHES_AT_ONCE, KnownHellos } from '../hosts/known-hellos.ts';
import { connectKnownHost, type HostRow, insertHost } from '../hosts/store.ts';
import { hashSecret } from '../identity/secrets.ts';
import { bootstrap } from '../identity/store.ts';
import { Cluster } from './cluster.ts';

/** `db`, counting the statements sent through it. */
function counting(db: Db): { db: Db; count: () => number } {
  let n = 0;
  const proxy = new Proxy(db, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (typeof v !== 'function') return v;
      if (prop === 'get' || prop === 'all' || prop === 'run')
        return (...args: unknown[]) => {
          n++;
          return v.apply(target, args);
        };
      return v.bind(target);
    },
  });
  return { db: proxy, count: () => n };
}

forEachDialect('a known host says hello', (dialect) => {
  let db: Db;
  let teamId: string;
  let cleanup = () => {};
  const quiet = { info: () => {}, warn: () => {} };
  before(async () => {
    const t = await dbTarget(dialect);
    cleanup = t.cleanup;
    ({ db } = await openDb(t.target));
    teamId = (await bootstrap(db, 'default', ''))?.team.ID as string;
  });
  after(async () => {
    await db.close();
    cleanup();
  });

  const host = (caps: Record<string, unknown>, kind = 'sidecar') =>
    insertHost(db, {
      teamId,
      cloudId: 'cloud_1',
      name: 'h',
      status: 'unreachable',
      secretHash: hashSecret('dhs_right'),
      capabilities: caps,
      kind,
    });
  const row = (id: string) => db.get<HostRow>('SELECT * FROM hosts WHERE id = ?', [id]);
  // A plain object (SQLite's rows have no prototype), or undefined.
  const location = async (id: string) => {
    const r = await db.get<{ replica_id: string; team_id: string; cloud_id: string }>(
      'SELECT replica_id, team_id, cloud_id FROM host_locations WHERE host_id = ?',
      [id],
    );
    return r && { ...r };
  };

  test('the right secret connects it, records the capabilities and where it is; one statement where WITH may write', async () => {
    const h = await host({ hostname: 'before' });
    await db.run(
      "INSERT INTO host_locations (host_id, replica_id, team_id, cloud_id, since) VALUES (?, 'rep_dead', ?, 'cloud_1', ?)",
      [h.ID, teamId, '2030-01-01T00:00:00.000Z'],
    );
    const c = counting(db);
    const at = '2030-01-02T00:00:00.000Z';
    const k = await connectKnownHost(c.db, {
      id: h.ID,
      secretHash: hashSecret('dhs_right'),
      at,
      capabilities: { hostname: 'after' },
      replicaId: 'rep_here',
    });
    assert.deepEqual(k, { teamId, cloudId: 'cloud_1', recorded: JSON.stringify({ hostname: 'before' }) });
    assert.equal(c.count(), db.dialect.capabilities.writesInWith ? 1 : 3);
    const r = await row(h.ID);
    assert.equal(r?.status, 'connected');
    assert.equal(r?.last_seen_at, at);
    assert.deepEqual(JSON.parse(r?.capabilities ?? ''), { hostname: 'after' });
    assert.deepEqual(await location(h.ID), { replica_id: 'rep_here', team_id: teamId, cloud_id: 'cloud_1' });

    // No capabilities in the hello: the recorded ones stay; without a replica no location is written.
    const again = await connectKnownHost(db, { id: h.ID, secretHash: hashSecret('dhs_right'), at });
    assert.equal(again?.recorded, JSON.stringify({ hostname: 'after' }));
    assert.deepEqual(JSON.parse((await row(h.ID))?.capabilities ?? ''), { hostname: 'after' });
    assert.equal((await location(h.ID))?.replica_id, 'rep_here');
  });

  test('a wrong secret, an unknown id or a driver host changes nothing', async () => {
    const h = await host({ hostname: 'kept' });
    const driver = await host({}, 'driver:sandbox-a');
    const tries = [
      { id: h.ID, secretHash: hashSecret('dhs_wrong') },
      { id: 'host_unknown', secretHash: hashSecret('dhs_right') },
      { id: driver.ID, secretHash: hashSecret('dhs_right') },
    ];
    for (const t of tries) {
      const k = await connectKnownHost(db, {
        ...t,
        at: '2030-01-03T00:00:00.000Z',
        capabilities: { hostname: 'changed' },
        replicaId: 'rep_here',
      });
      assert.equal(k, undefined);
    }
    for (const id of [h.ID, driver.ID]) {
      const r = await row(id);
      assert.equal(r?.status, 'unreachable');
      assert.equal(r?.last_seen_at, null);
      assert.notEqual(JSON.parse(r?.capabilities ?? '').hostname, 'changed');
      assert.equal(await location(id), undefined);
    }
    assert.equal(await location('host_unknown'), undefined);
  });

  test("an earlier stream's end leaves the location of a newer stream admitted here, until that one ends", async () => {
    const cluster = new Cluster(db, quiet);
    const h = await host({ hostname: 'x' });
    const hello = { id: h.ID, secretHash: hashSecret('dhs_right'), at: '2030-01-04T00:00:00.000Z' };
    const opened = {
      hostId: h.ID,
      teamId,
      cloudId: 'cloud_1',
      capabilities: {},
      located: true,
      send: () => true,
      current: () => true,
    };
    const notOpenHere = () => false;
    assert.ok(await cluster.admit(hello));
    // The older stream's release runs after the newer stream's hello was recorded and before the
    // hub has it open: the location and the connected mark stay.
    await cluster.hostGone(h.ID, notOpenHere);
    assert.equal((await location(h.ID))?.replica_id, cluster.id);
    assert.equal((await row(h.ID))?.status, 'connected');
    await cluster.hostConnected(opened);
    assert.equal((await location(h.ID))?.replica_id, cluster.id);
    // The stream that opened ends: its location goes and the host is unreachable.
    await cluster.hostGone(h.ID, notOpenHere);
    assert.equal(await location(h.ID), undefined);
    assert.equal((await row(h.ID))?.status, 'unreachable');

    // A stream admitted that closes before it opens gives its location back.
    assert.ok(await cluster.admit(hello));
    assert.equal((await location(h.ID))?.replica_id, cluster.id);
    await cluster.unlocate(h.ID, notOpenHere);
    assert.equal(await location(h.ID), undefined);
    assert.equal((await row(h.ID))?.status, 'unreachable');
    // A wrong secret admits nothing and leaves no stream pending.
    assert.equal(await cluster.admit({ ...hello, secretHash: hashSecret('dhs_wrong') }), undefined);
    assert.equal(await location(h.ID), undefined);
  });

  test('hellos that arrive together are written in one batch (one statement where WITH may write), each with its own answer', async () => {
    const hellos = new KnownHellos(db, 'rep_batch');
    const hosts = await Promise.all(Array.from({ length: 20 }, (_, i) => host({ hostname: `h${i}` })));
    const at = '2030-01-05T00:00:00.000Z';
    const right = (id: string, hostname: string) => ({
      id,
      secretHash: hashSecret('dhs_right'),
      at,
      capabilities: { hostname },
    });
    const answers = await Promise.all([
      ...hosts.map((h, i) => hellos.admit(right(h.ID, i % 2 ? `h${i}` : 'new'))),
      hellos.admit({ ...right(hosts[0].ID, 'again'), at: '2030-01-06T00:00:00.000Z' }),
      hellos.admit({ ...right(hosts[1].ID, 'x'), secretHash: hashSecret('dhs_wrong') }),
    ]);
    // A host twice in the same turn: its second hello goes in the next batch, after the first.
    assert.deepEqual(hellos.stats, { batches: 2, hellos: 22 });
    for (const [i, h] of hosts.entries()) {
      assert.deepEqual(answers[i], {
        teamId,
        cloudId: 'cloud_1',
        recorded: JSON.stringify({ hostname: `h${i}` }),
      });
      assert.deepEqual(await location(h.ID), {
        replica_id: 'rep_batch',
        team_id: teamId,
        cloud_id: 'cloud_1',
      });
      const r = await row(h.ID);
      assert.equal(r?.status, 'connected');
      if (i > 0) assert.deepEqual(JSON.parse(r?.capabilities ?? ''), { hostname: i % 2 ? `h${i}` : 'new' });
    }
    assert.equal(answers[20]?.recorded, JSON.stringify({ hostname: 'new' }), 'after the first hello');
    assert.deepEqual(JSON.parse((await row(hosts[0].ID))?.capabilities ?? ''), { hostname: 'again' });
    assert.equal((await row(hosts[0].ID))?.last_seen_at, '2030-01-06T00:00:00.000Z');
    assert.equal(answers[21], undefined, 'a wrong secret in a batch is refused alone');
  });

  test('a batch the database fails rejects its own hellos only; the writer goes on, and nothing escapes', async () => {
    const alive = watchAlive();
    let failing = HELLO_BATCHES_AT_ONCE + 1;
    const flaky = new Proxy(db, {
      get(target, prop) {
        const v = Reflect.get(target, prop, target);
        if (typeof v !== 'function') return v;
        if (prop === 'get' || prop === 'all' || prop === 'run')
          return (...args: unknown[]) =>
            failing-- > 0 ? Promise.reject(new Error('connection lost')) : v.apply(target, args);
        return v.bind(target);
      },
    });
    const hellos = new KnownHellos(flaky, 'rep_flaky');
    const h = await host({ hostname: 'flaky' });
    const hello = { id: h.ID, secretHash: hashSecret('dhs_right'), at: '2030-01-07T00:00:00.000Z' };
    // More failing statements than may be in flight at once: a writer that kept a failed one
    // counted would stop writing for good.
    for (let i = 0; i <= HELLO_BATCHES_AT_ONCE; i++)
      await assert.rejects(hellos.admit(hello), /connection lost/);
    assert.deepEqual(await hellos.admit(hello), {
      teamId,
      cloudId: 'cloud_1',
      recorded: JSON.stringify({ hostname: 'flaky' }),
    });
    assert.equal((await row(h.ID))?.status, 'connected');
    await alive.assertNothingEscapedAfter(50);
  });
});
