// Two control-plane replicas on one Postgres database, with nothing of a sign-in only in one
// process's memory: the device flow and the code-host sign-in complete when each step reaches a
// different replica, and the limits that stop guessing count the attempts made on both.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, signIn } from '../support/api.ts';
import { FakeGitHub } from '../support/fakes/github.ts';
import { startReplicas, type TestServer } from '../support/server.ts';
import { tier } from '../support/tiers.ts';

async function location(url: string): Promise<URL> {
  const r = await fetch(url, { redirect: 'manual' });
  assert.equal(r.status, 302, `${url}: ${r.status} ${await r.text()}`);
  return new URL(r.headers.get('location') ?? '', url);
}

/** The same path and query on another replica (what a balancer does). */
const on = (s: TestServer, u: URL) => `${s.url}${u.pathname}${u.search}`;

describe('sign-in across replicas [postgres]', { skip: tier('postgres') }, () => {
  let a: TestServer;
  let b: TestServer;
  let gh: FakeGitHub;
  before(async () => {
    gh = await new FakeGitHub().start();
    [a, b] = await startReplicas(2, { ...gh.env(), SVC_DEV_LOGIN: '1' });
    // Both are behind one public address (a balancer): the code host redirects there.
    b.server.ctx.config.publicUrl = a.url;
  });
  after(async () => {
    await b?.close();
    await a?.close();
    await gh?.close();
  });

  test('device flow: code on one replica, approve on the other, the key handed out once by either', async () => {
    const u = await signIn(b, 'device-two@example.com');
    const code = await a.req('POST', '/v1/device/code', { token: false });
    assert.equal(code.status, 200);
    const poll = (s: TestServer) =>
      s.req('POST', '/v1/device/token', { token: false, body: { device_code: code.body.device_code } });
    assertError(await poll(b), 428, 'authorization_pending');
    const ok = await b.req('POST', '/v1/device/approve', {
      token: u.session,
      body: { user_code: code.body.user_code, team_id: u.teamId },
    });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    const got = await poll(a);
    assert.equal(got.status, 200, JSON.stringify(got.body));
    assert.match(got.body.api_key, /^dak_/);
    assert.equal(got.body.team.ID, u.teamId);
    // The key works on both replicas; it is handed out exactly once, whoever asks again.
    for (const s of [a, b])
      assert.equal((await s.req('GET', '/v1/projects', { token: got.body.api_key })).status, 200);
    assertError(await poll(b), 410, 'already handed out');
    assertError(await poll(a), 410, 'already handed out');
  });

  test('two polls racing on two replicas: one key, one 410', async () => {
    const u = await signIn(a, 'device-race@example.com');
    const code = await b.req('POST', '/v1/device/code', { token: false });
    const ok = await a.req('POST', '/v1/device/approve', {
      token: u.session,
      body: { user_code: code.body.user_code, team_id: u.teamId },
    });
    assert.equal(ok.status, 200);
    const body = { device_code: code.body.device_code };
    const answers = await Promise.all(
      [a, b, a, b].map((s) => s.req('POST', '/v1/device/token', { token: false, body })),
    );
    assert.deepEqual(answers.map((r) => r.status).sort(), [200, 410, 410, 410]);
  });

  test('code-host sign-in: started on one replica, the callback on the other', async () => {
    const authorize = await location(
      `${a.url}/auth/codehost/start?return=${encodeURIComponent('http://localhost:5173/app/')}`,
    );
    const callback = await location(authorize.toString());
    assert.equal(callback.origin, new URL(a.url).origin);
    // The provider's redirect lands on the other replica.
    const done = await location(on(b, callback));
    assert.equal(`${done.origin}${done.pathname}`, 'http://localhost:5173/app/');
    const token = /^#token=(dst_\S+)$/.exec(done.hash)?.[1];
    assert.ok(token, done.toString());
    for (const s of [a, b])
      assert.equal((await s.req('GET', '/v1/me', { token })).body.user.Login, 'octocat');
    // The state is used up on every replica.
    assertError(
      await a.req('GET', callback.pathname + callback.search, { token: false }),
      400,
      'unknown sign-in state',
    );
    assertError(
      await b.req('GET', callback.pathname + callback.search, { token: false }),
      400,
      'unknown sign-in state',
    );
  });

  test('a state is stored as a hash, never as itself', async () => {
    const authorize = await location(`${b.url}/auth/codehost/start`);
    const state = authorize.searchParams.get('state') ?? '';
    const rows = await a.server.ctx.db.all<{ state_hash: string }>('SELECT state_hash FROM oauth_states');
    assert.ok(rows.length > 0);
    assert.ok(rows.every((r) => r.state_hash !== state && /^[0-9a-f]{64}$/.test(r.state_hash)));
  });

  test('unknown user codes are counted on both replicas before approvals lock', async () => {
    const who = await signIn(a, 'guess-two@example.com');
    for (let i = 0; i < 5; i++) {
      const s = i % 2 ? b : a;
      const r = await s.req('POST', '/v1/device/approve', {
        token: who.session,
        body: { user_code: `BCDF-GHJ${'KMNPQ'[i]}`, team_id: who.teamId },
      });
      assertError(r, 400, 'unknown user code');
    }
    const code = await b.req('POST', '/v1/device/code', { token: false });
    for (const s of [a, b]) {
      const r = await s.req('POST', '/v1/device/approve', {
        token: who.session,
        body: { user_code: code.body.user_code, team_id: who.teamId },
      });
      assertError(r, 429, 'too many unknown user codes');
    }
  });
});

describe('guessing limits across replicas [postgres]', { skip: tier('postgres') }, () => {
  let a: TestServer;
  let b: TestServer;
  before(async () => {
    [a, b] = await startReplicas(2, {}, { limits: { anonPerMinute: 5, authFailuresPerMinute: 3 } });
  });
  after(async () => {
    await b?.close();
    await a?.close();
  });

  test('sign-in steps per address are counted on both replicas', async () => {
    const statuses: number[] = [];
    for (const s of [a, a, b, b, a])
      statuses.push((await s.req('POST', '/v1/device/code', { token: false })).status);
    assert.deepEqual(statuses, [200, 200, 200, 200, 200]);
    const r = await b.req('POST', '/v1/device/code', { token: false });
    assertError(r, 429, 'too many requests from this address');
    assert.ok(Number(r.headers.get('retry-after')) > 0);
    assertError(await a.req('POST', '/v1/device/code', { token: false }), 429, 'from this address');
  });

  test('failed authentications on one replica lock the address out of the other too', async () => {
    assert.equal((await b.req('GET', '/v1/projects')).status, 200);
    for (let i = 0; i < 3; i++)
      assertError(await a.req('GET', '/v1/projects', { token: `dak_bad${i}xxxxxxxxxxxxxxxx` }), 401);
    assertError(await a.req('GET', '/v1/projects'), 429, 'failed authentications');
    // The other replica reads the addresses over the limit every second (SHARED_REFRESH_MS).
    let last = 0;
    for (let i = 0; i < 100 && last !== 429; i++) {
      last = (await b.req('GET', '/v1/projects')).status;
      if (last !== 429) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(last, 429, 'refused with a good key on the other replica as well');
    assert.equal((await fetch(`${b.url}/health`)).status, 200);
  });
});
