// Deploy from source ships the repository: a push fetches the archive at the pushed sha through
// GitHub's `GET /repos/{owner}/{repo}/tarball/{ref}` (302 to a codeload URL, fetched without our
// token), strips its top-level directory, stores it as an upload of the project's team and deploys
// with it as the context, the compose file's place in the repository honoured. Archives that are
// too large, malformed or missing fail that project's deployment with the reason.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { createProject } from '../support/api.ts';
import { codehostOwner } from '../support/codehost.ts';
import { FakeSidecar } from '../support/fake-sidecar.ts';
import { FakeGitHub } from '../support/fakes/github.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { installationCreated, pushPayload, sendWebhook } from '../support/webhooks.ts';

const SHA = '1'.repeat(40);
/** Another commit with the same files: a push deploys a commit once, so each refusal needs its own. */
const SHA_B = '3'.repeat(40);
const COMPOSE =
  'services:\n  app:\n    image: busybox:1\n    command: ["sleep", "infinity"]\n' +
  `    environment: {MODE: "\${MODE}"}\n` +
  '    env_file: [app.env]\n    volumes: ["../conf:/etc/app:ro"]\n';

const FILES = {
  'ops/compose.yaml': COMPOSE,
  'ops/.env': 'MODE=from-dotenv\n',
  'ops/app.env': 'FROM_FILE=yes\n',
  'conf/app.conf': 'a=1\n',
  'README.md': 'hello\n',
};

async function twoTops(): Promise<Buffer> {
  const p = tar.pack();
  p.entry({ name: 'a/x.txt' }, 'x');
  p.entry({ name: 'b/y.txt' }, 'y');
  p.finalize();
  const parts: Buffer[] = [];
  for await (const c of p) parts.push(c as Buffer);
  return gzipSync(Buffer.concat(parts));
}

forEachDialect('deploy from source ships the repository as the context', (dialect) => {
  let base: TestServer;
  let s: TestServer;
  let gh: FakeGitHub;
  let sc: FakeSidecar;

  before(async () => {
    gh = await new FakeGitHub().start();
    gh.repos.push({
      full_name: 'acme/site',
      default_branch: 'main',
      private: true,
      installation: 78,
      branches: { main: SHA },
      files: { [SHA]: FILES, [SHA_B]: FILES },
    });
    base = await startTestServer(dialect, gh.env());
    assert.equal((await sendWebhook(base, 'installation', installationCreated(78, 'acme'))).status, 200);
    ({ s } = await codehostOwner(base, gh, 'acme-owner', [78], [78]));
    const jt = await s.req('POST', '/v1/join-tokens', { body: {} });
    sc = await new FakeSidecar(s.url).connect(jt.body.token);
    await createProject(s, 'site', { source: 'github:acme/site' });
    const src = await s.req('POST', '/v1/projects/site/source', {
      body: { installation_id: 78, compose_path: 'ops/compose.yaml' },
    });
    assert.equal(src.status, 200, JSON.stringify(src.body));
  });
  after(async () => {
    await sc?.close();
    await base?.close();
    await gh?.close();
  });

  const pushMain = async (sha = SHA) => {
    const r = await sendWebhook(s, 'push', pushPayload('acme/site', 'main', sha, 78));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.projects[0];
  };

  test('a push deploys with the repository at that sha as the context', async () => {
    const out = await pushMain();
    assert.ok(out.deployment, JSON.stringify(out));
    for (let i = 0; i < 500 && sc.commands('env.create').length === 0; i++)
      await new Promise((r) => setTimeout(r, 20));
    const payload = sc.commands('env.create').at(-1)?.payload as any;
    assert.ok(payload, 'env.create was sent');
    assert.deepEqual(payload.services[0].binds, [{ source: 'conf', target: '/etc/app', read_only: true }]);
    assert.equal(payload.services[0].env.MODE, 'from-dotenv', '.env beside the compose file');
    assert.equal(payload.services[0].env.FROM_FILE, 'yes');
    assert.ok(payload.volumes.includes('svc.context'));
    const up = await s.server.ctx.db.get<{ id: string; sha256: string }>(
      'SELECT id, sha256 FROM uploads WHERE sha256 = ?',
      [payload.context.sha256],
    );
    assert.ok(up, 'the archive is stored as an upload');
    const dep = (await s.req('GET', `/v1/deployments/${out.deployment}`)).body.deployment;
    const versions = (await s.req('GET', `/v1/envs/${dep.EnvID}/versions`)).body.versions;
    assert.deepEqual(versions.at(-1).Spec.context, {
      upload: up.id,
      sha256: up.sha256,
      bytes: versions.at(-1).Spec.context.bytes,
      compose_path: 'ops/compose.yaml',
    });
    const api = gh.calls('GET', `/api/v3/repos/acme/site/tarball/${SHA}`);
    assert.equal(api.length, 1);
    assert.match(api[0].auth, /^Bearer ghs_/, 'the installation token asks for the archive');
    const load = gh.calls('GET', '/_codeload/acme/site/legacy.tar.gz/');
    assert.equal(load.length, 1);
    assert.equal(load[0].auth, '', 'the temporary URL is fetched without our token');
  });

  test('archives that are too large, malformed or gone fail the deployment with the reason', async () => {
    const uploads = async () =>
      Number((await s.server.ctx.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM uploads'))?.n);
    const before = await uploads();
    gh.archiveOverride = Buffer.from('x');
    gh.archiveDeclaredLength = 600 * 1024 * 1024;
    assert.match(
      (await pushMain(SHA_B)).error,
      /the archive of acme\/site at 3{40} is 600 MiB; the limit is 512 MiB/,
    );
    gh.archiveDeclaredLength = 0;
    gh.archiveOverride = await twoTops();
    assert.match((await pushMain(SHA_B)).error, /more than one top-level entry \('a', 'b'\)/);
    gh.archiveOverride = Buffer.from('not a tarball at all'.repeat(100));
    assert.match((await pushMain(SHA_B)).error, /not a tar archive/);
    gh.archiveOverride = null;
    gh.repos[0].branches.main = '2'.repeat(40);
    const gone = await sendWebhook(s, 'push', pushPayload('acme/site', 'main', '2'.repeat(40), 78));
    assert.match(gone.body.projects[0].error, /404 Not Found/);
    gh.repos[0].branches.main = SHA;
    assert.equal(await uploads(), before, 'nothing is stored for a refused archive');
  });
});
