// The packaged sidecar end to end: the single executable is built, served at /svcd-linux-amd64, and the
// join-token route's ready-to-paste command downloads and installs it; the installed sidecar
// (started as its systemd unit would) joins and deploys a deny-egress stack, which exercises the
// binary's own egress-probe verb.
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { tier } from '../support/tiers.ts';
import { finished, leftovers } from './real.ts';

describe('the released sidecar binary, installed with the join command', { skip: tier('docker') }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-release-'));
  const releases = join(dir, 'releases');
  const root = join(dir, 'root');
  let t: TestServer;
  let sidecar: ChildProcess | null = null;
  before(async () => {
    await ensureTestImages();
    execFileSync(process.execPath, ['release/build-svcd.ts', '--out', releases, '--version', 'test-build'], {
      stdio: 'inherit',
    });
    t = await startTestServer('sqlite', { SVC_RELEASES_DIR: releases });
  });
  after(async () => {
    sidecar?.kill('SIGTERM');
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('curl | install writes the binary, the 0600 env file and the unit; the unit command joins and deploys', async () => {
    const jt = await t.req('POST', '/v1/join-tokens', { body: {} });
    assert.equal(jt.status, 201);
    // As root there may be no sudo; everything else is the command exactly as printed.
    const command = jt.body.command.replace(/\bsudo /, '');
    assert.match(command, /^curl -fsSL \S+\/install\.sh \| sh -s -- --server /);
    // Asynchronously: the control plane answering the download runs in this very process.
    // The script installs to SVC_BIN_DIR; the install verb then places itself under the root.
    await promisify(execFile)('sh', ['-c', command], {
      cwd: dir,
      env: { ...process.env, SVC_BIN_DIR: join(dir, 'bin'), SVC_INSTALL_ROOT: root, SVC_SYSTEMCTL: 'true' },
    });
    assert.equal(execFileSync(join(dir, 'bin/svcd'), ['version'], { encoding: 'utf8' }).trim(), 'test-build');
    const bin = join(root, 'usr/local/bin/svcd');
    assert.equal(execFileSync(bin, ['version'], { encoding: 'utf8' }).trim(), 'test-build');
    const envFile = join(root, 'etc/svc/svcd.env');
    assert.equal(statSync(envFile).mode & 0o777, 0o600);
    assert.match(
      readFileSync(envFile, 'utf8'),
      new RegExp(`^SVC_SERVER=${t.url}\\nSVC_JOIN_TOKEN=${jt.body.token}\\n`, 'm'),
    );
    const unit = readFileSync(join(root, 'etc/systemd/system/svcd.service'), 'utf8');
    assert.match(unit, /ExecStart=\/usr\/local\/bin\/svcd join --state \/etc\/svc\/host.json/);
    assert.match(unit, /Restart=always/);

    // What systemd would run (paths under the install root), with the unit's environment file.
    let out = '';
    sidecar = spawn(
      bin,
      [
        'join',
        '--state',
        join(root, 'etc/svc/host.json'),
        '--env-file',
        envFile,
        '--data',
        join(dir, 'data'),
      ],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    sidecar.stderr?.on('data', (d) => (out += d));
    const t0 = Date.now();
    while (!/connected to /.test(out)) {
      assert.ok(Date.now() - t0 < 30_000 && sidecar.exitCode === null, out);
      await new Promise((r) => setTimeout(r, 100));
    }
    await t.req('POST', '/v1/projects', { body: { name: 'rel' } });
    const compose = `services:\n  app:\n    image: ${BUSYBOX_IMAGE}\n    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]\n`;
    const d = await t.req('POST', '/v1/projects/rel/deploy', { body: { compose } });
    const { deployment } = await finished(t, d.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded', `${deployment.Error}\n${out}`);
    const del = await t.req('DELETE', `/v1/envs/${deployment.EnvID}`);
    assert.equal((await finished(t, del.body.deployment.ID)).deployment.Status, 'succeeded');
    assert.deepEqual(leftovers(deployment.EnvID), []);
  });
});
