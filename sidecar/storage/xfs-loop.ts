// Copy-on-write on any machine: when the data directory's file system cannot clone
// (ext4), svcd keeps its datasets on XFS with reflink=1 in a sparse image file it creates under
// the data dir, attaches to a loop device and mounts (with `prjquota`, so per-environment disk
// limits can use XFS project quotas). `envs/` and `snaps/` become symlinks into the mount, so the
// spec's layout (`<data>/envs/<env>/vol/<volume>`) and every backend path stay as they are, and
// the dir backend's `cp --reflink=auto` clones instead of copying.
//
//   <data>/.xfs/image        sparse image file (grown by doubling when free space runs low)
//   <data>/.xfs/mnt/         its mount point (left mounted when svcd stops: containers bind it)
//   <data>/envs -> .xfs/mnt/envs, <data>/snaps -> .xfs/mnt/snaps
//
// After a restart the mount is reused; after a reboot the image is attached and mounted again.

import {
  lstat,
  mkdir,
  readdir,
  readlink,
  rm,
  rmdir,
  stat,
  statfs,
  symlink,
  truncate,
  writeFile,
} from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { nameSuffix } from '../../protocol/ids.ts';
import { sleep } from '../../shared/concurrency.ts';
import { StorageError } from './errors.ts';
import { exists, run } from './exec.ts';
import { mountAt, unmountUnder } from './mounts.ts';
import type { StorageBackend } from './types.ts';

export const XFS_DIR = '.xfs';
const LINKED = ['envs', 'snaps'] as const;
/** Sparse: only what is written takes space on the host. */
export const DEFAULT_IMAGE_MB = 16 * 1024;
/** XFS refuses smaller file systems. */
const MIN_IMAGE_MB = 320;

export interface XfsLoopOptions {
  /** Size of a new image in MiB; default DEFAULT_IMAGE_MB, capped by the host's free space. */
  initialMb?: number;
  /** Grow when free space in the mount falls below this fraction of its size. Default 0.25. */
  growBelow?: number;
}

export interface XfsLoop {
  image: string;
  mountPoint: string;
  device: string;
  /** Mounted with project quotas (false when the kernel has no XFS quota support). */
  prjquota: boolean;
  /** Grows the image (doubling, within the host's free space) when free space is low; true when it grew. */
  ensureRoom(needBytes?: number): Promise<boolean>;
  /** Current size of the file system in bytes. */
  sizeBytes(): Promise<number>;
}

/** True when `dir`'s file system makes reflink copies (XFS reflink=1, btrfs, bcachefs). */
export async function canClone(dir: string): Promise<boolean> {
  await mkdir(dir, { recursive: true });
  const probe = join(dir, `.clone-probe-${nameSuffix(8)}`);
  try {
    await writeFile(probe, 'probe');
    await run('cp', ['--reflink=always', probe, `${probe}.copy`]);
    return true;
  } catch {
    return false;
  } finally {
    await rm(probe, { force: true });
    await rm(`${probe}.copy`, { force: true });
  }
}

/** True when `dataDir` keeps its datasets on an XFS image (made by an earlier start). */
export function hasXfsImage(dataDir: string): Promise<boolean> {
  return exists(join(resolve(dataDir), XFS_DIR, 'image'));
}

/** Why an XFS image cannot be used here, or null. */
export async function xfsLoopUnavailable(): Promise<string | null> {
  if (process.getuid?.() !== 0) return 'needs root (loop devices and mounts)';
  for (const [cmd, args] of [
    ['losetup', ['--version']],
    ['mkfs.xfs', ['-V']],
    ['xfs_growfs', ['-V']],
  ] as const) {
    try {
      await run(cmd, [...args], 10_000);
    } catch {
      return `${cmd} is not installed (xfsprogs, util-linux)`;
    }
  }
  return null;
}

interface Mounted {
  device: string;
  prjquota: boolean;
}

/**
 * Mounts with project quotas (per-environment disk limits); a kernel built without XFS quota
 * support (CONFIG_XFS_QUOTA unset) refuses the option, and then the image is mounted without it.
 * `loop`: mount attaches the image with autoclear, so whatever unmounts it (svcd, a test's clean-up,
 * an operator) also detaches the loop device; none is left behind holding a deleted image.
 */
async function mountXfs(image: string, mnt: string): Promise<void> {
  try {
    await run('mount', ['-t', 'xfs', '-o', 'loop,prjquota', image, mnt]);
  } catch {
    await run('mount', ['-t', 'xfs', '-o', 'loop', image, mnt]);
  }
}

/** The device mounted at `path` and whether with project quotas; null when nothing is mounted there. */
async function mountedAt(path: string): Promise<Mounted | null> {
  const m = await mountAt(path);
  return m && { device: m.source, prjquota: m.superOpts.some((o) => o === 'prjquota' || o === 'pquota') };
}

async function freeHostBytes(dir: string): Promise<number> {
  const s = await statfs(dir);
  return s.bavail * s.bsize;
}

/** Creates, attaches or reuses the image of `dataDir` and links `envs/` and `snaps/` into it. */
export async function openXfsLoop(dataDir: string, opts: XfsLoopOptions = {}): Promise<XfsLoop> {
  const data = resolve(dataDir);
  const base = join(data, XFS_DIR);
  const image = join(base, 'image');
  const mnt = join(base, 'mnt');
  await mkdir(mnt, { recursive: true, mode: 0o700 });
  let mounted = await mountedAt(mnt);
  if (!mounted) {
    if (!(await exists(image))) {
      const hostFree = Math.floor((await freeHostBytes(base)) / 1024 ** 2);
      const mb = Math.max(MIN_IMAGE_MB, Math.min(opts.initialMb ?? DEFAULT_IMAGE_MB, hostFree));
      const tmp = `${image}.new`;
      await writeFile(tmp, '');
      await truncate(tmp, mb * 1024 ** 2);
      await run('mkfs.xfs', ['-q', '-m', 'reflink=1', tmp]);
      await run('mv', ['-T', tmp, image]);
    }
    await mountXfs(image, mnt);
    mounted = await mountedAt(mnt);
    if (!mounted) throw new StorageError(`${image} was mounted at ${mnt} but the mount is not there`);
  }
  for (const name of LINKED) await linkInto(data, name, join(mnt, name));
  const growBelow = opts.growBelow ?? 0.25;
  const loop: XfsLoop = {
    image,
    mountPoint: mnt,
    device: mounted.device,
    prjquota: mounted.prjquota,
    async sizeBytes() {
      const s = await statfs(mnt);
      return s.blocks * s.bsize;
    },
    async ensureRoom(needBytes = 0) {
      const s = await statfs(mnt);
      const size = s.blocks * s.bsize;
      const free = s.bavail * s.bsize;
      if (free - needBytes >= size * growBelow) return false;
      const current = (await stat(image)).size;
      let next = current * 2;
      while (next - current < needBytes + size * growBelow) next *= 2;
      const allowed = current + (await freeHostBytes(base));
      if (next > allowed) next = allowed;
      if (next <= current) return false;
      await truncate(image, next);
      await run('losetup', ['-c', mounted.device]);
      await run('xfs_growfs', [mnt]);
      return true;
    },
  };
  return loop;
}

/** `<data>/<name>` → the directory in the mount; an empty real directory is replaced, a full one refused. */
async function linkInto(data: string, name: string, target: string): Promise<void> {
  await mkdir(target, { recursive: true });
  const path = join(data, name);
  let st: Awaited<ReturnType<typeof lstat>> | null = null;
  try {
    st = await lstat(path);
  } catch {
    // missing: link below
  }
  if (st?.isSymbolicLink()) {
    if (resolve(data, await readlink(path)) === target) return;
    throw new StorageError(`${path} is a symlink elsewhere; the XFS image's ${name}/ cannot be linked there`);
  }
  if (st?.isDirectory()) {
    if ((await readdir(path)).length)
      throw new StorageError(
        `${path} already holds datasets on a file system without reflinks; move them or use a new data dir for the XFS image`,
      );
    await rmdir(path);
  } else if (st) throw new StorageError(`${path} is not a directory`);
  await symlink(join(XFS_DIR, 'mnt', name), path);
}

/** Unmounts and detaches the image of `dataDir` (tests, decommissioning); the image file stays. */
export async function closeXfsLoop(dataDir: string): Promise<void> {
  const mnt = join(resolve(dataDir), XFS_DIR, 'mnt');
  const m = await mountedAt(mnt);
  if (!m) return;
  await unmountUnder(mnt); // the environments' disk images inside it
  for (let i = 0; ; i++) {
    try {
      await run('umount', [mnt]);
      break;
    } catch (err) {
      if (i >= 20) throw err;
      await sleep(200);
    }
  }
  await run('losetup', ['-d', m.device]).catch(() => {});
}

/** The backend with room made before every operation that writes datasets. */
export function growing(backend: StorageBackend, loop: XfsLoop): StorageBackend {
  const roomFirst =
    <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      await loop.ensureRoom();
      return fn(...args);
    };
  return {
    kind: backend.kind,
    cow: 'xfs-loop',
    volumePath: (env, vol) => backend.volumePath(env, vol),
    hasSnapshot: (env, name) => backend.hasSnapshot(env, name),
    prepareSnapshot:
      backend.prepareSnapshot && ((env, name, vols) => backend.prepareSnapshot!(env, name, vols)),
    destroy: (env) => backend.destroy(env),
    // The backend decides how an env's disk is bounded: XFS project quotas when the image
    // is mounted with prjquota, else a disk image per env, itself reflinked as a whole (images.ts).
    setQuota: (env, bytes) => backend.setQuota(env, bytes),
    prepare: roomFirst((env: string, vols: string[]) => backend.prepare(env, vols)),
    snapshot: roomFirst((env: string, name: string, vols: string[], captured?: () => Promise<void>) =>
      backend.snapshot(env, name, vols, captured),
    ),
    clone: roomFirst((from: string, snap: string, to: string, vols: string[]) =>
      backend.clone(from, snap, to, vols),
    ),
    rollback: roomFirst((env: string, snap: string, vols: string[]) => backend.rollback(env, snap, vols)),
  };
}
