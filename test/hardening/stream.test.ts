// The host stream under hostile peers: before hello only a small frame (oversized handshakes cut
// at once); a frame over 16 MiB closes with 1008, like every refusal; a hello with huge, deep or
// NUL-bearing capabilities is refused without using up the join token; a joined host's event
// frames are bounded in size and rate (listings never 500).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { WebSocket } from 'ws';
import { frame, STREAM_PATH } from '../../protocol/frames.ts';
import { appendEvent } from '../../server/events/store.ts';
import { EVENT_BURST, REFUSED_LINGER_MS } from '../../server/hosts/stream-limits.ts';
import { waitFor } from '../orchestrator/harness.ts';
import { watchAlive } from '../support/alive.ts';
import { DEFAULT_CAPS, FakeSidecar } from '../support/fake-sidecar.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';

interface Closed {
  code: number;
  reason: string;
}

async function dial(url: string): Promise<{ ws: WebSocket; closed: Promise<Closed> }> {
  const ws = new WebSocket(url.replace(/^http/, 'ws') + STREAM_PATH, { perMessageDeflate: false });
  const closed = new Promise<Closed>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  ws.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return { ws, closed };
}

function hello(token: string, capabilities: unknown): string {
  return JSON.stringify(frame('hello', { payload: { host_id: '', token, capabilities } }));
}

forEachDialect('hostile host stream', (dialect) => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(dialect);
  });
  after(() => s.close());

  const joinToken = async (): Promise<string> => {
    const r = await s.req('POST', '/v1/join-tokens', { body: {} });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.token;
  };
  const hostCount = async () =>
    Number((await s.server.ctx.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM hosts'))?.n);

  test('a first frame larger than a hello is refused with 1008 before it is buffered', {
    timeout: 30_000,
  }, async () => {
    const alive = watchAlive();
    const { ws, closed } = await dial(s.url);
    ws.send(`{"type":"hello","payload":{"token":"${'x'.repeat(4 * 1024 * 1024)}"}}`);
    const c = await closed;
    assert.equal(c.code, 1008);
    assert.match(c.reason, /64 KiB/);
    // The refused stream is cut after its linger: the server outlives that timer.
    await alive.assertAliveAfter(s.url, REFUSED_LINGER_MS);
  });

  test('a 16 MiB frame announced but never finished is cut at 64 KiB, not held', {
    timeout: 30_000,
  }, async () => {
    const alive = watchAlive();
    const { ws, closed } = await dial(s.url);
    // A frame header announcing 16 MiB - 1 (masked, as clients must), then 100 KiB of it.
    const len = 16 * 1024 * 1024 - 1;
    const header = Buffer.from([
      0x81,
      0xff,
      0,
      0,
      0,
      0,
      (len >>> 24) & 255,
      (len >>> 16) & 255,
      (len >>> 8) & 255,
      len & 255,
      1,
      2,
      3,
      4,
    ]);
    const raw = (ws as unknown as { _socket: import('node:net').Socket })._socket;
    raw.write(header);
    raw.write(Buffer.alloc(100 * 1024, 0x61));
    const c = await closed;
    assert.equal(c.code, 1008);
    assert.match(c.reason, /64 KiB/);
    await alive.assertAliveAfter(s.url, REFUSED_LINGER_MS);
  });

  test('oversized, deep or NUL-bearing capabilities are refused and the token stays usable', {
    timeout: 60_000,
  }, async () => {
    const token = await joinToken();
    const hosts = await hostCount();
    let deep: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 10; i++) deep = { deep };
    const bad: Array<[unknown, RegExp]> = [
      [{ ...DEFAULT_CAPS, blob: 'x'.repeat(20 * 1024) }, /larger than 16384 bytes/],
      [{ ...DEFAULT_CAPS, deep }, /nested deeper than 4 levels/],
      [{ ...DEFAULT_CAPS, hostname: 'bad\0host' }, /NUL/],
      [{ ...DEFAULT_CAPS, 'k\0': 1 }, /NUL/],
      [{ ...DEFAULT_CAPS, blob: 'x'.repeat(15 * 1024 * 1024) }, /64 KiB/],
    ];
    for (const [caps, reason] of bad) {
      const { ws, closed } = await dial(s.url);
      ws.send(hello(token, caps));
      const c = await closed;
      assert.equal(c.code, 1008);
      assert.match(c.reason, reason);
    }
    assert.equal(await hostCount(), hosts, 'no host was recorded');
    const sc = await new FakeSidecar(s.url).connect(token);
    assert.match(sc.hostId, /^host_/, 'the join token was not used up by the refused hellos');
    await sc.close();
  });

  test('a hello whose host cannot be recorded does not use up the join token', {
    timeout: 60_000,
  }, async () => {
    const db = s.server.ctx.db;
    const token = await joinToken();
    // A real database fault on the host insert (a trigger), not a mock.
    if (dialect === 'sqlite') {
      await db.run(
        "CREATE TRIGGER i9_fail BEFORE INSERT ON hosts BEGIN SELECT RAISE(ABORT, 'injected fault'); END",
      );
    } else {
      await db.run(
        "CREATE OR REPLACE FUNCTION i9_fail() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$ LANGUAGE plpgsql",
      );
      await db.run('CREATE TRIGGER i9_fail BEFORE INSERT ON hosts FOR EACH ROW EXECUTE FUNCTION i9_fail()');
    }
    try {
      const { ws, closed } = await dial(s.url);
      ws.send(hello(token, DEFAULT_CAPS));
      const c = await closed;
      assert.equal(c.code, 1008);
      assert.match(c.reason, /internal error/);
    } finally {
      await db.run(dialect === 'sqlite' ? 'DROP TRIGGER i9_fail' : 'DROP TRIGGER i9_fail ON hosts');
    }
    const sc = await new FakeSidecar(s.url).connect(token);
    assert.match(sc.hostId, /^host_/, 'the token still joins once the fault is gone');
    await sc.close();
  });

  test('a frame over 16 MiB from a joined host closes the stream with 1008', {
    timeout: 60_000,
  }, async () => {
    const sc = await new FakeSidecar(s.url).connect(await joinToken());
    sc.ws.send(JSON.stringify(frame('heartbeat', { message: 'x'.repeat(16 * 1024 * 1024) })));
    const c = await sc.closed;
    assert.equal(c.code, 1008);
    assert.match(c.reason, /16 MiB/);
  });

  test('event frames are bounded in size and rate; the listing answers', {
    timeout: 60_000,
  }, async () => {
    const sc = await new FakeSidecar(s.url).connect(await joinToken());
    for (let i = 0; i < 5; i++)
      sc.send(frame('event', { kind: 'big', payload: { blob: 'x'.repeat(3 * 1024 * 1024) } }));
    for (let i = 0; i < 600; i++) sc.send(frame('event', { kind: 'small', payload: { i } }));
    sc.send(frame('event', { kind: 'nul\0kind', payload: {} }));
    // A frame a host must not send closes the stream after everything before it was handled.
    sc.send(frame('command', { command_id: 'cmd_x', kind: 'env.exec' }));
    assert.equal((await sc.closed).code, 1008);
    // The host is marked unreachable only after every event its stream sent is stored: wait for that.
    await waitFor(
      async () => {
        const h = await s.server.ctx.db.get<{ status: string }>('SELECT status FROM hosts WHERE id = ?', [
          sc.hostId,
        ]);
        return h?.status === 'unreachable';
      },
      10_000,
      "the closed stream's host to be marked unreachable",
    );
    const rows = await s.server.ctx.db.all<{ kind: string; n: number }>(
      'SELECT kind, COUNT(*) AS n FROM events WHERE subject = ? GROUP BY kind',
      [`host:${sc.hostId}`],
    );
    const by = Object.fromEntries(rows.map((r) => [r.kind, Number(r.n)])) as Record<string, number>;
    assert.equal(by.big, undefined, 'no 3 MiB event was stored');
    assert.equal(by['nul\0kind'], undefined);
    // The burst, plus what the steady rate refilled while 600 were sent: far from all of them.
    assert.ok(by.small >= EVENT_BURST && by.small < 300, `small events stored: ${by.small}`);

    // Rows stored before the bound (or by another path) are listed as truncated, never a 500.
    const team = s.server.ctx.db;
    const me = await s.req('GET', '/v1/me');
    for (let i = 0; i < 3; i++)
      await appendEvent(
        team,
        me.body.team.ID,
        `host:${sc.hostId}`,
        'legacy',
        { blob: 'y'.repeat(2 * 1024 * 1024) },
        null,
      );
    const r = await s.req('GET', `/v1/events?subject=host:${sc.hostId}`);
    assert.equal(r.status, 200);
    assert.ok(r.body.events.length > EVENT_BURST);
    const legacy = r.body.events.filter((e: { Kind: string }) => e.Kind === 'legacy');
    assert.equal(legacy.length, 3);
    assert.equal(legacy[0].Body.truncated, true);
    assert.ok(legacy[0].Body.bytes > 2 * 1024 * 1024);
  });
});
