// Real file systems for the storage tests and the fork benchmark: XFS (reflink=1) and btrfs on
// loop devices, a zfs-fuse pool on a file vdev. Each needs root and kernel or daemon support; when
// one is missing, `fsTier` returns a loud skip reason (node:test `skip`), and with the tier named
// in SVC_REQUIRE_TIERS it throws instead, so CI can not pass by skipping.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { lstat, mkdir, mkdtemp, readdir, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { nameSuffix } from '../../protocol/ids.ts';
import { run } from './exec.ts';
import { unmountUnder } from './mounts.ts';

export type FsTier = 'xfs' | 'btrfs' | 'zfs' | 'xfs-prjquota';

const required = new Set((process.env.SVC_REQUIRE_TIERS ?? '').split(',').filter(Boolean));
const warned = new Set<FsTier>();

function has(cmd: string, args = ['--version']): boolean {
  const r = spawnSync(cmd, args, { stdio: 'ignore' });
  return r.error === undefined;
}

function kernelHas(fs: string): boolean {
  const listed = () =>
    readFileSync('/proc/filesystems', 'utf8')
      .split('\n')
      .some((l) => l.trim().endsWith(fs));
  if (listed()) return true;
  spawnSync('modprobe', [fs], { stdio: 'ignore' });
  return listed();
}

function zfsDaemonAnswers(): boolean {
  return spawnSync('zpool', ['list'], { stdio: 'ignore', timeout: 10_000 }).status === 0;
}

/** Starts Debian's zfs-fuse daemon when it is installed but not running (it has no kernel part). */
function startZfsFuse(): string | null {
  if (zfsDaemonAnswers()) return null;
  mkdirSync('/var/run/zfs', { recursive: true });
  const r = spawnSync('zfs-fuse', ['-p', '/var/run/zfs-fuse.pid'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) return `zfs-fuse did not start: ${r.error?.message ?? r.stderr.trim()}`;
  for (let i = 0; i < 50; i++) {
    if (zfsDaemonAnswers()) return null;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
  }
  return 'zfs-fuse started but `zpool list` does not answer';
}

/** Whether an XFS can be mounted with project quotas here (the kernel needs CONFIG_XFS_QUOTA). */
function xfsQuotaReason(): string | null {
  const dir = mkdtempSync(join(tmpdir(), 'svc-xfsq-'));
  try {
    const image = join(dir, 'image');
    spawnSync('truncate', ['-s', '320M', image]);
    spawnSync('mkfs.xfs', ['-q', image]);
    mkdirSync(join(dir, 'mnt'));
    const r = spawnSync('mount', ['-o', 'loop,prjquota', image, join(dir, 'mnt')], { encoding: 'utf8' });
    if (r.status !== 0)
      return `this kernel cannot mount XFS with prjquota (CONFIG_XFS_QUOTA): ${r.stderr.trim().split('\n')[0]}`;
    spawnSync('umount', [join(dir, 'mnt')]);
    return null;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function reasonFor(tier: FsTier): string | null {
  if (process.getuid?.() !== 0) return 'needs root (loop devices, mounts, zfs)';
  if (tier === 'xfs-prjquota') return reasonFor('xfs') ?? xfsQuotaReason();
  if (tier === 'zfs') {
    if (!has('zpool', ['list'])) return 'zpool not installed (apt-get install zfs-fuse)';
    if (!existsSync('/dev/fuse')) return 'no /dev/fuse for zfs-fuse';
    return startZfsFuse();
  }
  if (!existsSync('/dev/loop-control')) return 'no /dev/loop-control (loop devices unavailable)';
  if (!has('losetup')) return 'losetup not installed (util-linux)';
  const mkfs = `mkfs.${tier}`;
  if (!has(mkfs, ['-V']))
    return `${mkfs} not installed (apt-get install ${tier === 'xfs' ? 'xfsprogs' : 'btrfs-progs'})`;
  if (!kernelHas(tier)) return `the kernel does not support ${tier}`;
  return null;
}

/** `false` when the tier can run here, else a loud skip reason for node:test's `skip` option. */
export function fsTier(tier: FsTier): false | string {
  const reason = reasonFor(tier);
  if (!reason) return false;
  if (required.has(tier)) throw new Error(`required test tier '${tier}' cannot run: ${reason}`);
  const msg = `*** ${tier.toUpperCase()} TIER SKIPPED: ${reason} ***`;
  if (!warned.has(tier)) {
    warned.add(tier);
    process.stderr.write(`${msg}\n`);
  }
  return msg;
}

/** A scratch file system: `dir` is its mount point (or pool data dir); `cleanup` undoes everything done. */
export interface Scratch {
  dir: string;
  pool?: string;
  /** The host file the scratch file system lives in (a loop image, a pool's vdev). */
  backing?: string;
  cleanup(): Promise<void>;
}

/** Cleanup steps run in reverse, every one attempted; the first failure is rethrown at the end. */
class Undo {
  private readonly steps: (() => Promise<unknown>)[] = [];
  push(step: () => Promise<unknown>): void {
    this.steps.push(step);
  }
  async run(): Promise<void> {
    let first: unknown = null;
    for (const step of this.steps.reverse()) {
      try {
        await step();
      } catch (err) {
        first ??= err;
      }
    }
    this.steps.length = 0;
    if (first) throw first;
  }
}

async function umount(dir: string): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await run('umount', [dir]);
      return;
    } catch (err) {
      if (i >= 20) {
        await run('umount', ['-l', dir]);
        throw err;
      }
      await sleep(200);
    }
  }
}

/** An XFS (with reflink) or btrfs file system on a loop device over a sparse image file. */
export async function loopFs(
  fs: 'xfs' | 'btrfs',
  sizeMb: number,
  mountOpts: string[] = [],
): Promise<Scratch> {
  const undo = new Undo();
  const base = await mkdtemp(join(tmpdir(), `svc-${fs}-`));
  undo.push(() => rm(base, { recursive: true, force: true }));
  try {
    const image = join(base, 'image');
    await writeFile(image, '');
    await truncate(image, sizeMb * 1024 * 1024);
    await run(`mkfs.${fs}`, fs === 'xfs' ? ['-q', '-m', 'reflink=1', image] : ['-q', image]);
    const dev = (await run('losetup', ['-f', '--show', image])).trim();
    undo.push(() => run('losetup', ['-d', dev]));
    const dir = join(base, 'mnt');
    await mkdir(dir);
    await run('mount', [...mountOpts, dev, dir]);
    undo.push(() => umount(dir));
    undo.push(() => unmountUnder(dir)); // environments' disk images (images.ts)
    return { dir, backing: image, cleanup: () => undo.run() };
  } catch (err) {
    await undo.run().catch(() => {});
    throw err;
  }
}

/** A zfs-fuse pool on a sparse file vdev, plus a data dir (on /tmp) for the mount points. */
export async function zfsPool(sizeMb: number): Promise<Scratch> {
  const undo = new Undo();
  const base = await mkdtemp(join(tmpdir(), 'svc-zfs-'));
  undo.push(() => rm(base, { recursive: true, force: true }));
  try {
    const image = join(base, 'vdev');
    await writeFile(image, '');
    await truncate(image, sizeMb * 1024 * 1024);
    const pool = `svct${process.pid}${nameSuffix(4)}`;
    await run('zpool', ['create', '-m', 'none', pool, image]);
    undo.push(() => destroyPool(pool));
    const dir = join(base, 'data');
    await mkdir(dir);
    return { dir, pool, backing: image, cleanup: () => undo.run() };
  } catch (err) {
    await undo.run().catch(() => {});
    throw err;
  }
}

async function destroyPool(pool: string): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await run('zpool', ['destroy', '-f', pool]);
      return;
    } catch (err) {
      if (i >= 20) throw err;
      await sleep(250);
    }
  }
}

/**
 * Bytes the host has given the scratch file system's data: the allocated blocks of its backing
 * file (a loop image, a pool's vdev), else of every file under `dir` on the same file system (as
 * `du -x`: an environment's disk image counts, what is mounted from it is inside it). Never the
 * host file system's free space: other test files write beside this one (a release build, an
 * image import), and a CI run once saw it shrink by 255 MB during a limit test.
 */
export async function scratchUsed(s: Scratch): Promise<number> {
  if (s.backing) return (await stat(s.backing)).blocks * 512;
  const root = await lstat(s.dir);
  let total = 0;
  const walk = async (dir: string): Promise<void> => {
    for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      const st = await lstat(join(dir, e.name)).catch(() => null);
      if (!st || st.dev !== root.dev) continue;
      total += st.blocks * 512;
      if (st.isDirectory()) await walk(join(dir, e.name));
    }
  };
  await walk(s.dir);
  return total;
}

/** A plain directory on /tmp (whatever file system that is), for the `dir` backend. */
export async function tmpDataDir(): Promise<Scratch> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-dir-'));
  return {
    dir,
    cleanup: async () => {
      await unmountUnder(dir); // environments' disk images (images.ts)
      await rm(dir, { recursive: true, force: true });
    },
  };
}
