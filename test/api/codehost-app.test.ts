// Push-to-deploy against a local GitHub stand-in (test/support/fakes/github.ts) with a fake sidecar
// as the host: webhook signatures and limits, installation events from the corpus payloads, linking,
// repositories, pushes (default branch → alpha, other branches by the spec's rule, the compose file at
// the pushed sha from compose_path), redeliveries, check runs (success, failure, a 403 on checks) and
// deploy-from-source. Bodies are the corpus's real payloads, signed as GitHub signs them.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, test } from 'node:test';
import { assertError, createProject, otherTeam } from '../support/api.ts';
import { codehostOwner } from '../support/codehost.ts';
import { FakeSidecar } from '../support/fake-sidecar.ts';
import { FakeGitHub } from '../support/fakes/github.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { payload, pushPayload, sendWebhook, WEBHOOK_SECRET } from '../support/webhooks.ts';

const SECRET = WEBHOOK_SECRET;
const send = sendWebhook;
const push = pushPayload;
const COMPOSE = (tag: string) =>
  `services:\n  app:\n    image: busybox:${tag}\n    command: ["sleep", "infinity"]\n`;
const SHA1 = 'a'.repeat(40);
const SHA2 = 'b'.repeat(40);
const SHA3 = 'c'.repeat(40);
const SHA4 = 'd'.repeat(40);
const SHA5 = 'e'.repeat(40);

async function until<T>(what: string, f: () => T | undefined | Promise<T | undefined>): Promise<T> {
  for (let i = 0; i < 300; i++) {
    const v = await f();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

forEachDialect('code hosting: the app, webhooks and push-to-deploy', (dialect) => {
  let base: TestServer;
  /** Answers as the team of the code-host user who owns the installations. */
  let s: TestServer;
  let session: string;
  let gh: FakeGitHub;
  let sc: FakeSidecar;
  const dep = async (id: string) => (await s.req('GET', `/v1/deployments/${id}`)).body.deployment;

  before(async () => {
    gh = await new FakeGitHub().start();
    gh.repos.push({
      full_name: 'acme/shop',
      default_branch: 'main',
      private: true,
      installation: 77,
      branches: { main: SHA1, 'feature/Fast': SHA2, 'fix/fast': SHA2 },
      files: {
        [SHA1]: { 'deploy/compose.yaml': COMPOSE('one') },
        [SHA2]: { 'deploy/compose.yaml': COMPOSE('two') },
        [SHA3]: { 'deploy/compose.yaml': 'services: {bad' },
        [SHA4]: { 'deploy/compose.yaml': COMPOSE('one') },
        [SHA5]: { 'deploy/compose.yaml': COMPOSE('one') },
      },
    });
    base = await startTestServer(dialect, { SVC_DEV_LOGIN: '1', ...gh.env(SECRET) });
    ({ s, session } = await codehostOwner(base, gh, 'acme-owner', [957387, 16598467, 77]));
    const jt = await s.req('POST', '/v1/join-tokens', { body: {} });
    sc = await new FakeSidecar(s.url).connect(jt.body.token);
  });
  after(async () => {
    await sc?.close();
    await base?.close();
    await gh?.close();
  });

  test('signatures: a match is handled; mismatch and unsigned are 401; over 2 MiB is 413; nothing changes', async () => {
    const ping = payload('octokit__ping__with-app_id.json');
    const ok = await send(s, 'ping', ping);
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.ok, true);
    assertError(await send(s, 'ping', ping, { secret: 'wrong' }), 401, 'signature mismatch');
    const unsigned = await s.req('POST', '/webhooks/codehost', {
      token: false,
      raw: JSON.stringify(ping),
      headers: { 'content-type': 'application/json', 'x-github-event': 'ping', 'x-github-delivery': 'u1' },
    });
    assertError(unsigned, 401, 'X-Hub-Signature-256');
    // The corpus's HMAC vector: the same bytes give GitHub's own signature.
    const v1 = Buffer.from('{"zen":"Anything added dilutes everything else.","hook_id":109948940}');
    assert.equal(
      `sha256=${createHmac('sha256', 'harbor-webhook-test-secret').update(v1).digest('hex')}`,
      'sha256=9038abf349ff83c17675a981ee1b0627853ec676150af669b96b11e8ed51eec8',
    );
    const huge = Buffer.from(JSON.stringify({ zen: 'x'.repeat(2 * 1024 * 1024) }));
    assertError(await send(s, 'ping', null, { raw: huge }), 413);
    const created = payload('octokit__installation__created.json');
    assertError(await send(s, 'installation', created, { secret: 'nope' }), 401);
    assert.deepEqual((await s.req('GET', '/v1/codehost/installations')).body.installations, []);
  });

  test('a configured app without a webhook secret refuses webhooks with 503', async () => {
    const bare = await startTestServer(dialect, { ...gh.env(SECRET), SVC_CODEHOST_WEBHOOK_SECRET: '' });
    try {
      assertError(await send(bare, 'ping', { zen: 'z' }), 503, 'SVC_CODEHOST_WEBHOOK_SECRET');
    } finally {
      await bare.close();
    }
  });

  test('installation events: created and unsuspend record it, new permissions keep it, deleted removes it', async () => {
    const created = payload('octokit__installation__created.json');
    const id = created.installation.id;
    const link = (to: number, token = session) =>
      s.req('POST', `/v1/codehost/installations/${to}/link`, { token });
    assertError(await link(id), 404, 'not an installation of the app that you can see');
    assert.equal((await send(s, 'installation', created)).status, 200);
    assert.equal((await link(id)).status, 200);
    const list = async () =>
      (await s.req('GET', '/v1/codehost/installations')).body.installations.map((i: any) => [
        i.InstallationID,
        i.AccountLogin,
      ]);
    assert.deepEqual(await list(), [[id, created.installation.account.login]]);
    const perms = payload('octokit__installation__new_permissions_accepted.json');
    const permsAt = { ...perms, installation: { ...perms.installation, id } };
    assert.equal((await send(s, 'installation', permsAt)).status, 200);
    assert.deepEqual(await list(), [[id, perms.installation.account.login]], 'still linked');
    const deleted = payload('octokit__installation__deleted.json');
    const deletedAt = { ...deleted, installation: { ...deleted.installation, id } };
    assert.equal((await send(s, 'installation', deletedAt)).status, 200);
    assert.deepEqual(await list(), []);
    const unsuspend = payload('octokit__installation__unsuspend.json');
    assert.equal((await send(s, 'installation', unsuspend)).status, 200);
    // Another user who can see it links it first; the owner's link is then 409.
    const other = await codehostOwner(base, gh, 'acme-admin', [unsuspend.installation.id]);
    assert.equal((await link(unsuspend.installation.id, other.session)).status, 200);
    assertError(await link(unsuspend.installation.id), 409, 'another team');
  });

  test('repos: what a linked installation sees; another team’s installation is 404', async () => {
    const created = payload('octokit__installation__created.json');
    const mine = {
      ...created,
      installation: { ...created.installation, id: 77, account: { login: 'acme' } },
    };
    assert.equal((await send(s, 'installation', mine)).status, 200);
    const linked = await s.req('POST', '/v1/codehost/installations/77/link', { token: session });
    assert.equal(linked.status, 200, JSON.stringify(linked.body));
    const r = await s.req('GET', '/v1/codehost/repos?installation=77');
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.repos, [{ full_name: 'acme/shop', default_branch: 'main', private: true }]);
    const other = await otherTeam(s, 'repos-other@example.com');
    assertError(await s.req('GET', '/v1/codehost/repos?installation=77', { token: other.key }), 404);
    assertError(await s.req('GET', '/v1/codehost/repos'), 400, 'installation');
    const asApp = gh.calls('POST', '/api/v3/app/installations/77/access_tokens');
    assert.ok(asApp.length >= 1 && asApp[0].auth.startsWith('Bearer ey'), 'an app JWT bought the token');
  });

  test('push to the default branch deploys the file at that sha to alpha, with a check run that ends success', async () => {
    await createProject(s, 'shop', { source: 'github:acme/shop' });
    const src = await s.req('POST', '/v1/projects/shop/source', {
      body: { installation_id: 77, compose_path: 'deploy/compose.yaml' },
    });
    assert.equal(src.status, 200, JSON.stringify(src.body));
    const r = await send(s, 'push', push('acme/shop', 'main', SHA1), { id: 'push-main-1' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.sha, SHA1);
    assert.equal(r.body.branch, 'main');
    assert.equal(r.body.projects.length, 1);
    const [out] = r.body.projects;
    assert.equal(out.project, 'shop');
    assert.equal(out.env, 'alpha');
    const d = await until('deploy', async () =>
      (await dep(out.deployment))?.FinishedAt ? dep(out.deployment) : undefined,
    );
    assert.equal(d.Status, 'succeeded');
    const create = sc.commands('env.create').at(-1);
    assert.equal((create as any).payload.services[0].image, 'busybox:one', 'the file at the pushed sha');
    assert.ok(
      gh.calls('GET', `/api/v3/repos/acme/shop/contents/deploy/compose.yaml?ref=${SHA1}`).length === 1,
    );
    const ev = (await s.req('GET', `/v1/events?subject=dep:${out.deployment}`)).body.events;
    assert.deepEqual(ev.find((e: any) => e.Kind === 'deployment.source').Body, {
      sha: SHA1,
      branch: 'main',
      repo: 'acme/shop',
      context: (create as any).payload.context.sha256,
    });
    assert.equal((await s.req('GET', '/v1/projects/shop/source')).body.source.LastDeployedSHA, SHA1);
    const run = await until('check run', () => gh.checkRuns.find((c) => c.updates.length > 0));
    assert.equal(run.body.head_sha, SHA1);
    assert.equal(run.body.status, 'in_progress');
    assert.equal(run.body.details_url, `${s.url}/app/deployment/?id=${out.deployment}`);
    assert.deepEqual(run.updates, [{ status: 'completed', conclusion: 'success' }]);

    // A redelivery answers the same and deploys nothing twice.
    const count = async () => (await s.req('GET', `/v1/envs/${d.EnvID}/deployments`)).body.deployments.length;
    const before = await count();
    const again = await send(s, 'push', push('acme/shop', 'main', SHA1), { id: 'push-main-1' });
    assert.deepEqual(again.body, r.body);
    assert.equal(await count(), before);
  });

  test('a signed push replayed with a new delivery id deploys nothing: that commit was deployed to that branch', async () => {
    const alpha = (await s.req('GET', '/v1/projects/shop/envs')).body.environments.find(
      (e: any) => e.Name === 'alpha',
    );
    const count = async () =>
      (await s.req('GET', `/v1/envs/${alpha.ID}/deployments`)).body.deployments.length;
    const before = await count();
    const replay = await send(s, 'push', push('acme/shop', 'main', SHA1), { id: 'push-main-replayed' });
    assert.equal(replay.status, 200, JSON.stringify(replay.body));
    assert.equal(replay.body.projects[0].deployment, undefined, JSON.stringify(replay.body));
    assert.match(replay.body.projects[0].skipped, /commit a{40} was already deployed to branch main/);
    assert.equal(await count(), before, 'no second deployment');
  });

  test('other branches: skipped unless the env exists or deploy_branches is on; the env name comes from the branch', async () => {
    const skipped = await send(s, 'push', push('acme/shop', 'feature/Fast', SHA2));
    assert.equal(skipped.body.projects[0].env, 'feature--ast');
    assert.match(skipped.body.projects[0].skipped, /deploy_branches is off/);
    assert.equal(skipped.body.projects[0].deployment, undefined);
    await s.req('POST', '/v1/projects/shop/source', { body: { deploy_branches: true } });
    const on = await send(s, 'push', push('acme/shop', 'feature/Fast', SHA2));
    assert.equal(on.body.projects[0].env, 'feature--ast');
    assert.ok(on.body.projects[0].deployment, JSON.stringify(on.body));
    // The spec's rule can give a name no environment may have: that project's push is an error.
    const upper = await send(s, 'push', push('acme/shop', 'Hotfix', SHA2));
    assert.equal(upper.body.projects[0].env, '-otfix');
    assert.match(upper.body.projects[0].error ?? '', /must match/);
    await s.req('POST', '/v1/projects/shop/source', { body: { deploy_branches: false } });
    // An environment that exists is deployed on push even with deploy_branches off.
    const existing = await send(s, 'push', push('acme/shop', 'feature/Fast', SHA1));
    assert.ok(existing.body.projects[0].deployment, JSON.stringify(existing.body));
    const envs = (await s.req('GET', '/v1/projects/shop/envs')).body.environments.map((e: any) => e.Name);
    assert.ok(envs.includes('feature--ast'));
  });

  test('a failed deployment ends its check run failure; a 403 on checks is tolerated; a bad file is an error', async () => {
    sc.handlers['env.create'] = () => {
      throw new Error('no room');
    };
    const failing = await send(s, 'push', push('acme/shop', 'main', SHA4));
    const id = failing.body.projects[0].deployment;
    await until('failure', async () => ((await dep(id))?.FinishedAt ? true : undefined));
    const run = await until('failure check run', () =>
      gh.checkRuns.find(
        (c) => c.body.details_url.endsWith(`=${id}`) && c.updates.some((u) => u.conclusion === 'failure'),
      ),
    );
    assert.equal(run.body.details_url, `${s.url}/app/deployment/?id=${id}`);
    delete sc.handlers['env.create'];

    gh.checkRunStatus = 403;
    const runs = gh.checkRuns.length;
    const quiet = await send(s, 'push', push('acme/shop', 'main', SHA5));
    const qid = quiet.body.projects[0].deployment;
    assert.equal(
      (await until('deploy', async () => ((await dep(qid))?.FinishedAt ? dep(qid) : undefined))).Status,
      'succeeded',
    );
    assert.equal(gh.checkRuns.length, runs, 'no check run without Checks: write');
    gh.checkRunStatus = 201;

    const bad = await send(s, 'push', push('acme/shop', 'main', SHA3));
    assert.equal(bad.status, 200);
    assert.match(bad.body.projects[0].error, /compose/);
    assert.equal(bad.body.projects[0].deployment, undefined);
  });

  test('deploy-from-source: 202 with branch and env; 409 without an installation that sees the repo', async () => {
    const r = await s.req('POST', '/v1/projects/shop/deploy-from-source', { body: {} });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    assert.equal(r.body.branch, 'main');
    assert.equal(r.body.env, 'alpha');
    assert.equal(
      r.body.deployment.EnvID,
      (await s.req('GET', '/v1/projects/shop/envs')).body.environments.find((e: any) => e.Name === 'alpha')
        .ID,
    );
    const run = await until('check run', () =>
      gh.checkRuns.find((c) => c.body.details_url.endsWith(r.body.deployment.ID) && c.updates.length),
    );
    assert.equal(run.body.head_sha, SHA1);
    const named = await s.req('POST', '/v1/projects/shop/deploy-from-source', {
      body: { branch: 'fix/fast', env: 'review' },
    });
    assert.equal(named.status, 202, JSON.stringify(named.body));
    assert.deepEqual([named.body.branch, named.body.env], ['fix/fast', 'review']);
    const missing = await s.req('POST', '/v1/projects/shop/deploy-from-source', { body: { branch: 'gone' } });
    assertError(missing, 502, 'Branch not found');
    await createProject(s, 'unlinked', { source: 'github:acme/shop' });
    assertError(
      await s.req('POST', '/v1/projects/unlinked/deploy-from-source', { body: {} }),
      409,
      'no installation',
    );
    await createProject(s, 'hidden', { source: 'github:acme/secret' });
    await s.req('POST', '/v1/projects/hidden/source', { body: { installation_id: 77 } });
    assertError(
      await s.req('POST', '/v1/projects/hidden/deploy-from-source', { body: {} }),
      409,
      'cannot see acme/secret',
    );
  });
});
