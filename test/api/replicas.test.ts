// Several control-plane replicas on one database (server/cluster): each is a row with a lease, a
// host's stream is held by one of them, and a command, an event or a process's output reaches a
// client on any of them. Real Postgres, replicas started in this process, a fake sidecar on the
// first; SQLite refuses a second replica.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { frame } from '../../protocol/frames.ts';
import { encodeOutput } from '../../protocol/processes.ts';
import { STREAM_TIMING } from '../../server/events/bus.ts';
import { AGENT_COMPOSE, deploy, finished, joinFake, waitFor } from '../orchestrator/harness.ts';
import { watchAlive } from '../support/alive.ts';
import { FakeSidecar } from '../support/fake-sidecar.ts';
import { startReplica, startTestServer, type TestServer } from '../support/server.ts';
import { Stream } from '../support/sse.ts';
import { tier } from '../support/tiers.ts';

/** Short beats so a stopped replica is found dead quickly (the bounds the tests wait past). */
const TIMING = { heartbeatMs: 100, leaseMs: 600 };
const REFUSAL = /SQLite supports one replica; use Postgres for several/;

describe('replicas on one Postgres', { skip: tier('postgres') }, () => {
  let a: TestServer;
  let b: TestServer;
  let c: TestServer;
  let sc: FakeSidecar;
  let project: string;
  let alpha: string;
  const pollMs = STREAM_TIMING.pollMs;

  before(async () => {
    // Event streams' own poll is off: an event appended on another replica arrives by notification.
    STREAM_TIMING.pollMs = 3_600_000;
    a = await startTestServer('postgres', {}, { replica: TIMING });
    b = await startReplica(a, {}, { replica: TIMING });
    c = await startReplica(a, {}, { replica: TIMING });
    sc = await joinFake(a);
    const p = await a.req('POST', '/v1/projects', { body: { name: 'p1' } });
    assert.equal(p.status, 201, JSON.stringify(p.body));
    project = p.body.project.ID;
    alpha = p.body.environments[0].ID;
    // Deployed through B: its phases' commands reach the host on A.
    const done = await deploy({ t: b, sc, project, alpha });
    assert.equal(done.deployment.Status, 'succeeded', JSON.stringify(done));
  });
  after(async () => {
    STREAM_TIMING.pollMs = pollMs;
    await sc?.close();
    await c?.close();
    await b?.close();
    await a?.close();
  });

  const idOf = (t: TestServer) => t.server.ctx.cluster.id;

  test('each replica is a row with a lease; the host is held by the replica its stream reached', async () => {
    const rows = await a.server.ctx.db.all<{ id: string }>('SELECT id FROM replicas');
    assert.deepEqual(rows.map((r) => r.id).sort(), [idOf(a), idOf(b), idOf(c)].sort());
    assert.equal(new Set([idOf(a), idOf(b), idOf(c)]).size, 3);
    const loc = await b.server.ctx.db.get<{ replica_id: string }>(
      'SELECT replica_id FROM host_locations WHERE host_id = ?',
      [sc.hostId],
    );
    assert.equal(loc?.replica_id, idOf(a));
    for (const t of [a, b, c]) {
      const hosts = await t.req('GET', '/v1/hosts');
      assert.equal(hosts.status, 200);
      assert.equal(hosts.body.hosts.find((h: any) => h.ID === sc.hostId)?.Status, 'connected');
    }
  });

  test('an exec through B reaches the host on A once and returns its result', async () => {
    sc.handlers['env.exec'] = (f) => ({
      exit_code: 0,
      stdout: `ran ${(f.payload as any).cmd[0]}`,
      stderr: '',
    });
    const before = sc.commands('env.exec').length;
    const r = await b.req('POST', `/v1/envs/${alpha}/exec`, { body: { service: 'app', cmd: ['hello'] } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.stdout, 'ran hello');
    const sent = sc.commands('env.exec').slice(before);
    assert.equal(sent.length, 1, 'the command reached the host once');
    const row = await a.server.ctx.db.get<{ origin: string; holder: string; status: string }>(
      'SELECT origin, holder, status FROM commands WHERE id = ?',
      [sent[0].command_id as string],
    );
    assert.deepEqual(row, { origin: idOf(b), holder: idOf(a), status: 'succeeded' });
    // Many at once, through both other replicas.
    const many = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        (i % 2 ? b : c).req('POST', `/v1/envs/${alpha}/exec`, { body: { service: 'app', cmd: [`n${i}`] } }),
      ),
    );
    assert.deepEqual(
      many.map((m) => [m.status, m.body.stdout]),
      many.map((_, i) => [200, `ran n${i}`]),
    );
    delete sc.handlers['env.exec'];
  });

  test("a host's refusal through B is the same answer as through A", async () => {
    sc.handlers['env.exec'] = () => {
      throw new Error('service app is not running');
    };
    const viaA = await a.req('POST', `/v1/envs/${alpha}/exec`, { body: { service: 'app', cmd: ['x'] } });
    const viaB = await b.req('POST', `/v1/envs/${alpha}/exec`, { body: { service: 'app', cmd: ['x'] } });
    delete sc.handlers['env.exec'];
    assert.equal(viaB.status, viaA.status);
    assert.equal(viaB.body.error, viaA.body.error);
    assert.match(viaB.body.error, /service app is not running/);
  });

  test('the events stream on B sees an event A appended', async () => {
    const s = await new Stream().open(`${b.url}/v1/events/stream?subject=host:${sc.hostId}`, {
      authorization: `Bearer ${b.key}`,
    });
    assert.equal(s.status, 200);
    sc.send(frame('event', { kind: 'disk.low', payload: { free_gb: 1 } }));
    await s.until((x) => x.events.some((e) => e.event.Kind === 'disk.low'));
    s.close();
  });

  test("a process's output followed through B comes from the host on A, large frames too", async () => {
    let follow = '';
    sc.handlers['proc.attach'] = (f) => {
      follow = (f.payload as { follow: string }).follow;
      return {
        process: {
          pid: 'proc_fake',
          service: 'app',
          cmd: ['cat'],
          status: 'running',
          exit_code: null,
          started_at: new Date().toISOString(),
          tty: false,
          stdin: false,
        },
      };
    };
    const s = await new Stream().open(`${b.url}/v1/envs/${alpha}/processes/proc_fake/stream`, {
      authorization: `Bearer ${b.key}`,
    });
    assert.equal(s.status, 200);
    await waitFor(() => follow !== '', 10_000, 'the attach');
    const big = Buffer.alloc(40_000, 'x');
    sc.ws.send(encodeOutput({ kind: 'stdout', follow, seq: 1, data: Buffer.from('hello\n') }));
    sc.ws.send(encodeOutput({ kind: 'stderr', follow, seq: 2, data: big }));
    sc.ws.send(encodeOutput({ kind: 'end', follow, end: { exit_code: 0 } }));
    await s.ended;
    const got = s.events.map((e) => e.event as any);
    assert.deepEqual(
      got.map((e) => [e.type, e.seq ?? null, e.data ? Buffer.from(e.data, 'base64').length : null]),
      [
        ['stdout', 1, 6],
        ['stderr', 2, big.length],
        ['end', null, null],
      ],
    );
    assert.equal(got[2].exit_code, 0);
    delete sc.handlers['proc.attach'];
  });

  test('a host joining on A is seen by a deploy waiting on B', async () => {
    const team = (await b.req('GET', '/v1/hosts')).body.hosts[0].TeamID as string;
    const waiting = b.server.orchestrator.hosts.waitForHost(team, '', 10_000);
    const other = await joinFake(a);
    assert.equal(await waiting, other.hostId);
    assert.equal(await c.server.orchestrator.hosts.waitConnected(other.hostId, 10_000), true);
    await other.close();
    await waitFor(() => !b.server.ctx.hub.isConnected(other.hostId), 10_000, 'B to hear it left');
  });

  test("a key revoked through A stops working on B at once, not when B's cache entry ends", async () => {
    const minted = await a.req('POST', '/v1/keys', { body: { name: 'short-lived' } });
    assert.equal(minted.status, 201, JSON.stringify(minted.body));
    const key = minted.body.api_key as string;
    // B has it cached after one use (the cache lasts 2 s: the revocation must not wait for that).
    assert.equal((await b.req('GET', '/v1/hosts', { token: key })).status, 200);
    assert.equal((await b.req('GET', '/v1/hosts', { token: key })).status, 200);
    const told = new Promise<{ keyId: string }>((resolve) => {
      const off = b.server.ctx.cluster.on('keyRevoked', (k) => {
        off();
        resolve(k);
      });
    });
    const revoked = await a.req('DELETE', `/v1/keys/${minted.body.key.ID}`);
    assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
    let timer: NodeJS.Timeout | undefined;
    const never = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('B was never told of the revocation')), 10_000);
    });
    try {
      assert.equal((await Promise.race([told, never])).keyId, minted.body.key.ID);
    } finally {
      clearTimeout(timer);
    }
    const after = await b.req('GET', '/v1/hosts', { token: key });
    assert.equal(after.status, 401);
    assert.match(after.body.error, /revoked/);
  });

  test('a fork and a verify asked of C run on the host on A, each command once', async () => {
    const p = await b.req('POST', '/v1/projects', { body: { name: 'graded' } });
    assert.equal(p.status, 201, JSON.stringify(p.body));
    const agent = p.body.environments[0].ID;
    const deployed = await deploy({ t: b, sc, project: p.body.project.ID, alpha: agent }, AGENT_COMPOSE);
    assert.equal(deployed.deployment.Status, 'succeeded', deployed.deployment.Error);
    const kinds = ['env.fork', 'env.snapshot', 'verify.collect', 'verify.run', 'env.destroy'];
    const before = Object.fromEntries(kinds.map((k) => [k, sc.commands(k).length]));
    const fork = await c.req('POST', `/v1/envs/${agent}/fork`, { body: {} });
    assert.equal(fork.status, 202, JSON.stringify(fork.body));
    assert.equal((await finished(c, fork.body.deployment.ID)).deployment.Status, 'succeeded');
    const verify = await c.req('POST', `/v1/envs/${agent}/verify`, { body: {} });
    assert.equal(verify.status, 202, JSON.stringify(verify.body));
    const graded = await finished(c, verify.body.deployment.ID);
    assert.equal(graded.deployment.Status, 'succeeded', graded.deployment.Error);
    assert.equal(graded.phases.at(-1).Evidence.reward, 1);
    // fork: one env.fork; verify: a snapshot, collect, a grader fork, its run and its destroy.
    const sent = Object.fromEntries(kinds.map((k) => [k, sc.commands(k).slice(before[k])]));
    assert.deepEqual(Object.fromEntries(kinds.map((k) => [k, sent[k].length])), {
      'env.fork': 2,
      'env.snapshot': 1,
      'verify.collect': 1,
      'verify.run': 1,
      'env.destroy': 1,
    });
    // Every one of them was asked by C and carried out through A, which holds the stream.
    for (const cmd of kinds.flatMap((k) => sent[k])) {
      const row = await a.server.ctx.db.get<{ origin: string; holder: string; status: string }>(
        'SELECT origin, holder, status FROM commands WHERE id = ?',
        [cmd.command_id as string],
      );
      assert.deepEqual(row, { origin: idOf(c), holder: idOf(a), status: 'succeeded' }, String(cmd.kind));
    }
  });

  test('a host that moves to C while its old stream on A lingers stays connected, reached through C', async () => {
    const moved = new FakeSidecar(c.url);
    moved.hostId = sc.hostId;
    moved.secret = sc.secret;
    await moved.connect();
    await waitFor(
      async () =>
        (
          await a.server.ctx.db.get<{ replica_id: string }>(
            'SELECT replica_id FROM host_locations WHERE host_id = ?',
            [sc.hostId],
          )
        )?.replica_id === idOf(c),
      10_000,
      'the location to move to C',
    );
    // The old stream on A ends after the new one on C began: A must not take the host away.
    await sc.close();
    await waitFor(() => !a.server.ctx.hub.connectedCount?.(), 10_000, 'A to see its stream end');
    const r = await b.req('POST', `/v1/envs/${alpha}/exec`, { body: { service: 'app', cmd: ['x'] } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(moved.commands('env.exec').length, 1, 'the exec went to the stream on C');
    const host = (await a.req('GET', '/v1/hosts')).body.hosts.find((h: any) => h.ID === sc.hostId);
    assert.equal(host.Status, 'connected');
    const loc = await a.server.ctx.db.get<{ replica_id: string }>(
      'SELECT replica_id FROM host_locations WHERE host_id = ?',
      [sc.hostId],
    );
    assert.equal(loc?.replica_id, idOf(c));
    // The host stays on C for the test after this one; B has heard where it is.
    sc = moved;
    await waitFor(
      async () => (await b.server.ctx.cluster.holderOf(sc.hostId)) === idOf(c),
      10_000,
      'B to hear the host is on C',
    );
  });

  test('when the replica holding the host stops, a command in flight through B is a 502 at once', async () => {
    sc.answer = false;
    const alive = watchAlive();
    const exec = b.req('POST', `/v1/envs/${alpha}/exec`, {
      body: { service: 'app', cmd: ['hang'], timeout_sec: 3600 },
    });
    await sc.nextCommand('env.exec');
    // C, which holds the host, stops as a killed process would: no heartbeat, no notifications,
    // nothing cleaned up.
    await c.server.ctx.cluster.abandon();
    const r = await exec;
    assert.equal(r.status, 502, JSON.stringify(r.body));
    assert.match(r.body.error, /replica holding host .* stopped/);
    // A and B forget C's host: nothing more is sent its way.
    await waitFor(
      () => !b.server.ctx.hub.isConnected(sc.hostId) && !a.server.ctx.hub.isConnected(sc.hostId),
      10_000,
      'the host to be known as gone',
    );
    const host = await a.req('GET', '/v1/hosts');
    assert.equal(host.body.hosts.find((h: any) => h.ID === sc.hostId)?.Status, 'unreachable');
    const later = await b.req('POST', `/v1/envs/${alpha}/exec`, { body: { service: 'app', cmd: ['x'] } });
    assert.equal(later.status, 502);
    await alive.assertAliveAfter(b.url, TIMING.leaseMs * 2);
  });

  test('a command in flight when its host reconnects to another replica is a 502 at once, not after a lease', async () => {
    const onA = new FakeSidecar(a.url);
    onA.hostId = sc.hostId;
    onA.secret = sc.secret;
    await onA.connect();
    // B's view of connected hosts is its notifications' (the database alone may already say A
    // while the notification is on its way, and an exec would then find the host unreachable).
    await waitFor(
      async () =>
        b.server.ctx.hub.isConnected(sc.hostId) &&
        (await b.server.ctx.cluster.holderOf(sc.hostId)) === idOf(a),
      10_000,
      'B to hear the host is on A',
    );
    onA.answer = false;
    const exec = b.req('POST', `/v1/envs/${alpha}/exec`, {
      body: { service: 'app', cmd: ['hang'], timeout_sec: 3600 },
    });
    await onA.nextCommand('env.exec');
    // The host's stream on A is still open (A lives, its lease holds): only the new hello on B
    // tells B that the command's stream is gone.
    const onB = new FakeSidecar(b.url);
    onB.hostId = sc.hostId;
    onB.secret = sc.secret;
    try {
      await onB.connect();
      const r = await exec;
      assert.equal(r.status, 502, JSON.stringify(r.body));
      assert.match(r.body.error, /moved to another control-plane replica/);
      const next = await b.req('POST', `/v1/envs/${alpha}/exec`, { body: { service: 'app', cmd: ['x'] } });
      assert.equal(next.status, 200, JSON.stringify(next.body));
      assert.equal(onB.commands('env.exec').length, 1, 'the next exec reached the host on B');
    } finally {
      await onA.close();
      await onB.close();
    }
  });
});

describe('SQLite holds one replica', () => {
  test('a second replica is refused while the first lives; once it stops, another starts', async () => {
    const first = await startTestServer('sqlite');
    try {
      await assert.rejects(startReplica(first), REFUSAL);
      // The refusal left nothing behind: the first goes on serving.
      assert.equal((await first.req('GET', '/v1/hosts')).status, 200);
      await first.server.close();
      const next = await startReplica(first);
      await next.server.close();
    } finally {
      await first.close();
    }
  });

  test('a lease left by a killed process does not block a restart', async () => {
    const first = await startTestServer('sqlite', {}, { replica: TIMING });
    try {
      const alive = watchAlive();
      // Killed: no heartbeat, its row stays.
      await first.server.ctx.cluster.abandon();
      await first.server.close();
      // On this machine, a holder whose process is gone is stale at once, however long its lease.
      const gone = spawnSync(process.execPath, ['-e', '0']).pid as number;
      const db = (await import('../../server/db/open.ts')).connect(first.db);
      await db.run(
        `INSERT INTO replicas (id, hostname, pid, url, started_at, lease_until)
         VALUES ('rep_killed', ?, ?, '', '', ${db.dialect.clockMs} + 3600000)`,
        [hostname(), gone],
      );
      await db.close();
      // The abandoned one's lease (same process, so only its lease tells) lapses within leaseMs.
      await alive.assertNothingEscapedAfter(TIMING.leaseMs);
      const next = await startReplica(first, {}, { replica: TIMING });
      const rows = await next.server.ctx.db.all<{ id: string }>('SELECT id FROM replicas');
      assert.deepEqual(
        rows.map((r) => r.id),
        [next.server.ctx.cluster.id],
      );
      await next.server.close();
    } finally {
      await first.close();
    }
  });
});
