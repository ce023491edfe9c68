// Two control-plane replicas on one Postgres database: a blob token minted on one is honoured on the
// other (the bytes relayed from the replica that holds them, once), and the periodic jobs that must
// not run twice at once (the warm pool's refill, the uploads sweep) run on one replica at a time,
// another taking over when the holder closes or its lease lapses.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { after, before, describe, test } from 'node:test';
import { leaseHolder, tryLease } from '../../server/cluster/leases.ts';
import { BLOB_PATH } from '../../server/hosts/blobs.ts';
import { REFILL_LEASE } from '../../server/pool/pool.ts';
import { SWEEP_LEASE } from '../../server/uploads/sweep.ts';
import { startReplicas, type TestServer } from '../support/server.ts';
import { tier } from '../support/tiers.ts';

const idOf = (url: string) => url.slice(url.lastIndexOf('/') + 1);
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Polls `check` (a condition another process makes true) up to `tries` times, 100 ms apart. */
async function until(what: string, check: () => Promise<boolean> | boolean, tries = 200): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`never: ${what}`);
}

describe('blob tokens across replicas [postgres]', { skip: tier('postgres') }, () => {
  let a: TestServer;
  let b: TestServer;
  before(async () => {
    [a, b] = await startReplicas(2);
  });
  after(async () => {
    await b?.close();
    await a?.close();
  });

  test('a download parked on one replica is fetched once through the other', async () => {
    const data = Buffer.alloc(3 * 1024 * 1024, 7);
    const ref = await a.server.ctx.blobs.offer(data);
    const url = `${b.url}${BLOB_PATH}/${idOf(ref.url)}`;
    const row = await b.server.ctx.db.get<{ token_hash: string }>(
      'SELECT token_hash FROM blob_tokens WHERE id = ?',
      [idOf(ref.url)],
    );
    assert.match(row?.token_hash ?? '', /^[0-9a-f]{64}$/, 'the token is kept as its hash');
    assert.equal((await fetch(url, { headers: bearer('dbt_wrong') })).status, 401);
    const r = await fetch(url, { headers: bearer(ref.token) });
    assert.equal(r.status, 200);
    assert.ok(Buffer.from(await r.arrayBuffer()).equals(data));
    // Used up everywhere.
    assert.equal((await fetch(url, { headers: bearer(ref.token) })).status, 404);
    assert.equal(
      (await fetch(`${a.url}${BLOB_PATH}/${idOf(ref.url)}`, { headers: bearer(ref.token) })).status,
      404,
    );
  });

  test('an upload the holder waits for arrives through the other replica', async () => {
    const up = await a.server.ctx.blobs.expect();
    const r = await fetch(`${b.url}${BLOB_PATH}/${idOf(up.url)}`, {
      method: 'PUT',
      headers: { ...bearer(up.token), 'content-type': 'application/octet-stream' },
      body: Buffer.from('archive bytes'),
    });
    assert.equal(r.status, 200, await r.clone().text());
    assert.deepEqual(await r.json(), { ok: true, bytes: 13 });
    assert.equal((await up.received).toString(), 'archive bytes');
  });

  test('a stream the holder reads arrives through the other replica as it is sent', async () => {
    const up = await a.server.ctx.blobs.expectStream();
    const sent = fetch(`${b.url}${new URL(up.url).pathname}`, {
      method: 'PUT',
      headers: { ...bearer(up.token), 'content-type': 'application/octet-stream' },
      body: Readable.toWeb(Readable.from(['one ', 'two ', 'three'])) as ReadableStream,
      duplex: 'half',
    } as RequestInit);
    const req = await up.arrived;
    assert.equal(await text(req), 'one two three');
    assert.equal((await sent).status, 200);
  });

  test('a relayed request for a blob its holder no longer has is 404, not relayed again', async () => {
    const ref = await a.server.ctx.blobs.offer(Buffer.from('x'));
    a.server.ctx.blobs.drop(ref);
    await until('the dropped token is gone', async () => {
      const r = await fetch(`${b.url}${BLOB_PATH}/${idOf(ref.url)}`, { headers: bearer(ref.token) });
      return r.status === 404;
    });
    const relayed = await fetch(`${a.url}${BLOB_PATH}/${idOf(ref.url)}`, {
      headers: { ...bearer(ref.token), 'x-svc-blob-relayed': '1' },
    });
    assert.equal(relayed.status, 404);
  });
});

describe('periodic jobs on one replica at a time [postgres]', { skip: tier('postgres') }, () => {
  let a: TestServer;
  let b: TestServer;
  before(async () => {
    [a, b] = await startReplicas(2);
  });
  after(async () => {
    await b?.close();
    await a?.close();
  });

  test('the pool refill runs on the lease holder only; the other takes over when it closes', async () => {
    const pool = (s: TestServer) => s.server.ctx.pool;
    await until('one replica refills', () => pool(a).passes + pool(b).passes > 0);
    const [holder, other] = pool(a).passes > 0 ? [a, b] : [b, a];
    assert.equal((await leaseHolder(a.server.ctx.db, REFILL_LEASE))?.holder, holder.server.replicaId);
    // A few more passes on the holder, none on the other (it ticks every second as well).
    const seen = pool(holder).passes;
    await until('the holder refills again', () => pool(holder).passes >= seen + 3);
    assert.equal(pool(other).passes, 0, 'the other replica never refilled meanwhile');
    await holder.close();
    await until('the other replica takes over', () => pool(other).passes > 0);
    assert.equal((await leaseHolder(other.server.ctx.db, REFILL_LEASE))?.holder, other.server.replicaId);
    assert.equal((await fetch(`${other.url}/health`)).status, 200);
  });

  test('the uploads sweep: skipped while another holds it, run after that holder lapses', async () => {
    // Whichever replica is still open.
    const live = a.server.state() === 'serving' ? a : b;
    const db = live.server.ctx.db;
    const dir = live.server.ctx.config.uploadsDir;
    mkdirSync(dir, { recursive: true });
    const orphan = join(dir, 'upl_orphan.part');
    writeFileSync(orphan, 'left by a crash');
    const old = new Date(Date.now() - 3 * 86_400_000);
    utimesSync(orphan, old, old);
    // A replica that took the lease and died: it never renews and never releases it.
    assert.ok(await tryLease(db, SWEEP_LEASE, 'rep_dead', 1500));
    const sweeper = live.server.sweeper;
    await sweeper.run();
    assert.equal(sweeper.passes, 0);
    assert.equal(sweeper.skipped, 1);
    // Once the dead holder's lease has lapsed, the next pass here runs and collects.
    await until('the sweep runs after the lapse', async () => {
      await sweeper.run();
      return sweeper.passes === 1;
    });
    assert.ok(!existsSync(orphan), 'the pass collected the orphan');
    assert.equal(await leaseHolder(db, SWEEP_LEASE), undefined, 'given up after the pass');
    assert.equal((await fetch(`${live.url}/health`)).status, 200, 'alive after the lease bound');
  });
});
