// Fan-out on a real control plane, a real svcd and real Docker: `count` forks of one snapshot,
// each its own running stack whose writes no other fork and not the source sees; the CLI's
// `svc fork --count` against the same host.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { svc, tempDir } from '../cli/harness.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { exec, finished, leftovers, type Real, startReal } from './real.ts';

const STACK = `
services:
  app:
    image: ${BUSYBOX_IMAGE}
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
    volumes: [data:/data]
volumes:
  data: {}
`;

const cat = async (r: Real, env: string) =>
  (await exec(r.t, env, 'app', ['sh', '-c', 'cat /data/state; ls /data'])).stdout;

describe('fan-out on real Docker', { skip: tier('docker') }, () => {
  let r: Real;
  let alpha: string;
  let version: string;
  let snapshot: string;
  before(async () => {
    await ensureTestImages();
    r = await startReal();
    const p = await r.t.req('POST', '/v1/projects', { body: { name: 'fan' } });
    alpha = p.body.environments[0].ID;
    const d = await r.t.req('POST', '/v1/projects/fan/deploy', { body: { compose: STACK } });
    const deployed = await finished(r.t, d.body.deployment.ID);
    assert.equal(deployed.deployment.Status, 'succeeded', `${deployed.deployment.Error}\n${r.log()}`);
    await exec(r.t, alpha, 'app', ['sh', '-c', 'echo source > /data/state']);
    const s = await r.t.req('POST', `/v1/envs/${alpha}/snapshot`);
    const snap = await finished(r.t, s.body.deployment.ID);
    assert.equal(snap.deployment.Status, 'succeeded', snap.deployment.Error);
    version = snap.deployment.VersionID;
    snapshot = snap.phases.find((p: any) => p.Name === 'snapshot').Evidence.snapshot;
  });
  after(async () => r?.close());

  test('count 3: three independent stacks cloned from the one snapshot', async () => {
    const f = await r.t.req('POST', `/v1/envs/${alpha}/fork`, { body: { count: 3, version } });
    assert.equal(f.status, 202, JSON.stringify(f.body));
    assert.equal(f.body.snapshot, snapshot);
    const done = await Promise.all(f.body.forks.map((x: any) => finished(r.t, x.deployment.ID)));
    const ids: string[] = [];
    for (const [i, d] of done.entries()) {
      assert.equal(d.deployment.Status, 'succeeded', `${d.deployment.Error}\n${r.log()}`);
      const clone = d.phases.find((p: any) => p.Name === 'clone').Evidence;
      assert.equal(clone.from, snapshot, 'every fork cloned the one snapshot');
      assert.deepEqual(clone.fanout, { id: f.body.fanout, index: i + 1, count: 3 });
      ids.push(d.deployment.EnvID);
    }
    assert.equal(new Set([alpha, ...ids]).size, 4, 'each fork is its own environment');
    for (const id of ids) assert.equal(await cat(r, id), 'source\nstate\n');
    // A write in one fork is in no other fork and not in the source.
    await exec(r.t, ids[0], 'app', ['sh', '-c', 'echo first > /data/state; echo x > /data/only-first']);
    await exec(r.t, ids[1], 'app', ['sh', '-c', 'echo second > /data/state']);
    assert.equal(await cat(r, ids[0]), 'first\nonly-first\nstate\n');
    assert.equal(await cat(r, ids[1]), 'second\nstate\n');
    assert.equal(await cat(r, ids[2]), 'source\nstate\n');
    assert.equal(await cat(r, alpha), 'source\nstate\n');
    // Each fork goes alone: destroying one leaves the others running.
    const del = await r.t.req('DELETE', `/v1/envs/${ids[0]}`);
    assert.equal((await finished(r.t, del.body.deployment.ID)).deployment.Status, 'succeeded');
    assert.deepEqual(leftovers(ids[0]), []);
    assert.equal(await cat(r, ids[2]), 'source\nstate\n');
  });

  test('svc fork --count 2 waits for both and names them <name>-1, <name>-2', async () => {
    const home = tempDir();
    const out = await svc(['fork', '--count', '2', '--name', 'cli', alpha], {
      home,
      env: { SVC_SERVER: r.t.url, SVC_API_KEY: r.t.key },
      timeoutMs: 300_000,
    });
    assert.equal(out.code, 0, `${out.stdout}\n${out.stderr}\n${r.log()}`);
    assert.match(out.stdout, /^forks: 2 of 2 succeeded$/m);
    const envs = (await r.t.req('GET', '/v1/projects/fan/envs')).body.environments;
    for (const name of ['cli-1', 'cli-2']) {
      const e = envs.find((x: any) => x.Name === name);
      assert.equal(e?.Status, 'running', name);
      assert.equal(await cat(r, e.ID), 'source\nstate\n');
    }
  });
});
