// Relative binds are mounted from what was checked: each source is pinned beneath the context
// (no link at any component, a directory or a regular file) and mounted onto svcd's own staging
// path, so swapping the source for a link afterwards changes nothing a container gets; staging
// leaves nothing on the host once undone, and a svcd that cannot mount refuses instead of
// handing Docker the path.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { ServiceRecord } from '../../protocol/spec.ts';
import { tier } from '../../test/support/tiers.ts';
import { mounts } from '../storage/mounts.ts';
import { stageBinds, stagingDir, unstageBinds } from './bind-staging.ts';

const root = mkdtempSync(join(tmpdir(), 'svc-stage-'));
after(async () => {
  await unstageBinds(stagingDir(root, 'env_a')).catch(() => {});
  rmSync(root, { recursive: true, force: true });
});

const svc = (name: string, binds: ServiceRecord['binds'], user = '') =>
  ({ name, binds, user }) as ServiceRecord;
const mountedUnder = async (dir: string) => (await mounts()).filter((m) => m.point.startsWith(`${dir}/`));

describe('relative binds staged from pinned sources', { skip: tier('docker') }, () => {
  const dataset = join(root, 'ds');
  const files = join(dataset, 'files');
  const stage = stagingDir(root, 'env_a');

  it('mounts the checked inode; a swap of the source for a link afterwards changes nothing', async () => {
    mkdirSync(join(files, 'data', 'sub'), { recursive: true });
    writeFileSync(join(files, 'data', 'sub', 'x'), 'original\n');
    writeFileSync(join(files, 'conf.ini'), 'k=v\n');
    const staged = await stageBinds(stage, dataset, [
      svc('w', [{ source: 'data', target: '/ctx', read_only: false }], '1000:1000'),
      svc('v', [
        { source: 'data/sub', target: '/host', read_only: true },
        { source: 'conf.ini', target: '/etc/app.ini', read_only: true },
        { source: 'new/dir', target: '/n', read_only: false },
      ]),
    ]);
    assert.deepEqual(staged, {
      w: [join(stage, '0.0')],
      v: [join(stage, '1.0'), join(stage, '1.1'), join(stage, '1.2')],
    });
    assert.equal(statSync(stage).mode & 0o777, 0o700);
    assert.equal(statSync(join(files, 'data', 'sub', 'x')).uid, 1000, 'a rw bind goes to the service user');
    assert.equal(readFileSync(join(stage, '1.1'), 'utf8'), 'k=v\n');
    assert.ok(statSync(join(files, 'new', 'dir')).isDirectory(), 'a missing source is made');
    // What a service started first would do: keep the directory elsewhere, plant a link to the host.
    renameSync(join(files, 'data', 'sub'), join(files, 'data', 'kept'));
    symlinkSync('/etc', join(files, 'data', 'sub'));
    assert.deepEqual(execFileSync('ls', [join(stage, '1.0')], { encoding: 'utf8' }), 'x\n');
    const ro = (await mounts()).find((m) => m.point === join(stage, '1.0'));
    assert.ok(ro, 'the staging path is a mount point');
    await unstageBinds(stage);
    assert.deepEqual(await mountedUnder(stage), []);
    assert.equal(existsSync(stage), false);
    await unstageBinds(stage); // idempotent
  });

  it('refuses a link at any component, and what is neither a directory nor a file; nothing stays staged', async () => {
    // After the swap above, data/sub is a link to /etc.
    mkdirSync(join(files, 'conf'), { recursive: true });
    symlinkSync('conf', join(files, 'inside'));
    execFileSync('mkfifo', [join(files, 'pipe')]);
    const cases: [string, RegExp][] = [
      ['data/sub', /'\.\/data\/sub' is a link \(-> '\/etc'\); links are never followed/],
      ['data/sub/shadow', /'\.\/data\/sub' is a link/],
      ['inside', /'\.\/inside' is a link \(-> 'conf'\)/],
      ['pipe', /is a named pipe; only a directory or a regular file can be bound/],
      ['conf.ini/x', /'\.\/conf.ini' is a regular file, not a directory/],
    ];
    for (const [source, message] of cases) {
      await assert.rejects(
        stageBinds(stage, dataset, [
          svc('ok', [{ source: 'conf', target: '/c', read_only: true }]),
          svc('bad', [{ source, target: '/x', read_only: true }]),
        ]),
        message,
        source,
      );
      assert.deepEqual(await mountedUnder(stage), [], source);
      assert.equal(existsSync(stage), false, source);
    }
  });

  it('restaging replaces what was staged; a stack without binds stages nothing', async () => {
    const one = [svc('a', [{ source: 'conf', target: '/c', read_only: true }])];
    await stageBinds(stage, dataset, one);
    await stageBinds(stage, dataset, one);
    assert.equal((await mountedUnder(stage)).length, 1);
    assert.deepEqual(await stageBinds(stage, dataset, [svc('a', [])]), {});
    assert.deepEqual(await mountedUnder(stage), []);
    assert.equal(existsSync(stage), false);
  });
});

describe('relative binds from a svcd in a mount namespace of its own', { skip: tier('docker') }, () => {
  it('are refused: dockerd would never see the staged mount', () => {
    const dataset = join(root, 'ds-ns');
    mkdirSync(join(dataset, 'files', 'conf'), { recursive: true });
    const stage = stagingDir(root, 'env_ns');
    // What systemd's PrivateTmp or ProtectSystem gives a service: a private copy of the mounts.
    const script = `import { stageBinds } from ${JSON.stringify(new URL('./bind-staging.ts', import.meta.url).pathname)};
      await stageBinds(${JSON.stringify(stage)}, ${JSON.stringify(dataset)},
        [{ name: 'a', user: '', binds: [{ source: 'conf', target: '/c', read_only: true }] }])
        .then(() => console.log('staged'), (e) => console.log(e.message));`;
    const out = execFileSync(
      'unshare',
      ['-m', '--propagation', 'slave', process.execPath, '--input-type=module', '-e', script],
      { encoding: 'utf8' },
    );
    assert.match(out, /svcd runs in another mount namespace than dockerd/);
    assert.equal(existsSync(stage), false);
  });
});

describe('relative binds without root', () => {
  it('are refused, never mounted from the path', async () => {
    const dataset = join(root, 'ds-user');
    mkdirSync(join(dataset, 'files', 'conf'), { recursive: true });
    const stage = stagingDir(root, 'env_user');
    await assert.rejects(
      stageBinds(stage, dataset, [svc('a', [{ source: 'conf', target: '/c', read_only: true }])], false),
      /relative binds need svcd to run as root/,
    );
    assert.equal(existsSync(stage), false);
    assert.deepEqual(await stageBinds(stage, dataset, [svc('a', [])], false), {});
  });
});
