// cloudvm end to end: a deploy with no host provisions a server through the VM cloud's API (a
// fake speaking Hetzner Cloud's shapes), the server's cloud-init join runs for real (the real svcd
// with the join.env from user_data), the join phase sees the host of that cloud, and the stack
// becomes healthy on it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { parse } from 'yaml';
import { FakeCloud } from '../support/fakes/cloud.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { tier } from '../support/tiers.ts';
import { exec, finished, phase } from './harness.ts';

const docker = tier('docker');
const SIDECAR_URL = 'http://releases.example.test/svcd';

describeCloud();

function describeCloud() {
  let t: TestServer;
  let cloud: FakeCloud;
  let cloudId = '';
  let env = '';
  before(async () => {
    if (docker) return;
    await ensureTestImages();
    cloud = await new FakeCloud().listen();
    t = await startTestServer('sqlite', { SVC_SIDECAR_URL: SIDECAR_URL });
  });
  after(async () => {
    if (env) {
      const d = await t.req('DELETE', `/v1/envs/${env}`);
      if (d.status === 202) await finished(t, d.body.deployment.ID);
    }
    await cloud?.close();
    await t?.close();
  });

  test('a deploy with no host provisions a machine that joins as a host of the cloud and runs the stack', {
    skip: docker,
  }, async () => {
    const c = await t.req('POST', '/v1/clouds', {
      body: {
        provider: 'cloudvm',
        name: 'hetzner',
        config: { token: cloud.token, api_url: cloud.url, location: 'fsn1' },
      },
    });
    assert.equal(c.status, 201, JSON.stringify(c.body));
    cloudId = c.body.cloud.ID;
    await t.req('POST', '/v1/projects', { body: { name: 'vm' } });
    const compose = `services:\n  app:\n    image: ${BUSYBOX_IMAGE}\n    command: ["sleep", "100000"]\n    volumes: [data:/data]\nvolumes: { data: {} }\n`;
    const r = await t.req('POST', '/v1/projects/vm/deploy', { body: { compose } });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    env = r.body.deployment.EnvID;
    const { deployment, phases } = await finished(t, r.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded', `${deployment.Error}\n${cloud.machines[0]?.log}`);
    assert.deepEqual(phase(phases, 'place').Evidence, {
      host: '',
      reason: 'no connected host (provisioning)',
    });

    const [m] = cloud.machines;
    assert.equal(cloud.machines.length, 1);
    assert.deepEqual(phase(phases, 'provision').Evidence, {
      cloud: cloudId,
      provider: 'cloudvm',
      ref: String(m.id),
      ip: '127.0.0.1',
      name: m.name,
    });
    // The request is the provider's: server type, location and image from the cloud's config.
    assert.equal(m.body.server_type, 'cpx31');
    assert.equal(m.body.location, 'fsn1');
    assert.equal(m.body.image, 'ubuntu-24.04');
    assert.equal(typeof m.body.user_data, 'string');
    // cloud-init: packages, join.env with plain lines, sidecar from the sidecar URL, install --env-file.
    const ud = parse(m.userData);
    for (const pkg of ['ca-certificates', 'curl', 'docker.io', 'docker-compose-v2', 'zfsutils-linux'])
      assert.ok(ud.packages.includes(pkg), pkg);
    const lines = m.joinEnv.trim().split('\n');
    assert.equal(lines[0], `SVC_SERVER=${t.url}`);
    assert.match(lines[1], /^SVC_JOIN_TOKEN=djt_[A-Za-z0-9_-]{43}$/);
    assert.ok(m.runcmd.some((x) => x.includes(`'${SIDECAR_URL}'`)));
    assert.ok(m.runcmd.some((x) => x.endsWith('install --env-file /etc/svc/join.env')));

    // The join token was fresh, single use, carried the cloud id, and made the host that joined.
    const join = phase(phases, 'join').Evidence;
    assert.match(join.host, /^host_/);
    const tokens = await t.server.ctx.db.all<{ cloud_id: string; used_at: string | null; host_id: string }>(
      'SELECT cloud_id, used_at, host_id FROM join_tokens',
    );
    assert.equal(tokens.length, 1);
    assert.equal(tokens[0].cloud_id, cloudId);
    assert.ok(tokens[0].used_at);
    assert.equal(tokens[0].host_id, join.host);
    const host = (await t.req('GET', '/v1/hosts')).body.hosts.find((h: any) => h.ID === join.host);
    assert.equal(host.CloudID, cloudId);
    assert.equal(host.connected, true);
    assert.equal(host.Capabilities.storage, 'dir');
    const targets = (await t.req('GET', '/v1/targets')).body.targets;
    assert.equal(targets.find((x: any) => x.ID === join.host).provider, 'cloudvm');

    // Healthy on the machine: prepare ran there, and exec reaches the stack.
    assert.equal(phase(phases, 'prepare').Status, 'ok');
    assert.equal(phase(phases, 'health').Status, 'ok');
    const got = await exec(t, env, ['sh', '-c', 'echo on-the-vm > /data/f && cat /data/f'], 'app');
    assert.equal(got.stdout, 'on-the-vm\n');
    const ev = await t.req('GET', `/v1/events?subject=dep:${deployment.ID}`);
    assert.ok(ev.body.events.some((e: any) => e.Kind === 'host.provisioned'));
  });

  test('the next deploy of that environment lands on the joined machine without provisioning', {
    skip: docker,
  }, async () => {
    const compose = `services:\n  app:\n    image: ${BUSYBOX_IMAGE}\n    command: ["sleep", "200000"]\n    volumes: [data:/data]\nvolumes: { data: {} }\n`;
    const r = await t.req('POST', '/v1/projects/vm/deploy', { body: { compose } });
    const { deployment, phases } = await finished(t, r.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded', deployment.Error);
    assert.equal(phase(phases, 'place').Evidence.reason, 'environment already on host');
    assert.equal(phase(phases, 'provision').Status, 'skipped');
    assert.equal(cloud.machines.length, 1);
  });

  test('pinned target sandboxes: a cloudvm target runs on its joined machine; refusals for other bodies and targets', {
    skip: docker,
  }, async () => {
    const r = await t.req('POST', '/v1/targets/hetzner/sandboxes', {
      body: { image: BUSYBOX_IMAGE, cmd: ['sleep', '100000'], name: 'pinned-1' },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.equal(r.body.target, 'hetzner');
    const { phases } = await finished(t, r.body.deployment.ID);
    const host = phase(phases, 'place').Evidence;
    assert.equal(host.reason, 'target hetzner');
    const hosts = (await t.req('GET', '/v1/hosts')).body.hosts;
    assert.equal(hosts.find((h: any) => h.ID === host.host).CloudID, cloudId);
    assert.equal((await exec(t, r.body.environment.ID, ['echo', 'pinned'])).stdout, 'pinned\n');
    const d = await t.req('DELETE', `/v1/envs/${r.body.environment.ID}`);
    assert.equal((await finished(t, d.body.deployment.ID)).deployment.Status, 'succeeded');

    const missing = await t.req('POST', '/v1/targets/nowhere/sandboxes', { body: { image: BUSYBOX_IMAGE } });
    assert.equal(missing.status, 404);
    const versions = (await t.req('GET', `/v1/envs/${env}/versions`)).body.versions;
    const fromVersion = await t.req('POST', '/v1/targets/hetzner/sandboxes', {
      body: { from_version: versions[0].ID },
    });
    assert.equal(fromVersion.status, 400);
    assert.match(fromVersion.body.error, /image form only/);

    // A cloudvm target with no connected machine of its own: the spec's message, nothing provisioned.
    const other = await t.req('POST', '/v1/clouds', {
      body: { provider: 'cloudvm', name: 'empty', config: { token: cloud.token, api_url: cloud.url } },
    });
    assert.equal(other.status, 201);
    const none = await t.req('POST', '/v1/targets/empty/sandboxes', { body: { image: BUSYBOX_IMAGE } });
    assert.equal(none.status, 502);
    assert.match(none.body.error, /place: target 'empty' \(cloudvm\): no connected host$/);
    assert.equal(cloud.machines.length, 1);
  });
}
