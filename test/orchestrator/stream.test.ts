import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { after, before, test } from 'node:test';
import { WebSocket } from 'ws';
import { frame, STREAM_PATH } from '../../protocol/frames.ts';
import { HOST_REPORTS_AT_ONCE } from '../../server/hosts/host-records.ts';
import { QUEUE_WAIT_CHANNEL } from '../../shared/concurrency.ts';
import { DEFAULT_CAPS, FakeSidecar, Refused } from '../support/fake-sidecar.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { deploy, env, joinFake, waitFor } from './harness.ts';

async function rawHello(t: TestServer, payload: unknown): Promise<{ code: number; reason: string }> {
  const ws = new WebSocket(t.url.replace('http', 'ws') + STREAM_PATH);
  await new Promise((r) => ws.once('open', r));
  const closed = new Promise<{ code: number; reason: string }>((r) =>
    ws.on('close', (code, reason) => r({ code, reason: reason.toString() })),
  );
  ws.send(JSON.stringify(frame('hello', { payload })));
  return closed;
}

forEachDialect('host stream', (dialect) => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer(dialect);
  });
  after(async () => t.close());

  test('a join token is consumed once; the host gets an id and a dhs_ secret stored only as a hash', async () => {
    const jt = await t.req('POST', '/v1/join-tokens', { body: {} });
    const sc = await new FakeSidecar(t.url).connect(jt.body.token);
    assert.match(sc.hostId, /^host_/);
    assert.match(sc.secret, /^dhs_/);
    const row = await t.server.ctx.db.get<{ secret_hash: string; status: string }>(
      'SELECT * FROM hosts WHERE id = ?',
      [sc.hostId],
    );
    assert.notEqual(row?.secret_hash, sc.secret);
    assert.equal(row?.secret_hash.length, 64);
    const dump = JSON.stringify(await t.server.ctx.db.all('SELECT * FROM hosts'));
    assert.ok(!dump.includes(sc.secret), 'no plaintext secret at rest');
    const hosts = await t.req('GET', '/v1/hosts');
    const h = hosts.body.hosts.find((x: any) => x.ID === sc.hostId);
    assert.equal(h.connected, true);
    assert.equal(h.Capabilities.hostname, 'fake-host');
    // Second use of the same token.
    await assert.rejects(
      new FakeSidecar(t.url).connect(jt.body.token),
      (e: Error) => e instanceof Refused && e.message === '1008 join: join token already used',
    );
    await sc.close();
  });

  test('on connect the control plane asks for host.report and records the refreshed capabilities', async () => {
    const jt = await t.req('POST', '/v1/join-tokens', { body: {} });
    const sc = new FakeSidecar(t.url);
    sc.handlers['host.report'] = () => ({
      capabilities: { ...DEFAULT_CAPS, hostname: 'refreshed', disk_gb: 3 },
    });
    await sc.connect(jt.body.token);
    await waitFor(async () => {
      const h = (await t.req('GET', '/v1/hosts')).body.hosts.find((x: any) => x.ID === sc.hostId);
      return h?.Capabilities.hostname === 'refreshed';
    });
    assert.equal(sc.commands('host.report').length, 1);
    await sc.close();
  });

  test('hosts that say hello together are asked for host.report a few at a time, and every one is asked', async () => {
    const n = HOST_REPORTS_AT_ONCE + 2;
    const waits: string[] = [];
    const onWait = (m: unknown) => waits.push((m as { key: string }).key);
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const tokens = await Promise.all(
      Array.from(
        { length: n },
        async () => (await t.req('POST', '/v1/join-tokens', { body: {} })).body.token,
      ),
    );
    const scs = tokens.map(() => {
      const sc = new FakeSidecar(t.url);
      sc.handlers['host.report'] = async () => {
        await held;
        return { capabilities: { ...DEFAULT_CAPS, hostname: 'reported-later' } };
      };
      return sc;
    });
    const asked = () => scs.reduce((s, sc) => s + sc.commands('host.report').length, 0);
    subscribe(QUEUE_WAIT_CHANNEL, onWait);
    try {
      await Promise.all(scs.map((sc, i) => sc.connect(tokens[i])));
      // Every host said hello; the reports past the limit wait for a turn, the others are out.
      await waitFor(() => waits.filter((k) => k === 'host.report').length === n - HOST_REPORTS_AT_ONCE);
      await waitFor(() => asked() === HOST_REPORTS_AT_ONCE);
      assert.equal(asked(), HOST_REPORTS_AT_ONCE, 'no more reports out than the limit while they are held');
      release();
      await waitFor(async () => {
        const hosts = (await t.req('GET', '/v1/hosts')).body.hosts;
        return scs.every(
          (sc) => hosts.find((x: any) => x.ID === sc.hostId)?.Capabilities.hostname === 'reported-later',
        );
      });
      for (const sc of scs) assert.equal(sc.commands('host.report').length, 1);
    } finally {
      unsubscribe(QUEUE_WAIT_CHANNEL, onWait);
      release();
      await Promise.all(scs.map((sc) => sc.close()));
    }
  });

  test('expired, unknown tokens and bad secrets are refused with 1008 and the reason', async () => {
    const jt = await t.req('POST', '/v1/join-tokens', { body: {} });
    await t.server.ctx.db.run(
      "UPDATE join_tokens SET expires_at = '2000-01-01T00:00:00.000Z' WHERE used_at IS NULL",
    );
    assert.deepEqual(await rawHello(t, { host_id: '', token: jt.body.token, capabilities: {} }), {
      code: 1008,
      reason: 'join: join token expired',
    });
    assert.deepEqual(await rawHello(t, { host_id: '', token: 'djt_nope', capabilities: {} }), {
      code: 1008,
      reason: 'join: unknown join token',
    });
    const sc = await joinFake(t);
    await sc.close();
    const bad = await rawHello(t, { host_id: sc.hostId, token: 'dhs_wrong', capabilities: {} });
    assert.equal(bad.code, 1008);
    assert.match(bad.reason, /bad host secret/);
    assert.equal((await rawHello(t, { nothing: true })).code, 1008);
  });

  test('a known host reconnects with its secret; a newer stream replaces the older one', async () => {
    const first = await joinFake(t);
    const second = new FakeSidecar(t.url);
    second.hostId = first.hostId;
    second.secret = first.secret;
    await second.connect();
    const old = await first.closed;
    assert.equal(old.code, 1008);
    assert.match(old.reason, /replaced/);
    assert.equal(t.server.orchestrator.hub.isConnected(first.hostId), true);
    await second.close();
    await waitFor(() => !t.server.orchestrator.hub.isConnected(first.hostId));
    await waitFor(
      async () =>
        (
          await t.server.ctx.db.get<{ status: string }>('SELECT status FROM hosts WHERE id = ?', [
            first.hostId,
          ])
        )?.status === 'unreachable',
    );
    const h = (await t.req('GET', '/v1/hosts')).body.hosts.find((x: any) => x.ID === first.hostId);
    assert.equal(h.connected, false);
    assert.equal(h.Status, 'unreachable');
  });

  test('heartbeats record last_seen_at; malformed and oversized frames close the stream', async () => {
    const sc = await joinFake(t);
    await t.server.ctx.db.run('UPDATE hosts SET last_seen_at = ? WHERE id = ?', [
      '2000-01-01T00:00:00.000Z',
      sc.hostId,
    ]);
    sc.heartbeat();
    // The heartbeat is recorded once the hub has read it and flushed: wait (bounded) for that.
    const seen = async () => {
      await t.server.orchestrator.hub.flush();
      const row = await t.server.ctx.db.get<{ last_seen_at: string }>(
        'SELECT last_seen_at FROM hosts WHERE id = ?',
        [sc.hostId],
      );
      return Date.parse(row!.last_seen_at) > Date.now() - 60_000;
    };
    await waitFor(seen, 10_000, 'the heartbeat to be recorded');
    assert.ok(await seen());
    sc.ws.send('{"type":"nonsense"}');
    assert.equal((await sc.closed).code, 1008);
    const big = await joinFake(t);
    big.ws.send('x'.repeat(16 * 1024 * 1024 + 1));
    assert.equal((await big.closed).code, 1008); // every refusal is 1008 (spec)
  });

  test('heartbeat flushes write every host, across chunks', async () => {
    const { insertHost, setLastSeen } = await import('../../server/hosts/store.ts');
    const team = (await t.server.ctx.db.get<{ id: string }>('SELECT id FROM teams LIMIT 1'))!.id;
    const ids: string[] = [];
    for (let i = 0; i < 1200; i++)
      ids.push(
        (await insertHost(t.server.ctx.db, { teamId: team, name: `h${i}`, status: 'unreachable' })).ID,
      );
    await setLastSeen(
      t.server.ctx.db,
      ids.map((id, i) => [id, `2030-01-01T00:00:${String(i % 60).padStart(2, '0')}.000Z`]),
    );
    const rows = await t.server.ctx.db.all<{ id: string; last_seen_at: string }>(
      `SELECT id, last_seen_at FROM hosts WHERE last_seen_at LIKE '2030-%'`,
    );
    assert.equal(rows.length, 1200);
    const byId = new Map(rows.map((r) => [r.id, r.last_seen_at]));
    assert.equal(byId.get(ids[1061]), '2030-01-01T00:00:41.000Z');
    assert.equal(byId.get(ids[1199]), '2030-01-01T00:00:59.000Z'); // the last, short chunk
    await t.server.ctx.db.run(
      "DELETE FROM hosts WHERE name LIKE 'h%' AND status = 'unreachable' AND last_seen_at LIKE '2030-%'",
    );
  });

  test('events frames are stored on host:<id>; progress frames on cmd:<id>', async () => {
    const sc = await joinFake(t);
    sc.send(frame('event', { kind: 'disk.low', payload: { free_gb: 1 } }));
    await waitFor(
      async () => (await t.req('GET', `/v1/events?subject=host:${sc.hostId}`)).body.events.length === 1,
    );
    const p = await t.req('POST', '/v1/projects', { body: { name: `ev-${dialect}` } });
    sc.handlers['env.create'] = async (f, s) => {
      s.send(frame('progress', { command_id: f.command_id, message: 'healthy; egress denied (verified)' }));
      return { endpoints: {}, started_in: 1, digests: {}, storage: 'dir', egress: 'denied (verified)' };
    };
    const d = await deploy({ t, sc, project: p.body.project.ID, alpha: p.body.environments[0].ID });
    assert.equal(d.deployment.Status, 'succeeded');
    const cmd = await t.server.ctx.db.get<{ id: string }>(
      "SELECT id FROM commands WHERE kind = 'env.create' AND host_id = ?",
      [sc.hostId],
    );
    const ev = await t.req('GET', `/v1/events?subject=cmd:${cmd!.id}`);
    assert.deepEqual(
      ev.body.events.map((e: any) => e.Body.message),
      ['healthy; egress denied (verified)'],
    );
    await sc.close();
    assert.equal((await env(t, p.body.environments[0].ID)).Status, 'running');
  });
});
