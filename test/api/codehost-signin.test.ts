// Console sign-in through the code host, end to end against the GitHub stand-in: start → the
// provider's authorize page → callback → `<return>#token=<session>`; the session works and a second
// sign-in is the same user. Bad, reused and expired states are 400, and so is a return URL that is
// neither the console origin nor loopback.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { assertError } from '../support/api.ts';
import { FakeGitHub } from '../support/fakes/github.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';

const CONSOLE = 'https://console.svc.example';

async function location(url: string): Promise<URL> {
  const r = await fetch(url, { redirect: 'manual' });
  assert.equal(r.status, 302, `${url}: ${r.status} ${await r.text()}`);
  return new URL(r.headers.get('location') ?? '', url);
}

forEachDialect('code-host sign-in', (dialect) => {
  let s: TestServer;
  let gh: FakeGitHub;
  before(async () => {
    gh = await new FakeGitHub().start();
    s = await startTestServer(dialect, { ...gh.env(), SVC_CONSOLE_URL: CONSOLE });
  });
  after(async () => {
    await s?.close();
    await gh?.close();
  });

  test('start → provider → callback ends at <return>#token=<session>, a working session of a new user', async () => {
    const authorize = await location(
      `${s.url}/auth/codehost/start?return=${encodeURIComponent(`${CONSOLE}/app/projects`)}`,
    );
    assert.equal(`${authorize.origin}${authorize.pathname}`, `${gh.url}/login/oauth/authorize`);
    assert.equal(authorize.searchParams.get('client_id'), gh.clientId);
    assert.equal(authorize.searchParams.get('redirect_uri'), `${s.url}/auth/codehost/callback`);
    assert.equal(authorize.searchParams.get('scope'), 'read:user user:email');
    assert.ok((authorize.searchParams.get('state') ?? '').length >= 24);
    const callback = await location(authorize.toString());
    const done = await location(callback.toString());
    assert.equal(`${done.origin}${done.pathname}`, `${CONSOLE}/app/projects`);
    const token = /^#token=(dst_\S+)$/.exec(done.hash)?.[1];
    assert.ok(token, done.toString());
    const me = await s.req('GET', '/v1/me', { token });
    assert.equal(me.status, 200, JSON.stringify(me.body));
    assert.equal(me.body.user.Login, 'octocat');
    assert.equal(me.body.user.Email, 'octocat@github.example');
    assert.equal(me.body.team.Name, 'octocat', 'a personal team named after the login');

    // Again: the same user, no second team; the default return is <console>/app/.
    const again = await location(
      (await location((await location(`${s.url}/auth/codehost/start`)).toString())).toString(),
    );
    assert.equal(`${again.origin}${again.pathname}`, `${CONSOLE}/app/`);
    const me2 = await s.req('GET', '/v1/me', { token: again.hash.slice('#token='.length) });
    assert.equal(me2.body.user.ID, me.body.user.ID);
    assert.equal(me2.body.teams.length, 1);
    const exchange = gh.calls('POST', '/login/oauth/access_token')[0];
    assert.equal(exchange.body.client_secret, gh.clientSecret);
  });

  test('loopback returns are allowed; any other origin is 400 and starts nothing', async () => {
    for (const ok of ['http://localhost:5173/app/', 'http://127.0.0.1:9999/cb', `${CONSOLE}/elsewhere`]) {
      const to = await location(`${s.url}/auth/codehost/start?return=${encodeURIComponent(ok)}`);
      assert.equal(`${to.origin}${to.pathname}`, `${gh.url}/login/oauth/authorize`, ok);
    }
    for (const bad of [
      'https://evil.example/app/',
      'javascript:alert(1)',
      'http://localhost.evil.example/',
      'not a url',
    ]) {
      assertError(
        await s.req('GET', `/auth/codehost/start?return=${encodeURIComponent(bad)}`, { token: false }),
        400,
      );
    }
  });

  test('unknown, reused and expired states are 400; a refused code is 502 with the provider message', async () => {
    assertError(
      await s.req('GET', '/auth/codehost/callback?code=x&state=nope', { token: false }),
      400,
      'unknown sign-in state',
    );
    const authorize = await location(`${s.url}/auth/codehost/start`);
    const callback = await location(authorize.toString());
    const first = await fetch(callback, { redirect: 'manual' });
    assert.equal(first.status, 302);
    assertError(
      await s.req('GET', callback.pathname + callback.search, { token: false }),
      400,
      'unknown sign-in state',
    );

    const late = await location(await location(`${s.url}/auth/codehost/start`).then((u) => u.toString()));
    await s.server.ctx.oauthStates.expireAll();
    assertError(await s.req('GET', late.pathname + late.search, { token: false }), 400, 'expired');

    const state = (await location(`${s.url}/auth/codehost/start`)).searchParams.get('state');
    assertError(
      await s.req('GET', `/auth/codehost/callback?code=forged&state=${state}`, { token: false }),
      502,
      'The code passed is incorrect or expired.',
    );
  });
});
