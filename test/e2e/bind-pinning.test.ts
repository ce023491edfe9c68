// A tenant's compose file can never mount a host path through a relative bind: a service that is
// already running swaps a later service's bind source for a link (to /etc, to /), and the later
// service still gets the context's own directory, or does not start; never the host's. The same
// on a fork's start. Nothing staged stays on the host after the environments are destroyed.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { mounts } from '../../sidecar/storage/mounts.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { exec, finished, type Real, startReal, upload, writeProject } from './real.ts';

/** The reported reproduction: `w` replaces ./data/sub by a link once healthy, then `v` starts. */
const swapStack = (swap: string, bind: string) => `
services:
  w:
    image: ${BUSYBOX_IMAGE}
    user: "0"
    volumes: ["./data:/ctx"]
    command: ["sh","-c","${swap} && touch /tmp/ok; sleep 1000000"]
    healthcheck: {test: ["CMD","test","-f","/tmp/ok"], interval: 1s, retries: 30}
  v:
    image: ${BUSYBOX_IMAGE}
    user: "0"
    volumes: ["${bind}"]
    depends_on: {w: {condition: service_healthy}}
    command: ["sleep","1000000"]
`;

/** What `v` tries to write at the top of its bind: on the host's `/` if it ever got it (removed after). */
const PLANTED = `svc-planted-${randomUUID()}`;
const HOST_SHADOW = readFileSync('/etc/shadow', 'utf8').split('\n').slice(0, 2).join('\n');

describe('relative binds are mounted from what was checked', { skip: tier('docker') }, () => {
  let r: Real;
  let dir: string;
  let ctxId: string;
  const envs: string[] = [];
  const deploy = async (name: string, compose: string) => {
    await r.t.req('POST', '/v1/projects', { body: { name, kind: 'rl-environment' } });
    const d = await r.t.req('POST', `/v1/projects/${name}/deploy`, { body: { compose, context: ctxId } });
    assert.equal(d.status, 202, JSON.stringify(d.body));
    const out = await finished(r.t, d.body.deployment.ID);
    if (out.deployment.EnvID) envs.push(out.deployment.EnvID);
    return out.deployment;
  };
  before(async () => {
    await ensureTestImages();
    r = await startReal();
    dir = writeProject({ 'data/sub/x': 'original\n' });
    ctxId = (await upload(r, dir)).upload;
  });
  after(async () => {
    await r?.close();
    rmSync(`/${PLANTED}`, { force: true });
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("a link to /etc planted by a running service never shows the host's /etc (read-only bind)", async () => {
    const d = await deploy('etc', swapStack('rm -rf /ctx/sub && ln -s /etc /ctx/sub', './data/sub:/host:ro'));
    if (d.Status === 'succeeded') {
      const out = await exec(r.t, d.EnvID, 'v', ['sh', '-c', 'ls -a /host; head -2 /host/shadow']);
      assert.ok(!out.stdout.includes(HOST_SHADOW), out.stdout);
      assert.doesNotMatch(out.stdout, /shadow|passwd/, out.stdout);
    } else {
      // The checked directory was removed before `v` started: `v` cannot start; it never gets /etc.
      assert.equal(d.Status, 'failed');
      assert.match(d.Error, /service 'v' did not start/, d.Error);
    }
  });

  test('a link to / planted by a running service never gives a read-write bind the host', async () => {
    const d = await deploy(
      'root',
      swapStack('mv /ctx/sub /ctx/kept && ln -s / /ctx/sub', './data/sub:/host'),
    );
    assert.equal(d.Status, 'succeeded', d.Error);
    const out = await exec(r.t, d.EnvID, 'v', [
      'sh',
      '-c',
      `ls /host; cat /host/x; test -e /host/etc/shadow && echo HOST; touch /host/${PLANTED}`,
    ]);
    assert.equal(out.stdout, 'x\noriginal\n', 'v gets the directory that was checked');
    assert.equal(existsSync(`/${PLANTED}`), false);
    const w = await exec(r.t, d.EnvID, 'w', ['ls', '/ctx/kept']);
    assert.equal(w.stdout, `${PLANTED}\nx\n`);
  });

  test("a link swapped while a fork's stack or a rollback starts never reaches the host; the fork's staging is its own", async () => {
    // `w` swaps on every start; the snapshot holds the directory again, so the fork's start races.
    const d = await deploy(
      'fork',
      swapStack(
        '(test -L /ctx/sub || mv /ctx/sub /ctx/kept) && ln -sfn /etc /ctx/sub',
        './data/sub:/host:ro',
      ),
    );
    assert.equal(d.Status, 'succeeded', d.Error);
    await exec(r.t, d.EnvID, 'w', [
      'sh',
      '-c',
      'rm /ctx/sub && mkdir /ctx/sub && echo snapshot > /ctx/sub/y',
    ]);
    const snap = await r.t.req('POST', `/v1/envs/${d.EnvID}/snapshot`);
    const snapped = await finished(r.t, snap.body.deployment.ID);
    assert.equal(snapped.deployment.Status, 'succeeded', snapped.deployment.Error);
    const f = await r.t.req('POST', `/v1/envs/${d.EnvID}/fork`, {
      body: { name: 'fork-child', version: snapped.deployment.VersionID },
    });
    assert.equal(f.status, 202, JSON.stringify(f.body));
    const forked = await finished(r.t, f.body.deployment.ID);
    assert.equal(forked.deployment.Status, 'succeeded', forked.deployment.Error);
    envs.push(forked.deployment.EnvID);
    const out = await exec(r.t, forked.deployment.EnvID, 'v', ['ls', '/host']);
    assert.equal(out.stdout, 'y\n', "the fork's v gets its own checked directory");
    const parent = await exec(r.t, d.EnvID, 'v', ['ls', '/host']);
    assert.equal(parent.stdout, 'x\n', 'the parent keeps what it was given');
    // A rollback restarts the stack on the snapshot's data: the same race, the same answer.
    const rb = await r.t.req('POST', `/v1/envs/${d.EnvID}/rollback`, {
      body: { version: snapped.deployment.VersionID },
    });
    assert.equal(rb.status, 202, JSON.stringify(rb.body));
    const rolled = await finished(r.t, rb.body.deployment.ID);
    assert.equal(rolled.deployment.Status, 'succeeded', rolled.deployment.Error);
    const back = await exec(r.t, d.EnvID, 'v', ['ls', '/host']);
    assert.equal(back.stdout, 'y\n', 'after the rollback v gets the checked directory again');
  });

  test('staging outlives a svcd restart; after destroy nothing staged stays on the host: no mount, no directory', async () => {
    const staging = join(r.dataDir, 'binds');
    assert.ok(envs.length >= 3);
    await r.killSidecar();
    await r.startSidecar();
    const fork = envs.at(-1) as string;
    assert.equal((await exec(r.t, fork, 'v', ['ls', '/host'])).stdout, 'y\n');
    assert.ok((await mounts()).some((m) => m.point.startsWith(`${staging}/${fork}/`)));
    for (const env of envs) {
      const del = await r.t.req('DELETE', `/v1/envs/${env}`);
      assert.equal(del.status, 202, JSON.stringify(del.body));
      const out = await finished(r.t, del.body.deployment.ID);
      assert.equal(out.deployment.Status, 'succeeded', out.deployment.Error);
    }
    assert.deepEqual(
      (await mounts()).filter((m) => m.point.startsWith(`${staging}/`)),
      [],
    );
    assert.deepEqual(existsSync(staging) ? readdirSync(staging) : [], []);
  });
});
