// The runtime matrix: the same rows, on real Docker through a real svcd, for a stack under runc and
// the same stack under gVisor (`x-svc.runtime: gvisor`): deploy with egress denied and verified
// from inside, exec and files (tar uploads, and single files both ways in the root file system and
// a volume), snapshot → fork independence → rollback, the disk limit, destroy
// leaving nothing. svcd registers runsc with Docker itself when it is missing. The red-team row:
// under gVisor, `uname -r` answers gVisor's kernel version, not the host's (the system call never
// reaches the host kernel); under runc it is the host's.
import assert from 'node:assert/strict';
import { release } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { Sandbox } from 'e2b';
import type { Runtime } from '../../protocol/spec.ts';
import { RUNTIME_METADATA } from '../../server/e2b/sandboxes.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { gvisorSkip, RUNTIMES } from '../support/runtimes.ts';
import { tarOf } from '../support/tar.ts';
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

const stack = (runtime: Runtime) => `
services:
${bootApp(BUSYBOX_IMAGE)}volumes:
  data: {}
x-svc.runtime: ${runtime}
x-svc.disk_mb: 48
`;

describe('the runtime matrix on real Docker', { skip: tier('docker') }, async () => {
  const skipGvisor = await gvisorSkip();
  let r: Real;
  before(async () => {
    await ensureTestImages();
    r = await startReal({ env: { SVC_E2B_ADDR: '127.0.0.1:0' } });
  });
  after(async () => r?.close());

  test('svcd reports its runtimes in the hello capabilities', { skip: skipGvisor }, async () => {
    const hosts = (await r.t.req('GET', '/v1/hosts')).body.hosts;
    const caps = hosts[0].Capabilities;
    assert.deepEqual(caps.runtimes, ['runc', 'gvisor'], JSON.stringify(caps));
    assert.equal(caps.default_runtime, 'runc');
    assert.match(caps.gvisor.version, /\S/);
    assert.match(caps.gvisor.platform, /^(ptrace|kvm|systrap)$/);
  });

  test('an image sandbox takes the runtime: gvisor answers uname itself', { skip: skipGvisor }, async () => {
    const c = await r.t.req('POST', '/v1/sandboxes', {
      body: { image: BUSYBOX_IMAGE, runtime: 'gvisor', cmd: ['sleep', '3600'] },
    });
    assert.equal(c.status, 201, JSON.stringify(c.body));
    const out = await exec(r.t, c.body.environment.ID, 'main', ['uname', '-r']);
    assert.notEqual(out.stdout.trim(), release());
  });

  test('the E2B SDK takes the runtime from metadata svc.runtime; a bad value is a 400', {
    skip: skipGvisor,
  }, async () => {
    const url = r.t.server.e2b?.url ?? '';
    const opts = { apiUrl: url, sandboxUrl: url, apiKey: r.t.key, requestTimeoutMs: 300_000 };
    const kernels: Record<string, string> = {};
    for (const runtime of RUNTIMES) {
      const s = await Sandbox.create(BUSYBOX_IMAGE, { ...opts, metadata: { [RUNTIME_METADATA]: runtime } });
      const env = await r.t.server.ctx.db.get<{ id: string }>('SELECT id FROM environments WHERE name = ?', [
        s.sandboxId,
      ]);
      kernels[runtime] = (await exec(r.t, env!.id, 'main', ['uname', '-r'])).stdout.trim();
      await s.files.write('/work/hello.txt', 'hello');
      assert.equal(await s.files.read('/work/hello.txt'), 'hello');
      assert.deepEqual((await Sandbox.getInfo(s.sandboxId, opts)).metadata, { [RUNTIME_METADATA]: runtime });
      await s.kill();
    }
    assert.equal(kernels.runc, release());
    assert.notEqual(kernels.gvisor, release(), 'gVisor answers uname itself');
    await assert.rejects(
      Sandbox.create(BUSYBOX_IMAGE, { ...opts, metadata: { [RUNTIME_METADATA]: 'kata' } }),
      /svc\.runtime must be runc or gvisor/,
    );
  });

  for (const runtime of RUNTIMES) {
    describe(`under ${runtime}`, { skip: runtime === 'gvisor' ? skipGvisor : false }, () => {
      let env: string;
      let phases: any[];
      const project = `m-${runtime}`;
      before(async () => {
        await r.t.req('POST', '/v1/projects', { body: { name: project } });
        const d = await r.t.req('POST', `/v1/projects/${project}/deploy`, {
          body: { compose: stack(runtime) },
        });
        assert.equal(d.status, 202, JSON.stringify(d.body));
        const out = await finished(r.t, d.body.deployment.ID);
        assert.equal(out.deployment.Status, 'succeeded', `${out.deployment.Error}\n${r.log()}`);
        env = out.deployment.EnvID;
        phases = out.phases;
      });

      test('deploy: the runtime is in the spec and the prepare evidence; egress denied and verified', async () => {
        const prepare = phases.find((p) => p.Name === 'prepare').Evidence;
        assert.equal(prepare.runtime, runtime);
        if (runtime === 'gvisor') assert.match(prepare.runtime_platform, /^(ptrace|kvm|systrap) \(runsc /);
        const versions = await r.t.req('GET', `/v1/envs/${env}/versions`);
        assert.equal(versions.body.versions.at(-1).Spec.runtime, runtime);
        const progress = await createProgress(r.t, env);
        assert.ok(progress.includes('healthy; egress denied (verified)'), progress.join(' | '));
        const hits = r.listener.hits;
        const out = await exec(r.t, env, 'app', [
          'sh',
          '-c',
          `nc -w 3 ${primaryIp()} ${r.listener.port} </dev/null; echo rc=$?`,
        ]);
        assert.match(out.stdout, /rc=1/);
        assert.equal(r.listener.hits, hits, 'the host listener saw no connection from the stack');
      });

      test('red team: uname -r is the host kernel only under runc', async () => {
        const out = await exec(r.t, env, 'app', ['uname', '-r']);
        if (runtime === 'runc') assert.equal(out.stdout.trim(), release());
        else {
          assert.notEqual(out.stdout.trim(), release(), 'gVisor answers uname itself');
          assert.match(out.stdout.trim(), /^\d+\.\d+\.\d+$/);
          const dmesg = await exec(r.t, env, 'app', ['dmesg']);
          assert.match(dmesg.stdout, /gVisor/i, 'the kernel log is gVisor’s own');
        }
      });

      test('exec and files: a put file is read back', async () => {
        const out = await exec(r.t, env, 'app', ['sh', '-c', 'echo out; echo err >&2; exit 3']);
        assert.deepEqual(out, { exit_code: 3, stdout: 'out\n', stderr: 'err\n' });
        const put = await fetch(`${r.t.url}/v1/envs/${env}/files?service=app&path=/data/in`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${r.t.key}`, 'content-type': 'application/x-tar' },
          body: await tarOf({ 'hello.txt': 'hello\n' }),
        });
        assert.equal(put.status, 200, await put.clone().text());
        assert.equal((await exec(r.t, env, 'app', ['cat', '/data/in/hello.txt'])).stdout, 'hello\n');
      });

      test('single files both ways: the API writes what runs inside reads, and reads what it wrote', async () => {
        const fs = (method: string, path: string, body?: string) =>
          fetch(`${r.t.url}/v1/envs/${env}/fs?service=app&path=${encodeURIComponent(path)}`, {
            method,
            headers: { authorization: `Bearer ${r.t.key}` },
            body,
          });
        // /etc was looked at by the container as it started: a cached view would hide the new file.
        for (const path of ['/etc/svc-put', '/data/svc-put']) {
          const put = await fs('PUT', path, `put ${path}\n`);
          assert.equal(put.status, 201, await put.text());
          assert.equal((await exec(r.t, env, 'app', ['cat', path])).stdout, `put ${path}\n`);
        }
        await exec(r.t, env, 'app', ['sh', '-c', 'echo inside > /etc/svc-in; echo again > /etc/svc-put']);
        assert.equal(await (await fs('GET', '/etc/svc-in')).text(), 'inside\n');
        assert.equal(await (await fs('GET', '/etc/svc-put')).text(), 'again\n');
        assert.equal((await fs('DELETE', '/etc/svc-in')).status, 204);
        assert.match((await exec(r.t, env, 'app', ['ls', '/etc'])).stdout, /svc-put/);
        assert.doesNotMatch((await exec(r.t, env, 'app', ['ls', '/etc'])).stdout, /svc-in/);
      });

      test('snapshot (freeze) → fork is an independent copy → rollback restores', async () => {
        await exec(r.t, env, 'app', ['sh', '-c', 'echo v1 > /data/state']);
        const s = await r.t.req('POST', `/v1/envs/${env}/snapshot`);
        const snap = await finished(r.t, s.body.deployment.ID);
        assert.equal(snap.deployment.Status, 'succeeded', snap.deployment.Error);
        const frozen = snap.phases.find((p: any) => p.Evidence?.frozen_for !== undefined)?.Evidence;
        assert.equal(frozen?.consistent, true, JSON.stringify(snap.phases));
        const v = snap.deployment.VersionID;
        await exec(r.t, env, 'app', ['sh', '-c', 'echo v2 > /data/state']);
        const f = await r.t.req('POST', `/v1/envs/${env}/fork`, { body: { version: v, name: 'copy' } });
        const fork = await finished(r.t, f.body.deployment.ID);
        assert.equal(fork.deployment.Status, 'succeeded', fork.deployment.Error);
        const forkId = fork.deployment.EnvID;
        assert.equal((await exec(r.t, forkId, 'app', ['cat', '/data/state'])).stdout, 'v1\n');
        const forkKernel = (await exec(r.t, forkId, 'app', ['uname', '-r'])).stdout.trim();
        assert.equal(forkKernel === release(), runtime === 'runc', 'the fork runs under its source runtime');
        await exec(r.t, forkId, 'app', ['sh', '-c', 'echo fork > /data/state']);
        assert.equal((await exec(r.t, env, 'app', ['cat', '/data/state'])).stdout, 'v2\n');
        const rb = await r.t.req('POST', `/v1/envs/${env}/rollback`, { body: { version: v } });
        const back = await finished(r.t, rb.body.deployment.ID);
        assert.equal(back.deployment.Status, 'succeeded', back.deployment.Error);
        assert.equal((await exec(r.t, env, 'app', ['cat', '/data/state'])).stdout, 'v1\n');
        assert.equal((await exec(r.t, forkId, 'app', ['cat', '/data/state'])).stdout, 'fork\n');
        const d = await r.t.req('DELETE', `/v1/envs/${forkId}`);
        assert.equal((await finished(r.t, d.body.deployment.ID)).deployment.Status, 'succeeded');
        assert.deepEqual(leftovers(forkId), []);
      });

      test('disk limit: a write past x-svc.disk_mb fails inside the container', async () => {
        const out = await exec(r.t, env, 'app', [
          'sh',
          '-c',
          'dd if=/dev/zero of=/data/fill bs=1M count=200 2>&1; echo rc=$?; rm -f /data/fill',
        ]);
        assert.match(out.stdout, /No space left on device|Disk quota exceeded/, out.stdout);
        assert.doesNotMatch(out.stdout, /rc=0/);
      });

      test('a timed-out exec is gone from the container after its 124, with what it started', async () => {
        // The marks tell these commands from anything else running; under gVisor the engine's pid
        // of an exec is runsc's proxy, which alone dying left the process running in the sandbox.
        const loop = 'while :; do echo tick >> /data/ticks; sleep 0.1; done # svc-timed-loop';
        for (const cmd of [
          ['sleep', '1000'],
          ['sh', '-c', loop],
        ]) {
          const timed = await r.t.req('POST', `/v1/envs/${env}/exec`, {
            body: { service: 'app', cmd, timeout_sec: 1 },
          });
          assert.equal(timed.status, 200, JSON.stringify(timed.body));
          assert.equal(timed.body.exit_code, 124);
          assert.match(timed.body.stderr, /timed out after 1 s and was killed$/);
          const ps = (await exec(r.t, env, 'app', ['ps', '-o', 'pid,ppid,args'])).stdout;
          assert.doesNotMatch(ps, /sleep 1000|svc-timed-loop/, `${ps}\n${r.log().slice(-2000)}`);
        }
        // The loop's file stopped growing: the same size before and after another exec's round trip.
        const size = async () => (await exec(r.t, env, 'app', ['wc', '-c', '/data/ticks'])).stdout;
        const first = await size();
        await exec(r.t, env, 'app', ['sleep', '0.5']);
        assert.equal(await size(), first);
        assert.equal((await r.t.req('GET', '/health')).status, 200, 'the control plane still answers');
      });

      test('destroy leaves nothing', async () => {
        const d = await r.t.req('DELETE', `/v1/envs/${env}`);
        assert.equal((await finished(r.t, d.body.deployment.ID)).deployment.Status, 'succeeded');
        assert.deepEqual(leftovers(env), []);
      });
    });
  }
});
