// The disk limit across an environment's volumes through real deploys: env.create on the
// btrfs backend (a loop device) and the zfs backend (a zfs-fuse pool) with `disk_mb`, a service
// writing 60% of the limit into each of two volumes (the second write fails), a fork of a version
// bounded by its own limit, and env.destroy releasing the qgroup or dataset.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { engineOf, type SidecarContext } from '../context.ts';
import { svc, testEnvId } from '../docker/testing.ts';
import { groupId, qgroupChildren } from '../storage/btrfs-quota.ts';
import { run as exec } from '../storage/exec.ts';
import { fsTier, loopFs, type Scratch, zfsPool } from '../storage/fixtures.ts';
import { openStorage } from '../storage/index.ts';
import { unmountUnder } from '../storage/quota.ts';
import { commandRunner, testContext } from './testing.ts';

const LIMIT_MB = 64;
const SHARE_MB = Math.round(LIMIT_MB * 0.6);

const backends = [
  {
    kind: 'btrfs' as const,
    scratch: () => loopFs('btrfs', 512),
    backing: async (s: Scratch, env: string) => (await qgroupChildren(s.dir)).has(groupId(env)),
  },
  {
    kind: 'zfs' as const,
    scratch: () => zfsPool(512),
    backing: (s: Scratch, env: string) =>
      exec('zfs', ['list', '-H', `${s.pool}/envs/${env}`]).then(
        () => true,
        () => false,
      ),
  },
];

for (const backend of backends) {
  describe(`disk limit across volumes through env.create and env.fork (${backend.kind})`, {
    skip: tier('docker') || fsTier(backend.kind),
  }, () => {
    const envId = testEnvId('disk');
    const forkId = testEnvId('diskf');
    let scratch: Scratch;
    let ctx: SidecarContext;
    const spec = {
      services: [svc('app', BUSYBOX_IMAGE, { volumes: ['data:/data', 'db:/db'] })],
      volumes: ['data', 'db'],
      warm: null,
      egress: 'allow',
      disk_mb: LIMIT_MB,
    };
    const dd = async (env: string, path: string, mb: number) =>
      (
        await engineOf(ctx, env).exec('app', [
          'sh',
          '-c',
          `dd if=/dev/zero of=${path} bs=1M count=${mb} 2>&1 && sync; echo rc=$?`,
        ])
      ).stdout;

    before(async () => {
      await ensureTestImages();
      scratch = await backend.scratch();
      ctx = {
        ...(await testContext(scratch.dir)),
        storage: await openStorage({ dataDir: scratch.dir, zfsPool: scratch.pool }),
      };
    });
    after(async () => {
      for (const env of [forkId, envId])
        await commandRunner(ctx, env, 'clean')('env.destroy', {}).catch(() => {});
      await unmountUnder(scratch.dir);
      await scratch.cleanup();
    });

    test('60% of the limit in each of two volumes: the second write fails; a fork has its own limit', async () => {
      assert.equal(ctx.storage.kind, backend.kind);
      const run = commandRunner(ctx, envId, 'disk');
      const created = await run('env.create', { version: 'ver_1', from_snapshot: '', ...spec });
      assert.equal(created.ok, true, created.error);
      assert.match((created.payload as { disk_quota: string }).disk_quota, /across volumes/);
      assert.match(await dd(envId, '/data/f', SHARE_MB), /rc=0/);
      const second = await dd(envId, '/db/f', SHARE_MB);
      assert.match(second, /Disk quota exceeded|No space left on device/, second);
      assert.doesNotMatch(second, /rc=0/);
      const rm = await engineOf(ctx, envId).exec('app', ['rm', '/db/f']);
      assert.equal(rm.exit_code, 0, rm.stderr);
      assert.match(await dd(envId, '/db/f', 1), /rc=0/, 'no room once the refused write is removed');

      const snap = await run('env.snapshot', { name: 'ver_2' });
      assert.equal(snap.ok, true, snap.error);
      const fork = await commandRunner(
        ctx,
        forkId,
        'diskf',
      )('env.fork', {
        from_env: envId,
        from_snapshot: 'ver_2',
        ...spec,
      });
      assert.equal(fork.ok, true, fork.error);
      const forkWrite = await dd(forkId, '/db/g', 2 * LIMIT_MB);
      assert.match(forkWrite, /Disk quota exceeded|No space left on device/, forkWrite);
      // The fork's writes are its own: the source still has its room.
      assert.match(await dd(envId, '/db/h', 8), /rc=0/);

      for (const env of [forkId, envId]) {
        assert.equal(await backend.backing(scratch, env), true);
        const r = await commandRunner(ctx, env, 'gone')('env.destroy', {});
        assert.equal(r.ok, true, r.error);
        assert.equal(await backend.backing(scratch, env), false, `${env}'s limit outlives it`);
      }
    });
  });
}
