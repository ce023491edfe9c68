// Per-environment disk images (images.ts) on a data dir that clones (XFS reflink=1 on a loop
// device): snapshot, fork and rollback are reflinks of the image, the disk limit is the image's
// file system and grows on a redeploy, mounts come back after a restart or a reboot, crashes leave
// whole images, and environments made with the older ext4 disks keep working.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { open, readdir, readFile, stat, statfs, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { dirBackend } from './dir.ts';
import { armCapture } from './disk-image.ts';
import { run } from './exec.ts';
import { fsTier, loopFs, type Scratch, tmpDataDir } from './fixtures.ts';
import { ImageBackend } from './images.ts';
import { openStorage, type StorageBackend } from './index.ts';
import { Layout } from './layout.ts';
import { mountAt, unmountUnder } from './mounts.ts';

const MiB = 1024 * 1024;
const used = async (dir: string) => {
  const s = await statfs(dir);
  return (s.blocks - s.bfree) * s.bsize;
};

async function fill(path: string, mb: number): Promise<string> {
  const fh = await open(path, 'w');
  try {
    for (let i = 0; i < mb; i++) await fh.write(Buffer.alloc(MiB, 3));
    await fh.sync();
    return 'written';
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? String(err);
  } finally {
    await fh.close().catch(() => {});
  }
}

describe('per-environment disk images on a data dir that clones', { skip: fsTier('xfs') }, () => {
  let scratch: Scratch;
  let store: StorageBackend;
  const data = () => scratch.dir;
  before(async () => {
    scratch = await loopFs('xfs', 2048);
    store = await openStorage({ dataDir: data() });
  });
  after(() => scratch?.cleanup());

  it('is used where no XFS project quota can bound an env, and reports reflink copy-on-write', () => {
    assert.ok(store instanceof ImageBackend);
    assert.equal(store.cow, 'reflink');
  });

  it('snapshot, fork and rollback reflink the image: 64 MiB of data is not copied', async () => {
    await store.setQuota('big', 256 * MiB);
    const paths = await store.prepare('big', ['data']);
    const m = await mountAt(paths.data.replace(/\/data$/, ''));
    assert.equal(m?.fstype, 'xfs');
    assert.ok(m?.source.startsWith('/dev/loop'));
    assert.equal(await fill(join(paths.data, 'blob'), 64), 'written');
    await store.prepareSnapshot?.('big', 'v1', ['data']);
    const before = await used(data());
    const datasets = await store.snapshot('big', 'v1', ['data']);
    assert.deepEqual(datasets, [`${join(data(), 'snaps', 'big', 'v1', 'disk.img')}:data`]);
    await store.setQuota('big-f', 256 * MiB);
    await store.clone('big', 'v1', 'big-f', ['data']);
    await writeFile(join(paths.data, 'blob'), 'changed');
    await store.rollback('big', 'v1', ['data']);
    const grown = (await used(data())) - before;
    assert.ok(grown < 16 * MiB, `snapshot + fork + rollback of 64 MiB took ${grown} bytes`);
    for (const env of ['big', 'big-f'])
      assert.equal((await stat(join(store.volumePath(env, 'data'), 'blob'))).size, 64 * MiB);
    const frag = spawnSync('filefrag', ['-v', join(data(), 'envs', 'big-f', 'disk.img')], {
      encoding: 'utf8',
    });
    if (frag.status === 0) assert.match(frag.stdout, /shared/);
  });

  it('a larger limit on a redeploy grows the file system online, beyond its first size', async () => {
    await store.setQuota('grow', 32 * MiB);
    const paths = await store.prepare('grow', ['data']);
    assert.match(await fill(join(paths.data, 'a'), 48), /ENOSPC/);
    const image = join(data(), 'envs', 'grow', 'disk.img');
    const sizeBefore = (await stat(image)).size;
    assert.equal(await store.setQuota('grow', 1024 * MiB), `loop-mounted xfs image of ${1024 * MiB} bytes`);
    assert.ok((await stat(image)).size >= 1024 * MiB, `image of ${sizeBefore} bytes did not grow`);
    const s = await statfs(paths.data);
    assert.ok(s.bavail * s.bsize > 900 * MiB, `only ${s.bavail * s.bsize} bytes free after growing`);
    assert.equal(await fill(join(paths.data, 'a'), 48), 'written');
    // A smaller limit later never shrinks a disk, and says so.
    assert.match(await store.setQuota('grow', 64 * MiB), /never shrinks/);
    // A snapshot carries the grown size into its forks.
    await store.snapshot('grow', 'g1', ['data']);
    await store.setQuota('grow-f', 1024 * MiB);
    await store.clone('grow', 'g1', 'grow-f', ['data']);
    assert.equal(await fill(join(store.volumePath('grow-f', 'data'), 'b'), 100), 'written');
  });

  it('mounts come back after a restart and after a reboot, with the data', async () => {
    const paths = await store.prepare('keep', ['data']);
    await writeFile(join(paths.data, 'f'), 'kept');
    await store.snapshot('keep', 'k1', ['data']);
    const restarted = await openStorage({ dataDir: data() });
    assert.deepEqual(await restarted.prepare('keep', ['data']), paths);
    await unmountUnder(join(data(), 'envs')); // the machine rebooted: nothing is mounted
    const rebooted = await openStorage({ dataDir: data() });
    await rebooted.snapshot('keep', 'k2', ['data']); // mounts on its own
    assert.equal(await readFile(join(paths.data, 'f'), 'utf8'), 'kept');
    await unmountUnder(join(data(), 'envs'));
    await rebooted.clone('keep', 'k1', 'keep-f', ['data']);
    assert.equal(await readFile(join(rebooted.volumePath('keep-f', 'data'), 'f'), 'utf8'), 'kept');
    await unmountUnder(join(data(), 'envs'));
    await writeFile(join(data(), 'envs', 'keep', 'vol', 'stray'), 'x'); // on the bare mount point
    await rebooted.rollback('keep', 'k1', ['data']);
    assert.deepEqual(await readdir(paths.data), ['f']);
    assert.deepEqual(await readdir(join(data(), 'envs', 'keep', 'vol')), ['.svc-limit', 'data']);
  });

  it('a crash leaves whole images: a cut-short copy is dropped, a failed capture freezes nothing', async () => {
    const paths = await store.prepare('crash', ['data']);
    await writeFile(join(paths.data, 'f'), 'live');
    await store.snapshot('crash', 'c1', ['data']);
    await writeFile(join(paths.data, 'f'), 'later');
    // A rollback that died while copying: the copy is not the live image.
    await writeFile(join(data(), 'envs', 'crash', '.disk.img.new'), 'partial');
    await store.prepare('crash', ['data']);
    assert.equal(await readFile(join(paths.data, 'f'), 'utf8'), 'later');
    assert.deepEqual(await readdir(join(data(), 'envs', 'crash')), ['disk.img', 'vol']);
    // A capture whose copy fails says why and leaves nothing frozen, on both paths; one let go does nothing.
    const vol = join(data(), 'envs', 'crash', 'vol');
    const failing = armCapture(vol, join(data(), 'envs', 'crash', 'disk.img'));
    await assert.rejects(failing.fire(join(data(), 'no-such-dir', 'x')), /no-such-dir/);
    const copying = armCapture(vol, join(data(), 'envs', 'crash', 'disk.img'), false);
    await assert.rejects(copying.fire(join(data(), 'no-such-dir', 'x')), /no-such-dir/);
    await run('fsfreeze', ['-f', vol]);
    await run('fsfreeze', ['-u', vol]);
    armCapture(vol, join(data(), 'envs', 'crash', 'disk.img')).cancel();
    await store.prepareSnapshot?.('crash', 'c9', ['data']); // armed, then replaced by the next one
    await store.prepareSnapshot?.('crash', 'c8', ['data']);
    await run('fsfreeze', ['-f', vol]);
    await run('fsfreeze', ['-u', vol]);
    // A snapshot that died before its rename is not one.
    await writeFile(join(data(), 'snaps', 'crash', '.c2.tmp'), 'partial');
    assert.equal(await store.hasSnapshot('crash', 'c2'), false);
    await store.snapshot('crash', 'c2', ['data']);
    await store.rollback('crash', 'c1', ['data']);
    assert.equal(await readFile(join(paths.data, 'f'), 'utf8'), 'live');
  });

  it('an env without volumes gets no disk (no loop device) until a redeploy brings volumes', async () => {
    assert.deepEqual(await store.prepare('bare', []), {});
    assert.equal(await mountAt(join(data(), 'envs', 'bare', 'vol')), null);
    assert.deepEqual(await store.snapshot('bare', 'b1', []), []);
    assert.deepEqual(await store.clone('bare', 'b1', 'bare-f', []), {});
    await assert.rejects(store.clone('bare', 'b1', 'bare-g', ['data']), /no volume data/);
    await store.rollback('bare', 'b1', []);
    const paths = await store.prepare('bare', ['data']);
    assert.equal((await mountAt(join(data(), 'envs', 'bare', 'vol')))?.fstype, 'xfs');
    await writeFile(join(paths.data, 'f'), 'x');
    await store.snapshot('bare', 'b2', ['data']);
    await store.clone('bare', 'b2', 'bare-g', ['data']);
    assert.equal(await readFile(join(store.volumePath('bare-g', 'data'), 'f'), 'utf8'), 'x');
    for (const env of ['bare', 'bare-f', 'bare-g']) await store.destroy(env);
  });

  it('where the store cannot clone, a file system a crash left frozen mid-copy is thawed on start', async (t) => {
    const plain = await tmpDataDir(); // the temp dir: no reflinks, so the capture freezes and copies
    t.after(() => plain.cleanup());
    const copying = await openStorage({ dataDir: plain.dir });
    assert.equal(copying.cow, 'none');
    const paths = await copying.prepare('frozen', ['data']);
    await writeFile(join(paths.data, 'f'), 'v1');
    await copying.snapshot('frozen', 'f1', ['data']);
    const vol = join(plain.dir, 'envs', 'frozen', 'vol');
    await run('fsfreeze', ['-f', vol]); // svcd and its capture shell died inside the freeze
    await openStorage({ dataDir: plain.dir }); // svcd starts again
    // Thawed: a second freeze succeeds (the kernel refuses to freeze a frozen file system).
    await run('fsfreeze', ['-f', vol]);
    await run('fsfreeze', ['-u', vol]);
    await copying.clone('frozen', 'f1', 'frozen-f', ['data']);
    assert.equal(await readFile(join(copying.volumePath('frozen-f', 'data'), 'f'), 'utf8'), 'v1');
  });

  it('an env made with an older ext4 disk keeps working through the directory trees', async () => {
    const trees = dirBackend(new Layout(data()));
    assert.match(await trees.setQuota('old', 64 * MiB), /ext4/);
    const paths = await trees.prepare('old', ['data']);
    await writeFile(join(paths.data, 'f'), 'v1');
    await unmountUnder(join(data(), 'envs', 'old')); // and a reboot since
    assert.equal(await store.hasSnapshot('old', 'o1'), false);
    assert.deepEqual(await store.prepare('old', ['data']), paths);
    assert.equal(await readFile(join(paths.data, 'f'), 'utf8'), 'v1');
    await store.snapshot('old', 'o1', ['data']);
    await writeFile(join(paths.data, 'f'), 'v2');
    await store.rollback('old', 'o1', ['data']);
    assert.equal(await readFile(join(paths.data, 'f'), 'utf8'), 'v1');
    await store.setQuota('old-f', 64 * MiB);
    await store.clone('old', 'o1', 'old-f', ['data']);
    assert.equal(await readFile(join(store.volumePath('old-f', 'data'), 'f'), 'utf8'), 'v1');
    for (const env of ['old', 'old-f']) await store.destroy(env);
    assert.deepEqual(await readdir(join(data(), 'disks')), []);
    assert.deepEqual(
      await readdir(join(data(), 'envs')).then((e) => e.filter((x) => x.startsWith('old'))),
      [],
    );
  });
});
