// Sign-in, teams, keys and the authentication matrix, against a real server on SQLite and Postgres.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { assertError, createProject, otherTeam, signIn } from '../support/api.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';

forEachDialect('identity routes', (dialect) => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(dialect, { SVC_DEV_LOGIN: '1' });
  });
  after(() => s.close());

  test('GET /v1/me with an API key: one team with role key, no user', async () => {
    const r = await s.req('GET', '/v1/me');
    assert.equal(r.status, 200);
    assert.equal(r.body.team.Name, 'default');
    assert.deepEqual(Object.keys(r.body.team).sort(), ['CreatedAt', 'ID', 'Name']);
    assert.deepEqual(r.body.teams, [{ ...r.body.team, Role: 'key' }]);
    assert.equal(r.body.user, undefined);
  });

  test('dev login creates the user once, with a personal team they own', async () => {
    const first = await signIn(s, 'Ada@Example.com', 'Ada Lovelace');
    const me = await s.req('GET', '/v1/me', { token: first.session });
    assert.deepEqual(Object.keys(me.body.user).sort(), ['CreatedAt', 'Email', 'ID', 'Login', 'Name']);
    assert.equal(me.body.user.Email, 'ada@example.com');
    assert.equal(me.body.user.Login, 'ada');
    assert.equal(me.body.user.Name, 'Ada Lovelace');
    assert.equal(me.body.team.Name, 'Ada Lovelace');
    assert.deepEqual(
      me.body.teams.map((t: { Role: string }) => t.Role),
      ['owner'],
    );
    assert.match(first.session, /^dst_/);
    // Signing in again finds the same user and team; a new session is minted.
    const again = await signIn(s, 'ada@example.com');
    assert.notEqual(again.session, first.session);
    assert.equal(again.userId, first.userId);
    assert.equal(again.teamId, first.teamId);
  });

  test('dev login validates its body', async () => {
    assertError(await s.req('POST', '/auth/dev-login', { body: {}, token: false }), 400, 'email');
    assertError(
      await s.req('POST', '/auth/dev-login', { body: { email: 'nope' }, token: false }),
      400,
      'email',
    );
    assertError(
      await s.req('POST', '/auth/dev-login', { body: { email: 'a@b.co', admin: true }, token: false }),
      400,
      "unknown field 'admin'",
    );
  });

  test('teams: list and create are for sessions; the creator owns the new team', async () => {
    const u = await signIn(s, 'teams@example.com');
    const created = await s.req('POST', '/v1/teams', { token: u.session, body: { name: 'research' } });
    assert.equal(created.status, 201);
    assert.deepEqual(Object.keys(created.body.team).sort(), ['CreatedAt', 'ID', 'Name']);
    assert.equal(created.body.team.Name, 'research');
    const list = await s.req('GET', '/v1/teams', { token: u.session });
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.teams.map((t: { Name: string; Role: string }) => [t.Name, t.Role]),
      [
        ['teams', 'owner'],
        ['research', 'owner'],
      ],
    );
    // X-Svc-Team picks the team a session acts as.
    const me = await s.req('GET', '/v1/me', {
      token: u.session,
      headers: { 'x-svc-team': created.body.team.ID },
    });
    assert.equal(me.body.team.ID, created.body.team.ID);
    assert.equal(me.body.teams.length, 2);
    assertError(await s.req('POST', '/v1/teams', { token: u.session, body: { name: '' } }), 400, 'body.name');
    assertError(await s.req('POST', '/v1/teams', { token: u.session, body: { name: '   ' } }), 400, 'blank');
    assertError(
      await s.req('POST', '/v1/teams', { token: u.session, body: {} }),
      400,
      'body.name is required',
    );
    assertError(await s.req('GET', '/v1/teams'), 403, 'user session');
    assertError(await s.req('POST', '/v1/teams', { body: { name: 'x' } }), 403, 'user session');
  });

  test('keys: mint (shown once), list without material, revoke; a revoked key is refused', async () => {
    const minted = await s.req('POST', '/v1/keys', { body: { name: 'ci' } });
    assert.equal(minted.status, 201);
    assert.match(minted.body.api_key, /^dak_/);
    assert.deepEqual(Object.keys(minted.body.key).sort(), [
      'CreatedAt',
      'CreatedBy',
      'ID',
      'LastUsedAt',
      'Name',
      'RevokedAt',
      'TeamID',
    ]);
    assert.equal(minted.body.key.Name, 'ci');
    const defaulted = await s.req('POST', '/v1/keys');
    assert.equal(defaulted.status, 201);
    assert.equal(defaulted.body.key.Name, 'key');

    const list = await s.req('GET', '/v1/keys');
    assert.equal(list.status, 200);
    assert.ok(list.body.keys.some((k: { ID: string }) => k.ID === minted.body.key.ID));
    assert.ok(!JSON.stringify(list.body).includes(minted.body.api_key), 'listing leaks key material');
    assert.ok(list.body.keys.every((k: object) => !('api_key' in k) && !('key_hash' in k)));

    const newKey = minted.body.api_key;
    const used = await s.req('GET', '/v1/me', { token: newKey });
    assert.equal(used.status, 200);
    const touched = (await s.req('GET', '/v1/keys')).body.keys.find(
      (k: { ID: string }) => k.ID === minted.body.key.ID,
    );
    assert.ok(touched.LastUsedAt, 'LastUsedAt is recorded');

    const revoked = await s.req('DELETE', `/v1/keys/${minted.body.key.ID}`);
    assert.equal(revoked.status, 200);
    assert.deepEqual(revoked.body, { revoked: true });
    assertError(await s.req('GET', '/v1/me', { token: newKey }), 401, 'revoked');
    const after = (await s.req('GET', '/v1/keys')).body.keys.find(
      (k: { ID: string }) => k.ID === minted.body.key.ID,
    );
    assert.ok(after.RevokedAt);
    // Revoking again keeps the first time.
    assert.equal((await s.req('DELETE', `/v1/keys/${minted.body.key.ID}`)).status, 200);
    const twice = (await s.req('GET', '/v1/keys')).body.keys.find(
      (k: { ID: string }) => k.ID === minted.body.key.ID,
    );
    assert.equal(twice.RevokedAt, after.RevokedAt);
    assertError(await s.req('DELETE', '/v1/keys/key_nope'), 404, 'key_nope');
    assertError(await s.req('POST', '/v1/keys', { body: { name: 7 } }), 400, 'body.name');
  });

  test("another team's key cannot be revoked or seen (404)", async () => {
    const other = await otherTeam(s, 'keys-other@example.com');
    const theirs = (await s.req('GET', '/v1/keys', { token: other.key })).body.keys[0];
    assertError(await s.req('DELETE', `/v1/keys/${theirs.ID}`), 404);
    const mine = await s.req('GET', '/v1/keys');
    assert.ok(!mine.body.keys.some((k: { ID: string }) => k.ID === theirs.ID));
    assert.equal((await s.req('GET', '/v1/me', { token: other.key })).status, 200, 'still valid');
  });

  test('a key minted by a session belongs to the session team and records the user', async () => {
    const u = await signIn(s, 'minter@example.com');
    const k = await s.req('POST', '/v1/keys', { token: u.session });
    assert.equal(k.body.key.TeamID, u.teamId);
    assert.equal(k.body.key.CreatedBy, u.userId);
    const me = await s.req('GET', '/v1/me', { token: k.body.api_key });
    assert.equal(me.body.team.ID, u.teamId);
  });

  test('authentication matrix', async () => {
    const u = await signIn(s, 'matrix@example.com');
    const other = await otherTeam(s, 'matrix-other@example.com');
    const project = await createProject(s, 'matrix');
    const envId = project.environments[0].ID;

    // No credential, malformed, unknown type, bad key, bad session → 401.
    assertError(await s.req('GET', '/v1/me', { token: false }), 401);
    assertError(await s.req('GET', '/v1/me', { token: false, headers: { authorization: 'Basic abc' } }), 401);
    assertError(await s.req('GET', '/v1/me', { token: 'tok_whatever' }), 401);
    assertError(
      await s.req('GET', '/v1/me', { token: 'dak_not-a-real-key-0000000000' }),
      401,
      'invalid API key',
    );
    assertError(
      await s.req('GET', '/v1/me', { token: 'dst_not-a-real-session-00000' }),
      401,
      'invalid session',
    );
    assertError(await s.req('GET', `/v1/envs/${envId}`, { token: false }), 401);

    // An API key on a session-only route → 403; a session on a key route works.
    assertError(await s.req('GET', '/v1/teams'), 403);
    // ...but a bad or revoked key is a bad credential first: 401 on a session-only route too.
    assertError(await s.req('GET', '/v1/teams', { token: 'dak_not-a-real-key-0000000000' }), 401, 'invalid');
    const doomed = await s.req('POST', '/v1/keys', { body: { name: 'doomed' } });
    assert.equal((await s.req('DELETE', `/v1/keys/${doomed.body.key.ID}`)).status, 200);
    for (const [method, path] of [
      ['GET', '/v1/teams'],
      ['POST', '/v1/teams'],
      ['POST', '/v1/device/approve'],
    ]) {
      assertError(
        await s.req(method, path, { token: doomed.body.api_key, ...(method === 'POST' ? { body: {} } : {}) }),
        401,
        'revoked',
      );
    }
    assert.equal((await s.req('GET', '/v1/projects', { token: u.session })).status, 200);

    // A session asking for a team it is not a member of → 403.
    assertError(
      await s.req('GET', '/v1/projects', { token: u.session, headers: { 'x-svc-team': other.teamId } }),
      403,
      'not a member',
    );

    // Another team's objects are not found, by key and by session.
    assertError(await s.req('GET', `/v1/envs/${envId}`, { token: other.key }), 404);
    assertError(await s.req('GET', `/v1/envs/${envId}`, { token: other.session }), 404);
    assertError(await s.req('GET', '/v1/projects/matrix/envs', { token: other.key }), 404);
    assert.equal((await s.req('GET', '/v1/projects', { token: other.key })).body.projects.length, 0);

    // An expired session → 401; a session whose user has no team → 403.
    const db = s.server.ctx.db;
    const stale = await signIn(s, 'stale@example.com');
    await db.run('UPDATE sessions SET expires_at = ? WHERE user_id = ?', [
      new Date(Date.now() - 1000).toISOString(),
      stale.userId,
    ]);
    assertError(await s.req('GET', '/v1/me', { token: stale.session }), 401, 'expired');
    const lonely = await signIn(s, 'lonely@example.com');
    await db.run('DELETE FROM memberships WHERE user_id = ?', [lonely.userId]);
    assertError(await s.req('GET', '/v1/me', { token: lonely.session }), 403, 'no team');

    // Routes with auth none need nothing.
    assert.equal((await s.req('GET', '/health', { token: false })).status, 200);
    assert.equal((await s.req('POST', '/v1/device/code', { token: false })).status, 200);
  });
});

forEachDialect('dev login disabled', (dialect) => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(dialect);
  });
  after(() => s.close());

  test('POST /auth/dev-login is 404 without SVC_DEV_LOGIN=1, whatever the body', async () => {
    assertError(
      await s.req('POST', '/auth/dev-login', { body: { email: 'a@b.co' }, token: false }),
      404,
      'SVC_DEV_LOGIN',
    );
    assertError(
      await s.req('POST', '/auth/dev-login', {
        raw: '{bad',
        token: false,
        headers: { 'content-type': 'application/json' },
      }),
      404,
    );
  });
});
