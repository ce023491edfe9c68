// A disk limit on real Docker and btrfs: a container, as an unprivileged user, creates a btrfs
// subvolume inside its volume itself (BTRFS_IOC_SUBVOL_CREATE through perl, which the Debian
// test image has) and writes twice the env's limit into it: that works until svcd touches the env
// (env.snapshot here; the periodic sweep is stopped so the hole is shown first), and is refused
// after. env.destroy then removes the nested subvolume with everything else.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ensureTestImages, PGREDIS_IMAGE } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { engineOf, type SidecarContext } from '../context.ts';
import { svc, testEnvId } from '../docker/testing.ts';
import type { BtrfsBackend } from '../storage/btrfs.ts';
import { groupId, qgroupChildren } from '../storage/btrfs-quota.ts';
import { run as exec } from '../storage/exec.ts';
import { fsTier, loopFs, type Scratch } from '../storage/fixtures.ts';
import { openStorage } from '../storage/index.ts';
import { unmountUnder } from '../storage/quota.ts';
import { commandRunner, testContext } from './testing.ts';

const LIMIT_MB = 64;

/** BTRFS_IOC_SUBVOL_CREATE = _IOW(0x94, 14, struct btrfs_ioctl_vol_args { s64 fd; char name[4088]; }). */
const MAKE_SUBVOLUME = [
  'use Fcntl;',
  'sysopen(my $d, $ARGV[0], O_RDONLY) or die "open: $!";',
  'my $args = pack("q a4088", 0, $ARGV[1]);',
  'ioctl($d, 0x5000940e, $args) or die "ioctl: $!";',
  'print "made\\n";',
].join(' ');

describe('a container makes a btrfs subvolume in its volume: still inside the env limit', {
  skip: tier('docker') || fsTier('btrfs'),
}, () => {
  const envId = testEnvId('nest');
  let scratch: Scratch;
  let ctx: SidecarContext;
  const engine = () => engineOf(ctx, envId);
  const sh = async (script: string, user = '1000:1000') => {
    const r = await engine().exec('app', ['sh', '-c', script], { user });
    return `${r.stdout}${r.stderr}rc=${r.exit_code}`;
  };
  const dd = (path: string, mb: number) => sh(`dd if=/dev/zero of=${path} bs=1M count=${mb} 2>&1 && sync`);

  before(async () => {
    await ensureTestImages({ postgres: true });
    scratch = await loopFs('btrfs', 512);
    ctx = {
      ...(await testContext(scratch.dir)),
      storage: await openStorage({ dataDir: scratch.dir }),
    };
    (ctx.storage as BtrfsBackend).sweeper.stop(); // svcd's operations sweep; the timer would race the proof
  });
  after(async () => {
    await commandRunner(ctx, envId, 'clean')('env.destroy', {}).catch(() => {});
    await unmountUnder(scratch.dir);
    await scratch.cleanup();
  });

  test('unprivileged ioctl, unbounded until svcd sweeps, refused after; destroy removes it', async () => {
    const run = commandRunner(ctx, envId, 'nest');
    const created = await run('env.create', {
      version: 'ver_1',
      from_snapshot: '',
      services: [
        svc('app', PGREDIS_IMAGE, {
          entrypoint: ['sleep', 'infinity'],
          command: [],
          volumes: ['data:/data'],
        }),
      ],
      volumes: ['data'],
      warm: null,
      egress: 'allow',
      disk_mb: LIMIT_MB,
    });
    assert.equal(created.ok, true, created.error);
    assert.match(await sh('mkdir /data/u && chown 1000:1000 /data/u', '0'), /rc=0/);
    assert.match(await sh(`perl -e '${MAKE_SUBVOLUME}' /data/u sub`), /made\nrc=0/);
    const nested = `${ctx.storage.volumePath(envId, 'data')}/u/sub`;
    const id = `0/${(await exec('btrfs', ['inspect-internal', 'rootid', nested])).trim()}`;
    const members = async () => (await qgroupChildren(scratch.dir)).get(groupId(envId)) ?? [];
    // The hole, before svcd has seen the subvolume: twice the limit can be written (unless svcd's
    // periodic sweep, which runs on its own clock, adopted it already: either way the end state below).
    await dd('/data/u/sub/f', 2 * LIMIT_MB);
    assert.match(await sh('rm -f /data/u/sub/f && sync'), /rc=0/);

    const snap = await run('env.snapshot', { name: 'ver_2' });
    assert.equal(snap.ok, true, snap.error);
    assert.ok((await members()).includes(id), 'env.snapshot did not put the subvolume into the group');
    const refused = await dd('/data/u/sub/g', 2 * LIMIT_MB);
    assert.match(refused, /Disk quota exceeded|No space left on device/, refused);
    assert.doesNotMatch(refused, /rc=0/);

    const gone = await run('env.destroy', {});
    assert.equal(gone.ok, true, gone.error);
    const left = await exec('btrfs', ['subvolume', 'list', scratch.dir]);
    assert.equal(left.includes(envId), false, left);
    assert.equal((await qgroupChildren(scratch.dir)).has(groupId(envId)), false);
  });
});
