// Live events at scale: every open GET /v1/events/stream used to read the team's last 10 s of
// events on every new event and every poll (100 streams of 60 KiB events: /health 45.8 s, RSS
// 1.15 GB), a follower that never read held its backlog, and one key could hold every stream of
// the process. Now one feed per team fans each committed event out to its streams, a stream that
// falls behind is cut with a last `lagged` event, and streams are capped per team and per process.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { appendEvent } from '../../server/events/store.ts';
import { LAGGED_EVENT, MAX_BUFFERED, STREAM_TIMING } from '../../server/events/stream.ts';
import { assertError, otherTeam } from '../support/api.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { Stream } from '../support/sse.ts';

const until = async (pred: () => boolean) => {
  while (!pred()) await new Promise((r) => setTimeout(r, 10));
};

forEachDialect('live event fan-out', (dialect) => {
  let s: TestServer;
  let mine: string;
  let other: { key: string; teamId: string };
  before(async () => {
    s = await startTestServer(dialect, { SVC_DEV_LOGIN: '1' });
    mine = (await s.req('GET', '/v1/me')).body.team.ID;
    other = await otherTeam(s, 'fanout-other@example.com');
  });
  after(() => s.close());

  const bus = () => s.server.ctx.events;
  const open = (query = '', token = s.key) =>
    new Stream().open(`${s.url}/v1/events/stream${query}`, { authorization: `Bearer ${token}` });
  const append = (subject: string, kind: string, body: unknown = {}, teamId = mine) =>
    appendEvent(s.server.ctx.db, teamId, subject, kind, body, bus());

  test('many followers get every event once, in order, from one feed', { timeout: 60_000 }, async () => {
    const all = await Promise.all(Array.from({ length: 30 }, () => open()));
    const one = await Promise.all(Array.from({ length: 10 }, () => open('?subject=env:env_fan')));
    assert.equal(bus().streams(mine), 40);
    assert.equal(bus().feeds().teams, 1, 'one reader for the team, whatever the number of streams');
    const kinds: string[] = [];
    for (let i = 0; i < 60; i++) {
      kinds.push(`test.fan${i}`);
      await append(i % 3 === 0 ? 'env:env_fan' : 'dep:dep_fan', `test.fan${i}`, { i });
    }
    for (const st of all) await st.until((x) => x.events.length >= 60);
    for (const st of one) await st.until((x) => x.events.length >= 20);
    for (const st of all) {
      assert.deepEqual(
        st.events.map((e) => e.event.Kind),
        kinds,
      );
      assert.equal(new Set(st.events.map((e) => e.id)).size, 60);
    }
    for (const st of one) {
      assert.deepEqual(
        st.events.map((e) => e.event.Kind),
        kinds.filter((_, i) => i % 3 === 0),
      );
    }
    for (const st of [...all, ...one]) st.close();
    await until(() => bus().streams() === 0);
  });

  test(`a follower that stops reading is cut with a last '${LAGGED_EVENT}' event; its buffer stays bounded`, {
    timeout: 120_000,
  }, async () => {
    const reader = await open('?subject=env:env_lag');
    const stuck = await rawStream(s, s.key, '?subject=env:env_lag');
    await until(() => bus().streams(mine) === 2);
    const big = 'x'.repeat(60 * 1024);
    // The reader takes each event before the next is appended; the stuck one takes nothing, so its
    // socket buffers fill and then its stream's own buffer, until it is cut.
    let n = 0;
    for (; bus().streams(mine) === 2; n++) {
      assert.ok(n < 2_000, 'a follower that reads nothing was never cut');
      await append('env:env_lag', 'test.lag', { n, big });
      await reader.until((x) => x.events.length > n);
    }
    assert.equal(bus().streams(mine), 1, 'the reading follower is still there');
    assert.ok(bus().peakBuffered <= MAX_BUFFERED, `held ${bus().peakBuffered} bytes`);
    // The cut stream, read now: events up to some id, then the lagged event naming that id, then the end.
    const text = await stuck.readAll();
    const events = text.split('\n\n').filter((b) => b.includes('data: '));
    const last = events[events.length - 1];
    assert.match(last, new RegExp(`^event: ${LAGGED_EVENT}\\ndata: `));
    const said = JSON.parse(last.slice(last.indexOf('data: ') + 6));
    assert.match(said.error, /fell more than \d+ bytes behind/);
    const ids = [...text.matchAll(/^id: (evt_\w+)$/gm)].map((m) => m[1]);
    assert.ok(ids.length > 0 && ids.length < n);
    assert.equal(said.last_event_id, ids[ids.length - 1]);
    assert.equal((await s.req('GET', '/health', { token: false })).status, 200);
    reader.close();
    await until(() => bus().streams() === 0);
  });

  test('a cut stream whose client never reads is closed after the grace; the server goes on', {
    timeout: 120_000,
  }, async () => {
    const saved = STREAM_TIMING.cutGraceMs;
    STREAM_TIMING.cutGraceMs = 50;
    try {
      const dropped = bus().dropped;
      const stuck = await rawStream(s, s.key, '?subject=env:env_gone');
      await until(() => bus().streams(mine) === 1);
      const big = 'y'.repeat(60 * 1024);
      for (let n = 0; bus().streams(mine) === 1; n++) {
        assert.ok(n < 2_000, 'never cut');
        await append('env:env_gone', 'test.gone', { n, big });
        await new Promise((r) => setImmediate(r));
      }
      // The server drops the connection with what it still held, the lagged event included.
      await until(() => bus().dropped > dropped);
      const text = await stuck.readAll();
      assert.ok(text.includes('id: evt_'), 'what the socket had taken is still read');
      assert.ok(
        !text.includes(`event: ${LAGGED_EVENT}`),
        'the stream was closed before its last event went out',
      );
      assert.equal((await s.req('GET', '/health', { token: false })).status, 200);
    } finally {
      STREAM_TIMING.cutGraceMs = saved;
    }
  });

  test('streams are capped per team (429) and per process (503); other teams still get theirs', {
    timeout: 60_000,
  }, async () => {
    const saved = { ...bus().limits };
    Object.assign(bus().limits, { perTeam: 3, perProcess: 5 });
    try {
      const ours = await Promise.all([open(), open(), open()]);
      const fourth = await s.req('GET', '/v1/events/stream');
      assertError(fourth, 429, 'this team has 3 open event streams');
      assert.ok(Number(fourth.headers.get('retry-after')) >= 1);
      const theirs = await Promise.all([open('', other.key), open('', other.key)]);
      assert.deepEqual(
        theirs.map((t) => t.status),
        [200, 200],
      );
      assertError(
        await s.req('GET', '/v1/events/stream', { token: other.key }),
        503,
        'too many open event streams',
      );
      // A stream that ends gives its place back.
      ours[0].close();
      await until(() => bus().streams(mine) === 2);
      const again = await open();
      assert.equal(again.status, 200);
      for (const st of [...ours, ...theirs, again]) st.close();
      await until(() => bus().streams() === 0);
    } finally {
      Object.assign(bus().limits, saved);
    }
  });

  test('an event is published only once its transaction commits; a rolled-back one never', {
    timeout: 30_000,
  }, async () => {
    const heard: string[] = [];
    const spy = { publish: (e: { Kind: string }) => heard.push(e.Kind) };
    const db = s.server.ctx.db;
    await assert.rejects(
      db.transaction(async (tx) => {
        await appendEvent(tx, mine, 'env:env_tx', 'test.rolled-back', {}, spy);
        await appendEvent(tx, mine, 'env:env_tx', 'test.rolled-back', {}, bus());
        throw new Error('roll back');
      }),
      /roll back/,
    );
    assert.deepEqual(heard, []);
    const st = await open('?subject=env:env_tx');
    await db.transaction(async (tx) => {
      await appendEvent(tx, mine, 'env:env_tx', 'test.committed', {}, spy);
      assert.deepEqual(heard, [], 'not before COMMIT');
      await appendEvent(tx, mine, 'env:env_tx', 'test.committed', {}, bus());
    });
    assert.deepEqual(heard, ['test.committed']);
    await st.until((x) => x.events.length >= 1);
    await append('env:env_tx', 'test.after');
    await st.until((x) => x.events.length >= 2);
    assert.deepEqual(
      st.events.map((e) => e.event.Kind),
      ['test.committed', 'test.after'],
    );
    const rows = (await s.req('GET', '/v1/events?subject=env:env_tx')).body.events;
    assert.ok(rows.every((e: { Kind: string }) => e.Kind !== 'test.rolled-back'));
    st.close();
    await until(() => bus().streams() === 0);
  });
});

/** A stream opened on a raw socket that reads nothing until `readAll()`. */
async function rawStream(s: TestServer, key: string, query: string) {
  const { port } = new URL(s.url);
  const sock: Socket = connect(Number(port), '127.0.0.1');
  await new Promise<void>((r, j) => sock.once('connect', r).once('error', j));
  sock.pause();
  sock.write(`GET /v1/events/stream${query} HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`);
  return {
    readAll(): Promise<string> {
      const chunks: Buffer[] = [];
      return new Promise((resolve) => {
        sock.on('data', (c: Buffer) => chunks.push(c));
        // HTTP/1.0: no chunked framing, the body is what follows the headers.
        const done = () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve(text.slice(text.indexOf('\r\n\r\n') + 4));
        };
        sock.once('end', done).once('close', done).once('error', done);
        sock.resume();
      });
    },
  };
}
