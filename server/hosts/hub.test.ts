// The hub is the transport of the host stream (spec "Host stream protocol"): it authenticates a
// stream, applies the stream's limits and tells its subscribers `hello`, then each `frame`, then
// `gone`. It calls nobody: these tests subscribe to a real hub on a real socket, with no dispatcher.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { WebSocket } from 'ws';
import { type Frame, frame, STREAM_PATH } from '../../protocol/frames.ts';
import { withTimeout } from '../../shared/concurrency.ts';
import { DEFAULT_CAPS, FakeSidecar } from '../../test/support/fake-sidecar.ts';
import { openDb } from '../db/open.ts';
import type { Db } from '../db/types.ts';
import { bootstrap } from '../identity/store.ts';
import { Hub } from './hub.ts';
import type { HostGone, HostHello, HubEvents } from './hub-events.ts';

type Seen = { [K in keyof HubEvents]: { name: K; event: HubEvents[K] } }[keyof HubEvents];

describe('the hub emits what happens on host streams', () => {
  let dir: string;
  let db: Db;
  let hub: Hub;
  let server: Server;
  let url: string;
  const seen: Seen[] = [];
  const warned: { msg: string; obj: Record<string, unknown> }[] = [];
  const of = (hostId: string) => seen.filter((s) => s.event.hostId === hostId);
  /** Resolves with the next `name` event that satisfies `match` (bounded). */
  const next = <K extends keyof HubEvents>(name: K, match: (e: HubEvents[K]) => boolean) =>
    withTimeout(
      new Promise<HubEvents[K]>((resolve) => {
        const off = hub.on(name, (e) => {
          if (!match(e)) return;
          off();
          resolve(e);
        });
      }),
      10_000,
      () => new Error(`no ${String(name)} event within 10 s`),
    );

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-hub-events-'));
    db = (await openDb(join(dir, 'svc.db'))).db;
    const teamId = (await bootstrap(db, 'default', ''))?.team.ID as string;
    const warn = (obj: object, msg: string) => warned.push({ msg, obj: obj as Record<string, unknown> });
    hub = new Hub(db, async () => ({ teamId, cloudId: '' }), { info: () => {}, warn });
    hub.on('hello', (event) => seen.push({ name: 'hello', event }));
    hub.on('frame', (event) => seen.push({ name: 'frame', event }));
    hub.on('gone', (event) => seen.push({ name: 'gone', event }));
    server = createServer();
    hub.attach(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await hub.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('one stream: hello (id, capabilities, a send handle), its frames in order, then gone', async () => {
    const sc = await new FakeSidecar(url).connect('jt');
    sc.heartbeat();
    sc.send(frame('event', { kind: 'disk.low', payload: { free_gb: 1 } }));
    sc.send(frame('progress', { command_id: 'cmd_x', message: 'pulling' }));
    const gone = next('gone', (g) => g.hostId === sc.hostId);
    await sc.close();
    assert.deepEqual(await gone, { hostId: sc.hostId, reason: 'host disconnected', replaced: false });

    const events = of(sc.hostId);
    assert.deepEqual(
      events.map((s) => (s.name === 'frame' ? `frame:${s.event.frame.type}` : s.name)),
      ['hello', 'frame:heartbeat', 'frame:event', 'frame:progress', 'gone'],
    );
    const hello = events[0].event as HostHello;
    assert.equal(hello.capabilities.hostname, DEFAULT_CAPS.hostname);
    assert.equal(hello.cloudId, '');
    const progress = events[3].event as { teamId: string; frame: Frame };
    assert.equal(progress.teamId, hello.teamId);
    assert.equal(progress.frame.message, 'pulling');
    // The send handle belongs to that stream: once it is gone, nothing is written.
    assert.equal(hello.current(), false);
    assert.equal(hello.send(frame('heartbeat', {})), false);
    assert.equal(hub.isConnected(sc.hostId), false);
    assert.equal(hub.connectedCount(), 0);
  });

  test("hello's send handle writes on the host's stream", async () => {
    const hello = next('hello', () => true);
    const sc = await new FakeSidecar(url).connect('jt');
    const h = await hello;
    assert.equal(h.hostId, sc.hostId);
    assert.equal(h.current(), true);
    assert.equal(hub.connectedCount(), 1);
    assert.equal(h.send(frame('command', { command_id: 'cmd_1', kind: 'env.exec', payload: {} })), true);
    const got = await next('frame', (f) => f.frame.type === 'result' && f.frame.command_id === 'cmd_1');
    assert.equal(got.frame.ok, true, 'the fake sidecar ran the command written by the handle');
    await sc.close();
  });

  test("a reconnect: the old stream's gone (replaced) comes before the new stream's hello", async () => {
    const first = await new FakeSidecar(url).connect('jt');
    const second = new FakeSidecar(url);
    second.hostId = first.hostId;
    second.secret = first.secret;
    const hello = next('hello', (h) => h.hostId === first.hostId);
    await second.connect();
    const h = await hello;
    const events = of(first.hostId).map((s) => s.name);
    assert.deepEqual(events.slice(-2), ['gone', 'hello']);
    const replaced = of(first.hostId).at(-2)?.event as HostGone;
    assert.deepEqual(replaced, {
      hostId: first.hostId,
      reason: 'host reconnected on a newer stream',
      replaced: true,
    });
    assert.equal((await first.closed).code, 1008);
    assert.equal(h.current(), true);
    assert.equal(hub.isConnected(first.hostId), true, 'the newer stream owns the host');
    // The old stream's close is not a second gone: the host is still connected.
    const gone = next('gone', (g) => g.hostId === first.hostId);
    await second.close();
    assert.equal((await gone).replaced, false);
    assert.deepEqual(
      of(first.hostId)
        .map((s) => s.name)
        .filter((n) => n === 'gone'),
      ['gone', 'gone'],
    );
  });

  test("a known host's hello says whether its capabilities are those already recorded", async () => {
    const first = await new FakeSidecar(url).connect('jt');
    assert.equal((of(first.hostId)[0].event as HostHello).capabilitiesRecorded, false, 'a join');
    await first.close();
    const again = new FakeSidecar(url);
    again.hostId = first.hostId;
    again.secret = first.secret;
    const same = next('hello', (h) => h.hostId === first.hostId);
    await again.connect();
    assert.equal((await same).capabilitiesRecorded, true, 'the capabilities it joined with');
    assert.equal((await same).located, false, 'no cluster: no location written with it');
    await again.close();
    await db.run('UPDATE hosts SET capabilities = ? WHERE id = ?', ['{"hostname":"other"}', first.hostId]);
    const changed = next('hello', (h) => h.hostId === first.hostId);
    await again.connect();
    assert.equal((await changed).capabilitiesRecorded, false, 'other capabilities than recorded');
    const row = await db.get<{ capabilities: string }>('SELECT capabilities FROM hosts WHERE id = ?', [
      first.hostId,
    ]);
    assert.deepEqual(JSON.parse(row?.capabilities ?? ''), DEFAULT_CAPS, "the hello's are recorded");
    await again.close();
  });

  test('a bad hello is refused with its reason and emits nothing', async () => {
    let deep: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 10; i++) deep = { deep };
    const cases: Array<[unknown, string]> = [
      [{ host_id: 7, token: 'jt' }, 'hello: hello host_id must be a string'],
      [{ host_id: '', token: '' }, 'hello: hello needs a token'],
      [
        { token: 'jt', capabilities: { ...DEFAULT_CAPS, deep } },
        'hello: hello capabilities are nested deeper than 4 levels',
      ],
      [{ token: 'jt', capabilities: ['x'] }, 'hello: hello capabilities must be an object'],
    ];
    const before = seen.length;
    for (const [payload, reason] of cases) {
      const ws = new WebSocket(url.replace('http', 'ws') + STREAM_PATH);
      const closed = new Promise<{ code: number; reason: string }>((r) =>
        ws.on('close', (code, why) => r({ code, reason: why.toString() })),
      );
      await new Promise((r) => ws.once('open', r));
      ws.send(JSON.stringify(frame('hello', { payload })));
      assert.deepEqual(await closed, { code: 1008, reason });
    }
    assert.equal(seen.length, before, 'no hello, frame or gone for a refused stream');
  });

  test('a frame a host must not send closes its stream (1008) and is not emitted', async () => {
    const sc = await new FakeSidecar(url).connect('jt');
    const gone = next('gone', (g) => g.hostId === sc.hostId);
    sc.send(frame('command', { command_id: 'cmd_2', kind: 'env.exec' }));
    assert.deepEqual(await sc.closed, { code: 1008, reason: 'unexpected command frame from a host' });
    await gone;
    assert.deepEqual(
      of(sc.hostId).map((s) => s.name),
      ['hello', 'gone'],
    );
  });

  test('a subscriber that fails is logged with the host; the stream and the other subscribers go on', async () => {
    const sc = await new FakeSidecar(url).connect('jt');
    const off = hub.on('frame', async (f) => {
      if (f.hostId === sc.hostId) throw new Error('subscriber broke');
    });
    try {
      const second = next('frame', (f) => f.hostId === sc.hostId && f.frame.kind === 'second');
      sc.send(frame('event', { kind: 'first', payload: {} }));
      sc.send(frame('event', { kind: 'second', payload: {} }));
      await second;
      assert.equal(hub.isConnected(sc.hostId), true);
      const failed = warned.filter((w) => w.msg === 'frame handling failed' && w.obj.host === sc.hostId);
      assert.ok(failed.length >= 1, JSON.stringify(warned));
      assert.equal((failed[0].obj.err as Error).message, 'subscriber broke');
    } finally {
      off();
      await sc.close();
    }
  });
});
