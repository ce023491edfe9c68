// Real control plane + real svcd + real Docker: deploy, exec, files, snapshot → write → rollback,
// fork independence, egress deny verified from inside, allow with endpoints, destroy leaves nothing.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import tar from 'tar-stream';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import {
  bootApp,
  createProgress,
  exec,
  finished,
  leftovers,
  primaryIp,
  type Real,
  startReal,
} from './real.ts';

const STACK = `
services:
${bootApp(BUSYBOX_IMAGE)}  side:
    image: ${BUSYBOX_IMAGE}
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
    depends_on:
      app: {condition: service_healthy}
volumes:
  data: {}
`;

async function tarOf(name: string, body: string): Promise<Buffer> {
  const pack = tar.pack();
  pack.entry({ name }, body);
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const c of pack) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

describe('a real stack on real Docker', { skip: tier('docker') }, () => {
  let r: Real;
  let alpha: string;
  before(async () => {
    await ensureTestImages();
    r = await startReal();
    const p = await r.t.req('POST', '/v1/projects', { body: { name: 'real' } });
    alpha = p.body.environments[0].ID;
  });
  after(async () => r?.close());

  test('deploy: every phase ok, healthy, egress denied and verified from inside the stack', async () => {
    const d = await r.t.req('POST', '/v1/projects/real/deploy', {
      body: { compose: STACK, warm: ['sh', '-c', 'echo warmed > /data/warm'] },
    });
    assert.equal(d.status, 202, JSON.stringify(d.body));
    const { deployment, phases } = await finished(r.t, d.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded', `${deployment.Error}\n${r.log()}`);
    const byName = Object.fromEntries(phases.map((p: any) => [p.Name, p]));
    assert.deepEqual(byName.health.Evidence, { endpoints: {} });
    assert.equal(byName.snapshot.Evidence.consistent, true);
    assert.equal(typeof byName.snapshot.Evidence.frozen_for, 'number');
    const progress = await createProgress(r.t, alpha);
    assert.ok(progress.includes('healthy; egress denied (verified)'), progress.join(' | '));
    // From inside: neither "the internet" (the listener on the primary address) nor the host's
    // own services through the bridge gateway are reachable.
    const hits = r.listener.hits;
    const out = await exec(r.t, alpha, 'app', [
      'sh',
      '-c',
      `nc -w 3 ${primaryIp()} ${r.listener.port} </dev/null; echo rc=$?; ip route 2>/dev/null | head -3`,
    ]);
    assert.match(out.stdout, /rc=1/);
    const gw = (
      await exec(r.t, alpha, 'app', ['sh', '-c', "ip route | awk '/default/ {print $3}'"])
    ).stdout.trim();
    if (gw)
      assert.match(
        (
          await exec(r.t, alpha, 'app', [
            'sh',
            '-c',
            `nc -w 3 ${gw} ${r.listener.port} </dev/null; echo rc=$?`,
          ])
        ).stdout,
        /rc=1/,
      );
    assert.equal(r.listener.hits, hits, 'the host listener saw no connection from the stack');
    assert.equal((await exec(r.t, alpha, 'app', ['cat', '/data/warm'])).stdout, 'warmed\n');
  });

  test('exec: stdout, stderr and exit code come back; a non-zero exit is a 200', async () => {
    const out = await exec(r.t, alpha, 'app', ['sh', '-c', 'echo out; echo err >&2; exit 3']);
    assert.deepEqual(out, { exit_code: 3, stdout: 'out\n', stderr: 'err\n' });
    const timed = await r.t.req('POST', `/v1/envs/${alpha}/exec`, {
      body: { service: 'side', cmd: ['sleep', '30'], timeout_sec: 1 },
    });
    assert.equal(timed.status, 200);
    assert.equal(timed.body.exit_code, 124);
    assert.match(timed.body.stderr, /timed out after 1 s/);
  });

  test('files: put into a new directory and get back', async () => {
    const put = await fetch(`${r.t.url}/v1/envs/${alpha}/files?service=app&path=/data/in/deep`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${r.t.key}`, 'content-type': 'application/x-tar' },
      body: await tarOf('hello.txt', 'hello from the test\n'),
    });
    assert.equal(put.status, 200, await put.clone().text());
    assert.equal(
      (await exec(r.t, alpha, 'app', ['cat', '/data/in/deep/hello.txt'])).stdout,
      'hello from the test\n',
    );
    const get = await fetch(`${r.t.url}/v1/envs/${alpha}/files?service=app&path=/data/in/deep/hello.txt`, {
      headers: { authorization: `Bearer ${r.t.key}` },
    });
    assert.equal(get.status, 200);
    const ex = tar.extract();
    const names: string[] = [];
    ex.on('entry', (h, s, next) => {
      names.push(h.name);
      s.resume();
      s.on('end', next);
    });
    ex.end(Buffer.from(await get.arrayBuffer()));
    await new Promise<void>((res) => ex.on('finish', () => res()));
    assert.deepEqual(names, ['hello.txt']);
    const missing = await r.t.req('GET', `/v1/envs/${alpha}/files?service=app&path=/nope`);
    assert.equal(missing.status, 502);
  });

  test('snapshot → write → rollback restores the data; a fork is an independent copy', async () => {
    await exec(r.t, alpha, 'app', ['sh', '-c', 'echo v1 > /data/state']);
    const s = await r.t.req('POST', `/v1/envs/${alpha}/snapshot`);
    const snap = await finished(r.t, s.body.deployment.ID);
    assert.equal(snap.deployment.Status, 'succeeded', snap.deployment.Error);
    const v = snap.deployment.VersionID;
    await exec(r.t, alpha, 'app', ['sh', '-c', 'echo v2 > /data/state; echo junk > /data/junk']);
    const f = await r.t.req('POST', `/v1/envs/${alpha}/fork`, { body: { version: v, name: 'copy' } });
    const fork = await finished(r.t, f.body.deployment.ID);
    assert.equal(fork.deployment.Status, 'succeeded', fork.deployment.Error);
    const forkId = fork.deployment.EnvID;
    assert.equal((await exec(r.t, forkId, 'app', ['cat', '/data/state'])).stdout, 'v1\n');
    await exec(r.t, forkId, 'app', ['sh', '-c', 'echo fork > /data/state']);
    assert.equal(
      (await exec(r.t, alpha, 'app', ['cat', '/data/state'])).stdout,
      'v2\n',
      'the fork does not write into its source',
    );
    const rb = await r.t.req('POST', `/v1/envs/${alpha}/rollback`, { body: { version: v } });
    const back = await finished(r.t, rb.body.deployment.ID);
    assert.equal(back.deployment.Status, 'succeeded', back.deployment.Error);
    assert.equal((await exec(r.t, alpha, 'app', ['cat', '/data/state'])).stdout, 'v1\n');
    assert.equal((await exec(r.t, alpha, 'app', ['sh', '-c', 'test -e /data/junk; echo $?'])).stdout, '1\n');
    assert.equal(
      (await exec(r.t, forkId, 'app', ['cat', '/data/state'])).stdout,
      'fork\n',
      'the source rollback leaves the fork alone',
    );
    const d = await r.t.req('DELETE', `/v1/envs/${forkId}`);
    assert.equal((await finished(r.t, d.body.deployment.ID)).deployment.Status, 'succeeded');
    assert.deepEqual(leftovers(forkId), []);
    assert.equal(existsSync(join(r.dataDir, 'envs', forkId)), false);
    assert.equal(existsSync(join(r.dataDir, 'snaps', forkId)), false);
  });

  test('allow: ports are published and reported as host:port endpoints', async () => {
    const compose = `
services:
  web:
    image: ${BUSYBOX_IMAGE}
    command: ["sh", "-c", "trap 'exit 0' TERM; mkdir -p /www && echo ok > /www/index.html && httpd -f -p 8080 -h /www"]
    ports: ["8080"]
x-svc.egress: allow
`;
    await r.t.req('POST', '/v1/projects', { body: { name: 'open' } });
    const d = await r.t.req('POST', '/v1/projects/open/deploy', { body: { compose } });
    const { deployment, phases } = await finished(r.t, d.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded', deployment.Error);
    const endpoints = phases.find((p: any) => p.Name === 'health').Evidence.endpoints;
    assert.match(endpoints.web, /^[\d.]+:\d+$/);
    const res = await fetch(`http://${endpoints.web}/index.html`);
    assert.equal(await res.text(), 'ok\n');
    const env = (await r.t.req('GET', `/v1/envs/${deployment.EnvID}`)).body.environment;
    assert.deepEqual(env.Endpoints, endpoints);
    const del = await r.t.req('DELETE', `/v1/envs/${deployment.EnvID}`);
    await finished(r.t, del.body.deployment.ID);
    assert.deepEqual(leftovers(deployment.EnvID), []);
  });

  test('destroy leaves no container, network, volume or directory behind', async () => {
    const d = await r.t.req('DELETE', `/v1/envs/${alpha}`);
    const out = await finished(r.t, d.body.deployment.ID);
    assert.equal(out.deployment.Status, 'succeeded', out.deployment.Error);
    assert.deepEqual(leftovers(alpha), []);
    assert.equal(existsSync(join(r.dataDir, 'envs', alpha)), false);
    assert.equal(existsSync(join(r.dataDir, 'snaps', alpha)), false);
  });
});
