// Project sources and the code-hosting routes, unconfigured (503 / configured: false) and with
// the app configured (installations listing and linking).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { assertError, createProject, otherTeam } from '../support/api.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';

async function seeInstallation(s: TestServer, id: number, teamId: string, login = 'acme'): Promise<void> {
  await s.server.ctx.db.run(
    'INSERT INTO installations (installation_id, team_id, account_login, created_at) VALUES (?, ?, ?, ?)',
    [id, teamId, login, new Date().toISOString()],
  );
}

forEachDialect('code hosting unconfigured', (dialect) => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(dialect, { SVC_DEV_LOGIN: '1' });
  });
  after(() => s.close());

  test('sign-in routes answer 503 naming what to set', async () => {
    for (const path of [
      '/auth/codehost/start',
      '/auth/codehost/start?return=http://localhost:3000/',
      '/auth/codehost/callback?code=x&state=y',
    ]) {
      assertError(await s.req('GET', path, { token: false }), 503, 'SVC_CODEHOST_CLIENT_ID');
    }
  });

  test('the webhook answers 503 before reading the body', async () => {
    assertError(
      await s.req('POST', '/webhooks/codehost', {
        token: false,
        body: { zen: 'hi' },
        headers: { 'x-github-event': 'ping' },
      }),
      503,
      'SVC_CODEHOST_APP_ID',
    );
    assertError(
      await s.req('POST', '/webhooks/codehost', {
        token: false,
        raw: 'a=b',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
      503,
    );
    assertError(
      await s.req('POST', '/webhooks/codehost', {
        token: false,
        raw: '{bad',
        headers: { 'content-type': 'application/json' },
      }),
      503,
    );
  });

  test('/v1/codehost/*: report configured false, never 503; an unseen installation is 404', async () => {
    const r = await s.req('GET', '/v1/codehost/installations');
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { installations: [], configured: false });
    assertError(await s.req('POST', '/v1/codehost/installations/41/link'), 404, 'has not been reported');
    // A row left from a time the app was on is not reported while it is off: still unseen.
    await seeInstallation(s, 42, '');
    assert.deepEqual((await s.req('GET', '/v1/codehost/installations')).body, {
      installations: [],
      configured: false,
    });
    assertError(await s.req('POST', '/v1/codehost/installations/42/link'), 404, 'SVC_CODEHOST_APP_ID');
    const stored = await s.server.ctx.db.get<{ team_id: string }>(
      'SELECT team_id FROM installations WHERE installation_id = ?',
      [42],
    );
    assert.equal(stored?.team_id, '', 'the refused link changed nothing');
    for (const path of ['/v1/codehost/repos?installation=42', '/v1/codehost/repos']) {
      const repos = await s.req('GET', path);
      assert.equal(repos.status, 200, JSON.stringify(repos.body));
      assert.deepEqual(repos.body, { repos: [], configured: false });
    }
    assertError(await s.req('GET', '/v1/codehost/repos?installation=x'), 400);
    assertError(await s.req('GET', '/v1/codehost/installations', { token: false }), 401);
    assertError(await s.req('POST', '/v1/codehost/installations/abc/link'), 400);
  });

  test('deploy-from-source: 404 for an unknown project, else 503 while the app is off', async () => {
    await createProject(s, 'pushy', { source: 'github:acme/pushy' });
    assertError(
      await s.req('POST', '/v1/projects/pushy/deploy-from-source', { body: { branch: 'main' } }),
      503,
      'SVC_CODEHOST_APP_ID',
    );
    assertError(await s.req('POST', '/v1/projects/pushy/deploy-from-source'), 503);
    assertError(await s.req('POST', '/v1/projects/nope/deploy-from-source'), 404);
    assertError(
      await s.req('POST', '/v1/projects/pushy/deploy-from-source', { body: { sha: 'x' } }),
      400,
      "unknown field 'sha'",
    );
  });

  test('a <provider>:<owner>/<repo> source gets a source row with the default compose path', async () => {
    const p = await createProject(s, 'shop', { source: 'github:acme/shop-api' });
    assert.equal(p.project.Source, 'github:acme/shop-api');
    for (const ref of ['shop', p.project.ID]) {
      const r = await s.req('GET', `/v1/projects/${ref}/source`);
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.source, {
        ProjectID: p.project.ID,
        Repo: 'acme/shop-api',
        DefaultBranch: '',
        ComposePath: 'docker-compose.yaml',
        InstallationID: 0,
        DeployBranches: null,
        LastDeployedSHA: '',
      });
    }
    const free = await createProject(s, 'notes', { source: 'somewhere on my laptop' });
    assert.equal(free.project.Source, 'somewhere on my laptop');
    assertError(await s.req('GET', '/v1/projects/notes/source'), 404, 'has no source repository');
    assertError(await s.req('POST', '/v1/projects/notes/source', { body: { compose_path: 'a.yaml' } }), 404);
    assertError(await s.req('GET', '/v1/projects/nope/source'), 404, "project 'nope' not found");
  });

  test('POST source: fields change, empty strings, 0 and null leave them, bad values are 400', async () => {
    await createProject(s, 'settings', { source: 'github:acme/settings' });
    const post = (body: object) => s.req('POST', '/v1/projects/settings/source', { body });
    const set = await post({
      default_branch: 'main',
      compose_path: 'deploy/compose.yaml',
      deploy_branches: true,
    });
    assert.equal(set.status, 200);
    assert.equal(set.body.source.DefaultBranch, 'main');
    assert.equal(set.body.source.ComposePath, 'deploy/compose.yaml');
    assert.equal(set.body.source.DeployBranches, true);
    const kept = await post({
      default_branch: '',
      compose_path: '',
      installation_id: 0,
      deploy_branches: null,
    });
    assert.deepEqual(kept.body.source, set.body.source);
    assert.deepEqual((await post({})).body.source, set.body.source);
    assert.equal((await post({ deploy_branches: false })).body.source.DeployBranches, false);
    assert.equal((await post({ default_branch: 'release/v2' })).body.source.DefaultBranch, 'release/v2');

    for (const compose_path of ['../escape.yaml', '/etc/compose.yaml', 'a//b.yaml', 'a b.yaml', 'x/./y']) {
      assertError(await post({ compose_path }), 400, 'compose_path');
    }
    for (const default_branch of ['-x', 'a..b', 'has space', 'x.lock', 'end/']) {
      assertError(await post({ default_branch }), 400, 'default_branch');
    }
    assertError(await post({ installation_id: -1 }), 400);
    assertError(await post({ deploy_branches: 'yes' }), 400);
    assertError(await post({ repo: 'other/repo' }), 400, "unknown field 'repo'");
    const after = (await s.req('GET', '/v1/projects/settings/source')).body.source;
    assert.equal(after.ComposePath, 'deploy/compose.yaml', 'refusals changed nothing');
  });

  test('installation_id must be linked to the team: 400 unknown or unlinked, 409 another team', async () => {
    await createProject(s, 'linked', { source: 'github:acme/linked' });
    const me = (await s.req('GET', '/v1/me')).body.team.ID;
    const other = await otherTeam(s, 'inst-other@example.com');
    await seeInstallation(s, 100, me);
    await seeInstallation(s, 101, '');
    await seeInstallation(s, 102, other.teamId);
    const post = (installation_id: number) =>
      s.req('POST', '/v1/projects/linked/source', { body: { installation_id } });
    assertError(await post(999), 400, 'not linked to this team');
    assertError(await post(101), 400, 'POST /v1/codehost/installations/101/link');
    assertError(await post(102), 409, 'another team');
    const ok = await post(100);
    assert.equal(ok.status, 200);
    assert.equal(ok.body.source.InstallationID, 100);
  });
});

forEachDialect('code hosting app configured', (dialect) => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(dialect, {
      SVC_DEV_LOGIN: '1',
      SVC_CODEHOST_APP_ID: '12345',
      SVC_CODEHOST_APP_PRIVATE_KEY: '-----BEGIN PRIVATE KEY-----\nnot-used-here\n-----END PRIVATE KEY-----',
    });
  });
  after(() => s.close());

  test('installations: configured true, the team only; linking needs a user signed in with the code host', async () => {
    const other = await otherTeam(s, 'app-other@example.com');
    await seeInstallation(s, 7, '', 'acme');
    await seeInstallation(s, 8, other.teamId, 'globex');
    const empty = await s.req('GET', '/v1/codehost/installations');
    assert.deepEqual(empty.body, { installations: [], configured: true });
    // An API key has no user for the code host to ask about: 403 whatever the id.
    for (const id of [7, 8, 9]) {
      assertError(
        await s.req('POST', `/v1/codehost/installations/${id}/link`),
        403,
        'signed in with the code host',
      );
    }
    // A session from elsewhere, while code-host sign-in is not configured: 503 naming it.
    assertError(
      await s.req('POST', '/v1/codehost/installations/7/link', { token: other.session }),
      503,
      'SVC_CODEHOST_CLIENT_ID',
    );
    const row = await s.server.ctx.db.get<{ team_id: string }>(
      'SELECT team_id FROM installations WHERE installation_id = 7',
    );
    assert.equal(row?.team_id, '', 'the refused links changed nothing');
    assert.deepEqual((await s.req('GET', '/v1/codehost/installations')).body.installations, []);
  });
});
