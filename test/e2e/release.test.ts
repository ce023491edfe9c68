// The release artifacts end to end. `npm run build:release` builds svc and svcd for amd64 and arm64
// and the CLI's npm package. The sidecar is served at /svcd-linux-amd64 and the join-token route's
// ready-to-paste command downloads and installs it; the installed sidecar (started as its systemd unit
// would) joins and deploys a deny-egress stack, which exercises the binary's own egress-probe verb;
// the unit passes `systemd-analyze verify`; a restart of the service keeps the host id and reconnects.
// The arm64 builds (no arm64 machine here) are checked by ELF header and SEA blob, and are served.
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { tier } from '../support/tiers.ts';
import { finished, leftovers } from './real.ts';
import { assertSea, EM, elfMachine } from './release-support.ts';

describe('the release artifacts; the sidecar installed with the join command', {
  skip: tier('docker'),
}, () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-release-'));
  const releases = join(dir, 'releases');
  const root = join(dir, 'root');
  const bin = join(root, 'usr/local/bin/svcd');
  const envFile = join(root, 'etc/svc/svcd.env');
  let t: TestServer;
  let sidecar: ChildProcess | null = null;
  let out = '';

  /** What systemd runs (paths under the install root), with the unit's environment file. */
  async function startUnit(): Promise<void> {
    const from = out.length;
    const args = ['join', '--state', join(root, 'etc/svc/host.json'), '--env-file', envFile];
    sidecar = spawn(bin, [...args, '--data', join(dir, 'data')], { stdio: ['ignore', 'pipe', 'pipe'] });
    sidecar.stderr?.on('data', (d) => (out += d));
    const t0 = Date.now();
    while (!/connected to /.test(out.slice(from))) {
      assert.ok(Date.now() - t0 < 30_000 && sidecar.exitCode === null, out);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  before(async () => {
    await ensureTestImages();
    execFileSync(
      process.execPath,
      ['release/build-release.ts', '--out', releases, '--version', 'test-build'],
      {
        stdio: 'inherit',
      },
    );
    t = await startTestServer('sqlite', { SVC_RELEASES_DIR: releases });
  });
  after(async () => {
    sidecar?.kill('SIGTERM');
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('build:release writes both programs for both architectures and the npm package', () => {
    const names = readdirSync(releases).sort();
    for (const name of ['svc-linux-amd64', 'svc-linux-arm64', 'svcd-linux-amd64', 'svcd-linux-arm64'])
      assert.ok(names.includes(name), `${name} in ${names}`);
    assert.ok(
      names.some((n) => /^svc-cli-\d+\.\d+\.\d+-test-build\.tgz$/.test(n)),
      `npm package in ${names}`,
    );
    for (const program of ['svc', 'svcd']) {
      for (const arch of ['amd64', 'arm64'] as const) {
        const path = join(releases, `${program}-linux-${arch}`);
        assert.equal(elfMachine(path), EM[arch], `${path} is built for ${arch}`);
        assertSea(path, 'test-build');
      }
    }
    // The amd64 ones run here, with no Node anywhere on PATH.
    const bare = { env: { PATH: join(dir, 'nowhere') }, encoding: 'utf8' as const };
    assert.equal(execFileSync(join(releases, 'svc-linux-amd64'), ['version'], bare), 'svc test-build\n');
    assert.equal(execFileSync(join(releases, 'svcd-linux-amd64'), ['version'], bare).trim(), 'test-build');
  });

  test('the arm64 builds are served at their routes and by ?arch=arm64', async () => {
    for (const [path, file] of [
      ['/svcd-linux-arm64', 'svcd-linux-arm64'],
      ['/svcd?arch=arm64', 'svcd-linux-arm64'],
      ['/svcd?arch=aarch64', 'svcd-linux-arm64'],
      ['/svc-linux-arm64', 'svc-linux-arm64'],
      ['/svc-linux-amd64', 'svc-linux-amd64'],
    ]) {
      const r = await fetch(`${t.url}${path}`);
      assert.equal(r.status, 200, path);
      assert.equal(r.headers.get('content-length'), String(statSync(join(releases, file)).size), path);
      await r.body?.cancel();
    }
    assert.match(readFileSync('release/install.sh', 'utf8'), /aarch64 \| arm64\) arch=arm64/);
  });

  test('curl | install writes the binary, the 0600 env file and the unit; the unit command joins and deploys', async () => {
    const jt = await t.req('POST', '/v1/join-tokens', { body: {} });
    assert.equal(jt.status, 201);
    // As root there may be no sudo; everything else is the command exactly as printed.
    const command = jt.body.command.replace(/\bsudo /, '');
    assert.match(command, /^curl -fsSL \S+\/install\.sh \| sh -s -- --server /);
    // Asynchronously: the control plane answering the download runs in this very process.
    // The script installs to SVC_BIN_DIR; the install verb then places itself under the root.
    const scratch = join(dir, 'tmp');
    mkdirSync(scratch);
    await promisify(execFile)('sh', ['-c', command], {
      cwd: dir,
      env: {
        ...process.env,
        SVC_BIN_DIR: join(dir, 'bin'),
        SVC_INSTALL_ROOT: root,
        SVC_SYSTEMCTL: 'true',
        TMPDIR: scratch,
      },
    });
    // The download (the whole sidecar, ~120 MiB) is not left in the temp dir.
    assert.deepEqual(readdirSync(scratch), []);
    assert.equal(execFileSync(join(dir, 'bin/svcd'), ['version'], { encoding: 'utf8' }).trim(), 'test-build');
    assert.equal(execFileSync(bin, ['version'], { encoding: 'utf8' }).trim(), 'test-build');
    assert.equal(statSync(envFile).mode & 0o777, 0o600);
    assert.match(
      readFileSync(envFile, 'utf8'),
      new RegExp(`^SVC_SERVER=${t.url}\\nSVC_JOIN_TOKEN=${jt.body.token}\\n`, 'm'),
    );
    const unit = readFileSync(join(root, 'etc/systemd/system/svcd.service'), 'utf8');
    assert.match(unit, /ExecStart=\/usr\/local\/bin\/svcd join --state \/etc\/svc\/host.json/);
    assert.match(unit, /Restart=always/);

    await startUnit();
    await t.req('POST', '/v1/projects', { body: { name: 'rel' } });
    const compose = `services:\n  app:\n    image: ${BUSYBOX_IMAGE}\n    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]\n`;
    const d = await t.req('POST', '/v1/projects/rel/deploy', { body: { compose } });
    const { deployment } = await finished(t, d.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded', `${deployment.Error}\n${out}`);
    const del = await t.req('DELETE', `/v1/envs/${deployment.EnvID}`);
    assert.equal((await finished(t, del.body.deployment.ID)).deployment.Status, 'succeeded');
    assert.deepEqual(leftovers(deployment.EnvID), []);
  });

  test('the unit passes systemd-analyze verify (and a broken one does not)', async () => {
    // systemd's own units under the root, so verify resolves the targets the unit names.
    cpSync('/usr/lib/systemd/system', join(root, 'usr/lib/systemd/system'), { recursive: true });
    const verify = () =>
      promisify(execFile)('systemd-analyze', [
        'verify',
        `--root=${root}`,
        '/etc/systemd/system/svcd.service',
      ]);
    const { stdout, stderr } = await verify();
    assert.equal(`${stdout}${stderr}`.trim(), '', 'no warning');
    const unit = join(root, 'etc/systemd/system/svcd.service');
    const good = readFileSync(unit, 'utf8');
    writeFileSync(unit, good.replace('ExecStart=/usr/local/bin/svcd', 'ExecStart=/usr/local/bin/nosuch'));
    await assert.rejects(verify(), /nosuch/);
    writeFileSync(unit, good);
  });

  test('a restart of the service keeps the host id and reconnects (the join token is not used again)', async () => {
    const before = (await t.req('GET', '/v1/hosts')).body.hosts;
    assert.equal(before.length, 1);
    const c = sidecar as ChildProcess;
    const gone = new Promise((r) => c.once('exit', r));
    c.kill('SIGTERM');
    await gone;
    const t0 = Date.now();
    while ((await t.req('GET', '/v1/hosts')).body.hosts[0].connected) {
      assert.ok(Date.now() - t0 < 30_000, 'the host shows disconnected after its stream closes');
      await new Promise((r) => setTimeout(r, 100));
    }
    await startUnit();
    const hosts = (await t.req('GET', '/v1/hosts')).body.hosts;
    assert.deepEqual(
      hosts.map((h: any) => [h.ID, h.connected]),
      [[before[0].ID, true]],
    );
  });
});
