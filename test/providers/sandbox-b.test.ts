// sandbox-b (Daytona shapes) end to end on a Docker-backed fake: create and poll until started,
// exec through the toolbox, one file at a time, the skipped snapshot and its refusals, the
// fallbacks (API toolbox path, snapshot instead of image), and destroy with force.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { FakeSandboxB } from '../support/fakes/sandbox-b.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { tier } from '../support/tiers.ts';
import {
  connectTarget,
  exec,
  finished,
  getFiles,
  phase,
  putFiles,
  refusesVerifyAndMultiService,
  tarOf,
  untar,
} from './harness.ts';

const docker = tier('docker');
const REFUSED =
  'sandbox-b: env.snapshot: not supported on sandbox-b yet (its snapshot API builds images, not snapshots of a running sandbox)';

forEachDialect('sandbox-b driver', (dialect) => {
  let t: TestServer;
  let fake: FakeSandboxB;
  let env = '';
  before(async () => {
    if (docker) return;
    await ensureTestImages();
    fake = await new FakeSandboxB().listen();
    t = await startTestServer(dialect);
  });
  after(async () => {
    await t?.close();
    await fake?.close();
  });

  test('connect, then a target sandbox: created, polled until started, command and env in place', {
    skip: docker,
  }, async () => {
    const c = await connectTarget(t, {
      provider: 'sandbox-b',
      token: fake.token,
      config: { api_url: fake.url },
    });
    assert.equal(c.host.Name, 'sandbox-b');
    assert.equal(c.capabilities.snapshot, 'snapshot to image');
    const r = await t.req('POST', '/v1/targets/sandbox-b/sandboxes', {
      body: {
        image: BUSYBOX_IMAGE,
        cmd: ['sh', '-c', 'echo "$WHO" > /tmp/started; sleep 100000'],
        env: { WHO: 'daytona' },
        egress: 'allow',
      },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    env = r.body.environment.ID;
    const { deployment, phases } = await finished(t, r.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded');
    assert.equal(phase(phases, 'snapshot').Status, 'skipped');
    assert.deepEqual(phase(phases, 'snapshot').Evidence, { reason: REFUSED });
    assert.deepEqual(phase(phases, 'verdict').Evidence.snapshot, '');
    assert.equal(phase(phases, 'prepare').Evidence.egress, 'allowed');
    const [sbx] = fake.sandboxes.values();
    assert.deepEqual(sbx.env, { WHO: 'daytona' });
    assert.equal(sbx.labels.svc_env, env);
    assert.equal(sbx.networkBlockAll, false);
    const polls = fake.faults.calls.filter((x) => x.method === 'GET' && x.path === `/sandbox/${sbx.id}`);
    assert.ok(polls.length >= 1, 'the driver polled the sandbox until started');
    let out = '';
    for (let i = 0; i < 50 && !out; i++) {
      out = (await exec(t, env, ['cat', '/tmp/started'])).stdout;
      if (!out) await new Promise((res) => setTimeout(res, 100));
    }
    assert.equal(out, 'daytona\n');
    const versions = (await t.req('GET', `/v1/envs/${env}/versions`)).body.versions;
    assert.equal(versions[0].Healthy, true);
    assert.equal(versions[0].Snapshot, '');
  });

  test('exec through the toolbox: output, the exit code, arguments quoted', { skip: docker }, async () => {
    const r = await exec(t, env, ['sh', '-c', 'printf "%s|" "$0" "$1"; exit 4', "it's", 'a b']);
    assert.equal(r.exit_code, 4);
    assert.equal(r.stdout, "it's|a b|");
    const call = fake.faults.calls.filter((x) => x.path.endsWith('/process/execute')).at(-1)!;
    assert.match(call.path, /^\/toolbox-proxy\/[0-9a-f-]{36}\/process\/execute$/);
    assert.equal(call.headers.authorization, `Bearer ${fake.token}`);
  });

  test('files: upload and download one file at a time', { skip: docker }, async () => {
    const put = await putFiles(t, env, '/data', await tarOf({ 'x.txt': 'ex', 'd/y.txt': 'why' }));
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assert.equal((await exec(t, env, ['cat', '/data/x.txt', '/data/d/y.txt'])).stdout, 'exwhy');
    const got = await getFiles(t, env, '/data/d/y.txt');
    assert.equal(got.status, 200);
    assert.deepEqual(await untar(got.data), { 'y.txt': 'why' });
    const missing = await t.req('GET', `/v1/envs/${env}/files?service=main&path=/none`);
    assert.equal(missing.status, 502);
    assert.match(
      missing.body.error,
      /^sandbox-b: GET .*\/files\/download: 404 path '\/none' does not exist$/,
    );
  });

  test('snapshot, fork and rollback are refused in the spec wording', { skip: docker }, async () => {
    const s = await t.req('POST', `/v1/envs/${env}/snapshot`);
    const snap = await finished(t, s.body.deployment.ID);
    assert.equal(snap.deployment.Error, 'snapshot: sandbox-b: env.snapshot: not supported on sandbox-b yet');
    const f = await t.req('POST', `/v1/envs/${env}/fork`, { body: {} });
    assert.equal(f.status, 400);
    assert.equal(f.body.error, 'sandbox-b: env.fork: not supported on sandbox-b yet');
    const v = (await t.req('GET', `/v1/envs/${env}`)).body.environment.CurrentVersionID;
    const rb = await t.req('POST', `/v1/envs/${env}/rollback`, { body: { version: v } });
    assert.equal(rb.status, 400);
    assert.equal(rb.body.error, 'sandbox-b: env.rollback: not supported on sandbox-b yet');
    const sbx = await t.req('POST', '/v1/sandboxes', { body: { from_version: v } });
    assert.equal(sbx.body.error, 'sandbox-b: env.fork: not supported on sandbox-b yet');
  });

  test('without toolboxProxyUrl the API toolbox path is used; an unbuildable image falls back to a snapshot', {
    skip: docker,
  }, async () => {
    fake.proxyUrl = false;
    fake.unbuildable.add(BUSYBOX_IMAGE);
    try {
      const r = await t.req('POST', '/v1/targets/sandbox-b/sandboxes', { body: { image: BUSYBOX_IMAGE } });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      const e = r.body.environment.ID;
      assert.equal((await exec(t, e, ['echo', 'via api'])).stdout, 'via api\n');
      const call = fake.faults.calls.filter((x) => x.path.endsWith('/process/execute')).at(-1)!;
      assert.match(call.path, /^\/toolbox\/[0-9a-f-]{36}\/toolbox\/process\/execute$/);
      const created = fake.faults.calls.filter((x) => x.method === 'POST' && x.path === '/sandbox');
      assert.ok(created.length >= 3, 'an image build was tried, then the snapshot');
      const d = await t.req('DELETE', `/v1/envs/${e}`);
      assert.equal((await finished(t, d.body.deployment.ID)).deployment.Status, 'succeeded');
    } finally {
      fake.proxyUrl = true;
      fake.unbuildable.clear();
    }
  });

  test(
    'verify is refused in the spec wording; a multi-service stack fails at prepare',
    { skip: docker },
    () => refusesVerifyAndMultiService(t, 'sandbox-b'),
  );

  test('a redeploy replaces the sandbox once the new one is up; a failed one keeps the old running', {
    skip: docker,
  }, async () => {
    const name = (await t.req('GET', `/v1/envs/${env}`)).body.environment.Name;
    const before = [...fake.sandboxes.keys()];
    const compose = `services:\n  main:\n    image: ${BUSYBOX_IMAGE}\n    command: ["sleep", "100001"]\n`;
    b503();
    const failed = await t.req('POST', '/v1/projects/sandboxes/deploy', { body: { compose, env: name } });
    assert.match(
      (await finished(t, failed.body.deployment.ID)).deployment.Error,
      /^prepare: sandbox-b: POST \/sandbox: 503/,
    );
    assert.deepEqual([...fake.sandboxes.keys()], before, 'the old sandbox still runs');
    assert.equal((await exec(t, env, ['echo', 'still here'])).stdout, 'still here\n');
    const ok = await t.req('POST', '/v1/projects/sandboxes/deploy', { body: { compose, env: name } });
    assert.equal((await finished(t, ok.body.deployment.ID)).deployment.Status, 'succeeded');
    assert.equal(fake.sandboxes.size, 1);
    assert.notDeepEqual([...fake.sandboxes.keys()], before, 'replaced by a new sandbox');
    assert.match((await exec(t, env, ['ps'])).stdout, /sleep 100001/);
  });

  const b503 = () =>
    fake.faults.add({
      method: 'POST',
      path: '/sandbox',
      status: 503,
      body: { statusCode: 503, message: 'busy' },
    });

  test('destroy deletes the sandbox with force, and any other labelled with the environment', {
    skip: docker,
  }, async () => {
    const stray = await fetch(`${fake.url}/sandbox`, {
      method: 'POST',
      headers: { authorization: `Bearer ${fake.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ snapshot: BUSYBOX_IMAGE, labels: { svc_env: env } }),
    });
    assert.equal(stray.status, 200);
    assert.equal(fake.sandboxes.size, 2);
    const r = await t.req('DELETE', `/v1/envs/${env}`);
    assert.equal((await finished(t, r.body.deployment.ID)).deployment.Status, 'succeeded');
    const del = fake.faults.calls.filter((x) => x.method === 'DELETE').at(-1);
    assert.equal(del?.query, 'force=true');
    assert.equal(fake.sandboxes.size, 0);
  });
});
