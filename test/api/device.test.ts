// The CLI device flow end to end: code → approve (session) → token, exactly once.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { assertError, signIn } from '../support/api.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';

const USER_CODE = /^[BCDFGHJKMNPQRSTVWXZ]{4}-[BCDFGHJKMNPQRSTVWXZ]{4}$/;

forEachDialect('device flow', (dialect) => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(dialect, { SVC_DEV_LOGIN: '1' });
  });
  after(() => s.close());

  const start = async () => {
    const r = await s.req('POST', '/v1/device/code', { token: false });
    assert.equal(r.status, 200);
    return r.body;
  };
  const poll = (device_code: string) =>
    s.req('POST', '/v1/device/token', { token: false, body: { device_code } });

  test("POST /v1/device/code: codes, the console's device page, 900 s, 5 s", async () => {
    const c = await start();
    assert.match(c.device_code, /^ddc_[A-Za-z0-9_-]{43}$/);
    assert.match(c.user_code, USER_CODE);
    assert.equal(c.verification_uri, `${s.url}/app/device/`);
    assert.equal(c.verification_uri_complete, `${s.url}/app/device/?user_code=${c.user_code}`);
    assert.equal(c.expires_in, 900);
    assert.equal(c.interval, 5);
    const page = await fetch(c.verification_uri_complete);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
    const html = await page.text();
    assert.match(html, /<script type="module" src="\/app\/assets\/app-[A-Z0-9]+\.js">/);
    assert.ok(!html.includes(c.user_code), 'the page never echoes the query into HTML');
    // The earlier releases' /device link lands on the console's page with the code.
    const old = await fetch(`${s.url}/device?code=${c.user_code}`, { redirect: 'manual' });
    assert.equal(old.status, 302);
    assert.equal(old.headers.get('location'), `/app/device/?user_code=${c.user_code}`);
    const other = await start();
    assert.notEqual(other.device_code, c.device_code);
    assert.equal((await s.req('POST', '/v1/device/code', { token: false, body: {} })).status, 200);
    assertError(
      await s.req('POST', '/v1/device/code', { token: false, body: { x: 1 } }),
      400,
      "unknown field 'x'",
    );
  });

  test('token: pending is 428, unknown is 400 invalid_device_code, a missing code is 400', async () => {
    const c = await start();
    const pending = await poll(c.device_code);
    assertError(pending, 428);
    assert.equal(pending.body.error, 'authorization_pending');
    const unknown = await poll('ddc_nope');
    assertError(unknown, 400);
    assert.equal(unknown.body.error, 'invalid_device_code');
    assertError(await s.req('POST', '/v1/device/token', { token: false, body: {} }), 400, 'device_code');
  });

  test('approve then token: the key is handed out exactly once and works for the team', async () => {
    const u = await signIn(s, 'device@example.com');
    const c = await start();
    const approved = await s.req('POST', '/v1/device/approve', {
      token: u.session,
      body: { user_code: c.user_code.toLowerCase().replace('-', ' '), team_id: u.teamId, name: 'laptop' },
    });
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    assert.equal(approved.body.approved, true);
    assert.equal(approved.body.team_id, u.teamId);
    assert.match(approved.body.key_id, /^key_/);

    const got = await poll(c.device_code);
    assert.equal(got.status, 200);
    assert.match(got.body.api_key, /^dak_/);
    assert.deepEqual(Object.keys(got.body.team).sort(), ['CreatedAt', 'ID', 'Name']);
    assert.equal(got.body.team.ID, u.teamId);
    const me = await s.req('GET', '/v1/me', { token: got.body.api_key });
    assert.equal(me.body.team.ID, u.teamId);
    const keys = await s.req('GET', '/v1/keys', { token: u.session });
    const key = keys.body.keys.find((k: { ID: string }) => k.ID === approved.body.key_id);
    assert.equal(key.Name, 'laptop');
    assert.equal(key.CreatedBy, u.userId);

    assertError(await poll(c.device_code), 410, 'already handed out');
    assertError(
      await s.req('POST', '/v1/device/approve', {
        token: u.session,
        body: { user_code: c.user_code, team_id: u.teamId },
      }),
      409,
      'already approved',
    );
  });

  test('the default key name is cli; concurrent polls get the key once', async () => {
    const u = await signIn(s, 'device-race@example.com');
    const c = await start();
    const ok = await s.req('POST', '/v1/device/approve', {
      token: u.session,
      body: { user_code: c.user_code, team_id: u.teamId },
    });
    assert.equal(ok.status, 200);
    const results = await Promise.all([poll(c.device_code), poll(c.device_code), poll(c.device_code)]);
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 410, 410]);
    const keys = await s.req('GET', '/v1/keys', { token: u.session });
    assert.equal(keys.body.keys.find((k: { ID: string }) => k.ID === ok.body.key_id).Name, 'cli');
  });

  test('approve: sessions only, members only, known live codes only', async () => {
    const u = await signIn(s, 'approver@example.com');
    const stranger = await signIn(s, 'stranger@example.com');
    const c = await start();
    const body = { user_code: c.user_code, team_id: u.teamId };
    assertError(await s.req('POST', '/v1/device/approve', { body }), 403, 'user session');
    assertError(await s.req('POST', '/v1/device/approve', { token: false, body }), 401);
    assertError(
      await s.req('POST', '/v1/device/approve', { token: stranger.session, body }),
      403,
      'not a member of that team',
    );
    assertError(
      await s.req('POST', '/v1/device/approve', {
        token: u.session,
        body: { ...body, user_code: 'BBBB-BBBB' },
      }),
      400,
      'unknown user code',
    );
    assertError(
      await s.req('POST', '/v1/device/approve', {
        token: u.session,
        body: { ...body, user_code: 'AEIO-U123' },
      }),
      400,
      'XXXX-XXXX',
    );
    assertError(
      await s.req('POST', '/v1/device/approve', { token: u.session, body: { user_code: c.user_code } }),
      400,
    );
    // Nothing was approved by the refusals.
    assertError(await poll(c.device_code), 428);
  });

  test('expired codes: token says expired_token, approve is 400 and approves nothing', async () => {
    const u = await signIn(s, 'late@example.com');
    const c = await start();
    await s.server.ctx.db.run('UPDATE device_codes SET expires_at = ?', [
      new Date(Date.now() - 1000).toISOString(),
    ]);
    const r = await poll(c.device_code);
    assertError(r, 400);
    assert.equal(r.body.error, 'expired_token');
    assertError(
      await s.req('POST', '/v1/device/approve', {
        token: u.session,
        body: { user_code: c.user_code, team_id: u.teamId },
      }),
      400,
      'expired',
    );
    const keys = await s.req('GET', '/v1/keys', { token: u.session });
    assert.deepEqual(keys.body.keys, [], 'no key was minted for the expired code');
    assert.equal((await poll(c.device_code)).body.error, 'expired_token');
  });

  test('an approved key not fetched within 15 minutes is never handed out, and is revoked', async () => {
    const u = await signIn(s, 'too-late@example.com');
    const c = await start();
    const ok = await s.req('POST', '/v1/device/approve', {
      token: u.session,
      body: { user_code: c.user_code, team_id: u.teamId },
    });
    assert.equal(ok.status, 200);
    const row = await s.server.ctx.db.get<{ sealed_key: string }>(
      'SELECT sealed_key FROM device_codes WHERE status = ? AND key_id = ?',
      ['approved', ok.body.key_id],
    );
    assert.ok(row?.sealed_key, 'the key waits sealed');
    assert.ok(!row.sealed_key.includes(ok.body.key_id), 'nothing of the key in the clear');
    await s.server.ctx.db.run('UPDATE device_codes SET held_until = ? WHERE key_id = ?', [
      new Date(Date.now() - 1000).toISOString(),
      ok.body.key_id,
    ]);
    const r = await poll(c.device_code);
    assertError(r, 410, 'no longer held');
    const keys = await s.req('GET', '/v1/keys', { token: u.session });
    assert.ok(keys.body.keys.find((k: { ID: string }) => k.ID === ok.body.key_id).RevokedAt);
    assertError(await poll(c.device_code), 410);
    const gone = await s.server.ctx.db.get<{ sealed_key: string }>(
      'SELECT sealed_key FROM device_codes WHERE key_id = ?',
      [ok.body.key_id],
    );
    assert.equal(gone?.sealed_key, '', 'the sealed key is forgotten');
  });
});

forEachDialect('device flow with a console', (dialect) => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(dialect, { SVC_CONSOLE_URL: 'https://console.example.com' });
  });
  after(() => s.close());

  test('the verification URI is the configured console device page; no /device redirect', async () => {
    const c = (await s.req('POST', '/v1/device/code', { token: false })).body;
    assert.equal(c.verification_uri, 'https://console.example.com/app/device/');
    assert.equal(
      c.verification_uri_complete,
      `https://console.example.com/app/device/?user_code=${c.user_code}`,
    );
    assertError(await s.req('GET', '/device', { token: false }), 404);
  });
});
