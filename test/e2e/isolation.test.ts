// Isolation end to end: control plane, real svcd, real Docker. x-svc.disk_mb reaches the version's
// spec, the prepare evidence and the host, where a write past it fails inside the container; every
// service runs with NoNewPrivs; an upload with a device node is a 400 that never reaches the host;
// a redeploy with a larger limit grows the disk under the running stack.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import tar from 'tar-stream';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { agentStack, exec, finished, type Real, startReal } from './real.ts';

const STACK = agentStack(BUSYBOX_IMAGE, 'x-svc.disk_mb: 48\n');

describe('isolation end to end on real Docker', { skip: tier('docker') }, () => {
  let r: Real;
  let env: string;
  let phases: any[];
  before(async () => {
    await ensureTestImages();
    r = await startReal();
    await r.t.req('POST', '/v1/projects', { body: { name: 'iso', kind: 'agent' } });
    const d = await r.t.req('POST', '/v1/projects/iso/deploy', { body: { compose: STACK } });
    assert.equal(d.status, 202, JSON.stringify(d.body));
    const out = await finished(r.t, d.body.deployment.ID);
    assert.equal(out.deployment.Status, 'succeeded', `${out.deployment.Error}\n${r.log()}`);
    env = out.deployment.EnvID;
    phases = out.phases;
  });
  after(async () => r?.close());

  test('the disk limit is in the spec and the prepare evidence, and a write past it fails in the container', async () => {
    const prepare = phases.find((p) => p.Name === 'prepare').Evidence;
    assert.equal(prepare.disk_mb, 48);
    assert.ok(
      typeof prepare.disk_quota === 'string' && !prepare.disk_quota.startsWith('none'),
      prepare.disk_quota,
    );
    const versions = await r.t.req('GET', `/v1/envs/${env}/versions`);
    assert.equal(versions.body.versions.at(-1).Spec.disk_mb, 48);
    const out = await exec(r.t, env, 'main', [
      'sh',
      '-c',
      'dd if=/dev/zero of=/work/fill bs=1M count=200 2>&1; echo rc=$?',
    ]);
    assert.match(out.stdout, /No space left on device|Disk quota exceeded/, out.stdout);
    assert.doesNotMatch(out.stdout, /rc=0/);
    const size = await exec(r.t, env, 'main', ['sh', '-c', 'du -m /work/fill | cut -f1; rm /work/fill']);
    assert.ok(Number(size.stdout.split('\n')[0]) <= 48, size.stdout);
  });

  test('every service runs with NoNewPrivs under an init', async () => {
    for (const service of ['main', 'checker']) {
      const out = await exec(r.t, env, service, [
        'sh',
        '-c',
        'grep NoNewPrivs /proc/self/status; cat /proc/1/comm',
      ]);
      assert.match(out.stdout, /^NoNewPrivs:\s+1\ndocker-init\n$/, `${service}: ${out.stdout}`);
    }
  });

  test('an upload with a device node is a 400 and nothing reaches the host', async () => {
    const p = tar.pack();
    p.entry({ name: 'ok.txt' }, 'fine');
    p.entry({ name: 'null', type: 'character-device', devmajor: 1, devminor: 3 });
    p.finalize();
    const chunks: Buffer[] = [];
    for await (const c of p) chunks.push(c as Buffer);
    const res = await fetch(`${r.t.url}/v1/envs/${env}/files?service=main&path=/work/up`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${r.t.key}`, 'content-type': 'application/x-tar' },
      body: Buffer.concat(chunks),
    });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { error: string }).error, /device nodes are not accepted/);
    const ls = await exec(r.t, env, 'main', ['sh', '-c', 'ls /work/up 2>&1 || true']);
    assert.match(ls.stdout, /No such file/);
  });

  test('a redeploy with a larger disk_mb grows the disk online: a write refused before now fits', async () => {
    const d = await r.t.req('POST', '/v1/projects/iso/deploy', {
      body: { compose: STACK.replace('x-svc.disk_mb: 48', 'x-svc.disk_mb: 500') },
    });
    assert.equal(d.status, 202, JSON.stringify(d.body));
    const out = await finished(r.t, d.body.deployment.ID);
    assert.equal(out.deployment.Status, 'succeeded', `${out.deployment.Error}\n${r.log()}`);
    assert.equal(out.deployment.EnvID, env);
    const prepare = out.phases.find((p: any) => p.Name === 'prepare').Evidence;
    assert.equal(prepare.disk_mb, 500);
    assert.doesNotMatch(prepare.disk_quota, /^none|recreated|never shrinks/, prepare.disk_quota);
    const write = await exec(r.t, env, 'main', [
      'sh',
      '-c',
      'dd if=/dev/zero of=/work/fill bs=1M count=100 2>&1; echo rc=$?; rm -f /work/fill',
    ]);
    assert.match(write.stdout, /rc=0/, write.stdout);
  });
});
