// GET /v1/events/stream: Server-Sent Events with /v1/events' credential and subject
// filter, only the caller's team, heartbeat comments, and Last-Event-ID resumption that neither
// loses nor repeats an event.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { newId, PREFIX } from '../../protocol/ids.ts';
import { appendEvent } from '../../server/events/store.ts';
import { STREAM_TIMING } from '../../server/events/stream.ts';
import { assertError, otherTeam } from '../support/api.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { Stream } from '../support/sse.ts';

forEachDialect('GET /v1/events/stream', (dialect) => {
  let s: TestServer;
  let other: { key: string; teamId: string; session: string };
  let mine: string;
  before(async () => {
    s = await startTestServer(dialect, { SVC_DEV_LOGIN: '1' });
    other = await otherTeam(s, 'stream-other@example.com');
    mine = (await s.req('GET', '/v1/me')).body.team.ID;
  });
  after(() => s.close());

  const open = (query = '', headers: Record<string, string> = {}, token: string | false = s.key) =>
    new Stream().open(`${s.url}/v1/events/stream${query}`, {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...headers,
    });
  const append = (teamId: string, subject: string, kind: string, body: unknown = {}) =>
    appendEvent(s.server.ctx.db, teamId, subject, kind, body, s.server.ctx.events);

  test('401 without a credential or with a bad one; 400 for a bad subject or Last-Event-ID', {
    timeout: 30_000,
  }, async () => {
    const none = await open('', {}, false);
    assert.equal(none.status, 401);
    const bad = await open('', {}, 'dak_nope');
    assert.equal(bad.status, 401);
    assertError(await s.req('GET', '/v1/events/stream?subject=env'), 400, 'subject must be');
    assertError(
      await s.req('GET', '/v1/events/stream', { headers: { 'last-event-id': 'x' } }),
      400,
      'Last-Event-ID',
    );
  });

  test("only the caller's team's events, as id + data, in order; never another team's", {
    timeout: 30_000,
  }, async () => {
    const a = await open();
    const b = await open('', {}, other.key);
    assert.equal(a.status, 200);
    assert.match(a.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.equal(a.headers.get('cache-control'), 'no-store');
    await append(other.teamId, 'env:env_theirs', 'test.secret', { secret: 'theirs' });
    await append(mine, 'env:env_mine', 'test.one', { n: 1 });
    await append(mine, 'dep:dep_mine', 'test.two', { n: 2 });
    await a.until((x) => x.events.length >= 2);
    await b.until((x) => x.events.length >= 1);
    assert.deepEqual(
      a.events.map((e) => [e.event.Subject, e.event.Kind, e.event.Body]),
      [
        ['env:env_mine', 'test.one', { n: 1 }],
        ['dep:dep_mine', 'test.two', { n: 2 }],
      ],
    );
    for (const e of a.events) {
      assert.equal(e.id, e.event.ID);
      assert.equal(e.event.TeamID, mine);
    }
    assert.deepEqual(
      b.events.map((e) => e.event.Kind),
      ['test.secret'],
    );
    // One more of each: still nothing crosses over.
    await append(other.teamId, 'env:env_theirs', 'test.secret2');
    await append(mine, 'env:env_mine', 'test.three');
    await a.until((x) => x.events.length >= 3);
    await b.until((x) => x.events.length >= 2);
    assert.ok(a.events.every((e) => e.event.TeamID === mine));
    assert.ok(b.events.every((e) => e.event.TeamID === other.teamId));
    a.close();
    b.close();
  });

  test('?subject= filters like /v1/events; a session with X-Svc-Team follows that team', {
    timeout: 30_000,
  }, async () => {
    const env = await open('?subject=env:env_f');
    const viaSession = await open('?subject=env:env_f', { 'x-svc-team': other.teamId }, other.session);
    await append(mine, 'env:env_g', 'test.not-this');
    await append(other.teamId, 'env:env_f', 'test.their-f');
    await append(mine, 'env:env_f', 'test.this');
    await env.until((x) => x.events.length >= 1);
    await viaSession.until((x) => x.events.length >= 1);
    await append(mine, 'env:env_f', 'test.this-too');
    await env.until((x) => x.events.length >= 2);
    assert.deepEqual(
      env.events.map((e) => e.event.Kind),
      ['test.this', 'test.this-too'],
    );
    assert.deepEqual(
      viaSession.events.map((e) => e.event.Kind),
      ['test.their-f'],
    );
    env.close();
    viaSession.close();
  });

  test('Last-Event-ID resumes after that event: the missed ones once, none repeated', {
    timeout: 30_000,
  }, async () => {
    const first = await open('?subject=env:env_r');
    await append(mine, 'env:env_r', 'test.r1');
    await first.until((x) => x.events.length >= 1);
    first.close();
    const seen = first.events[0].id;
    await append(mine, 'env:env_r', 'test.r2');
    await append(mine, 'env:env_r', 'test.r3');
    const resumed = await open('?subject=env:env_r', { 'last-event-id': seen });
    await resumed.until((x) => x.events.length >= 2);
    await append(mine, 'env:env_r', 'test.r4');
    await resumed.until((x) => x.events.length >= 3);
    assert.deepEqual(
      resumed.events.map((e) => e.event.Kind),
      ['test.r2', 'test.r3', 'test.r4'],
    );
    // Without Last-Event-ID a stream starts with what comes next, not the backlog.
    const fresh = await open('?subject=env:env_r');
    await append(mine, 'env:env_r', 'test.r5');
    await fresh.until((x) => x.events.length >= 1);
    assert.deepEqual(
      fresh.events.map((e) => e.event.Kind),
      ['test.r5'],
    );
    resumed.close();
    fresh.close();
  });

  test('an insert that lands after a later-numbered event is still delivered, once', {
    timeout: 30_000,
  }, async () => {
    const st = await open('?subject=env:env_late');
    const early = newId(PREFIX.event); // numbered now, written after the next event (a slow writer)
    await append(mine, 'env:env_late', 'test.on-time');
    await st.until((x) => x.events.length >= 1);
    await s.server.ctx.db.run(
      'INSERT INTO events (id, team_id, subject, kind, body, at) VALUES (?, ?, ?, ?, ?, ?)',
      [early, mine, 'env:env_late', 'test.late', '{}', new Date().toISOString()],
    );
    await append(mine, 'env:env_late', 'test.after-late');
    await st.until((x) => x.events.length >= 3);
    assert.deepEqual(st.events.map((e) => e.event.Kind).sort(), [
      'test.after-late',
      'test.late',
      'test.on-time',
    ]);
    st.close();
  });

  test('heartbeat comments keep an idle stream open; a revoked key ends it', {
    timeout: 30_000,
  }, async () => {
    const saved = STREAM_TIMING.heartbeatMs;
    STREAM_TIMING.heartbeatMs = 50;
    try {
      const k = await s.req('POST', '/v1/keys', { body: { name: 'stream' } });
      const idle = await open('', {}, k.body.api_key);
      await idle.until((x) => x.comments.some((c) => c.trim().startsWith('heartbeat')));
      assert.equal(idle.events.length, 0);
      assert.equal((await s.req('DELETE', `/v1/keys/${k.body.key.ID}`)).status, 200);
      await idle.ended; // the next heartbeat finds the key revoked and ends the stream
      const again = await open('', {}, k.body.api_key);
      assert.equal(again.status, 401);
    } finally {
      STREAM_TIMING.heartbeatMs = saved;
    }
  });
});

test('a client that goes away releases its stream on the server', { timeout: 30_000 }, async () => {
  const s = await startTestServer('sqlite');
  try {
    const bus = s.server.ctx.events;
    const st = await new Stream().open(`${s.url}/v1/events/stream`, { authorization: `Bearer ${s.key}` });
    assert.equal(bus.streams(), 1);
    assert.equal(bus.feeds().teams, 1);
    st.close();
    while (bus.streams() > 0) await new Promise((r) => setTimeout(r, 20));
    assert.equal(bus.feeds().teams, 0, 'the last stream of a team ends its feed');
  } finally {
    await s.close();
  }
});

test('shutdown ends open streams instead of waiting for them', async () => {
  const s = await startTestServer('sqlite');
  const st = await new Stream().open(`${s.url}/v1/events/stream`, { authorization: `Bearer ${s.key}` });
  assert.equal(st.status, 200);
  await s.close(); // would hang the 10 s shutdown wait (and the test) if the stream stayed open
  st.close();
});
