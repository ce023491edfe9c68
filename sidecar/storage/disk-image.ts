// One environment's disk: an XFS file system in a sparse image file, loop-mounted
// `nosuid,nodev,nouuid` at `envs/<env>/vol`. The file system's size is the environment's disk
// limit, enforced by the kernel as ENOSPC whatever the host's file system can do. The
// image file is the unit of copy-on-write: on a data dir that clones (svcd's XFS store, XFS with
// reflink=1, btrfs) a snapshot, a fork and a rollback are one FICLONE of the image, whose cost
// depends on its extent count, not on the data.
//
// XFS refuses file systems under 300 MB, so a smaller limit is a 320 MiB file system holding a
// preallocated ballast file (`.svc-ballast`, outside every volume, never reachable from a
// container) that takes all space beyond the limit. The applied limit is kept in the file system
// itself (`.svc-limit`), so snapshots and forks carry it. A larger limit shrinks the ballast and
// grows the file system online when needed (truncate, `losetup -c`, `xfs_growfs`: CAP_SYS_ADMIN,
// unlike ext4's online resize, which needs CAP_SYS_RESOURCE).
import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { copyFile, readFile, rm, stat, statfs, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { guard } from '../../shared/faults.ts';
import { CommandFailed, StorageError } from './errors.ts';
import { fsyncDir, run } from './exec.ts';
import { mountAt } from './mounts.ts';

const MiB = 1024 * 1024;
/** mkfs.xfs refuses file systems smaller than 300 MB. */
export const MIN_IMAGE_BYTES = 320 * MiB;
const LIMIT = '.svc-limit';
const BALLAST = '.svc-ballast';

/** The programs an image needs; the first one missing, or null. */
export async function missingTool(): Promise<string | null> {
  for (const [cmd, args] of [
    ['mkfs.xfs', ['-V']],
    ['xfs_growfs', ['-V']],
    ['losetup', ['--version']],
    ['fsfreeze', ['--version']],
    ['xfs_io', ['-V']],
    ['fallocate', ['--version']],
  ] as const) {
    const ok = await run(cmd, [...args], 10_000).then(
      () => true,
      () => false,
    );
    if (!ok) return cmd;
  }
  return null;
}

/** A new image file at `path` (which must not exist) for a limit of `bytes`. */
export async function makeImage(path: string, bytes: number): Promise<void> {
  await writeFile(path, '', { mode: 0o600, flag: 'wx' });
  await truncate(path, Math.max(roundUp(bytes), MIN_IMAGE_BYTES));
  await run('mkfs.xfs', ['-q', '-m', 'reflink=1', path]);
}

const roundUp = (bytes: number) => Math.ceil(bytes / MiB) * MiB;

/** Mounts `image` at `dir`: a loop device that goes away with the mount (autoclear). */
export async function mountImage(image: string, dir: string): Promise<void> {
  // nouuid: every clone of an image carries its file system's UUID, and XFS refuses duplicates.
  await run('mount', ['-t', 'xfs', '-o', 'loop,nosuid,nodev,nouuid', image, dir]);
}

/** The limit the file system at `dir` enforces (0 for a file system never fitted). */
async function appliedLimit(dir: string): Promise<number> {
  const n = Number(await readFile(join(dir, LIMIT), 'utf8').catch(() => '0'));
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

async function ballastBytes(dir: string): Promise<number> {
  return (await stat(join(dir, BALLAST)).catch(() => null))?.size ?? 0;
}

async function setBallast(dir: string, bytes: number): Promise<void> {
  const path = join(dir, BALLAST);
  if (bytes <= 0) await rm(path, { force: true });
  else if (bytes < (await ballastBytes(dir))) await truncate(path, bytes);
  else await run('fallocate', ['-l', String(bytes), path]);
}

/**
 * Makes the mounted file system at `dir` (image `image`) hold `bytes` of data: on a fresh file
 * system, a ballast takes what lies beyond; on a fitted one, a larger limit frees ballast first and
 * grows the image for the rest. A smaller limit never shrinks a disk (data may already use it).
 * Returns the limit now enforced.
 */
export async function fitLimit(image: string, dir: string, bytes: number): Promise<number> {
  const had = await appliedLimit(dir);
  if (had >= bytes) return had;
  if (!had) {
    const s = await statfs(dir);
    await setBallast(dir, s.bavail * s.bsize - bytes);
  } else {
    const ballast = await ballastBytes(dir);
    const need = bytes - had;
    await setBallast(dir, ballast - need);
    if (need > ballast) await grow(image, dir, need - ballast);
  }
  await writeFile(join(dir, LIMIT), String(bytes), { mode: 0o600 });
  await syncFile(join(dir, LIMIT));
  return bytes;
}

/** Grows the image by `extra` bytes and the mounted file system with it, online. */
async function grow(image: string, dir: string, extra: number): Promise<void> {
  const m = await mountAt(dir);
  if (!m?.source.startsWith('/dev/loop')) throw new StorageError(`${dir} is not a mounted disk image`);
  await truncate(image, (await stat(image)).size + roundUp(extra));
  await run('losetup', ['-c', m.source]);
  await run('xfs_growfs', ['-d', dir]);
}

/**
 * A copy of image `src` at `dst` (which must not exist): a reflink clone where the file system
 * can (constant time), else a sparse copy that writes only the blocks in use. Not yet durable.
 */
export async function copyImage(src: string, dst: string): Promise<void> {
  try {
    await copyFile(src, dst, constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE_FORCE);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EOPNOTSUPP' && code !== 'ENOTSUP' && code !== 'EXDEV' && code !== 'ENOSYS') throw err;
    await rm(dst, { force: true });
    await run('cp', ['--reflink=auto', '--sparse=always', '--', src, dst]);
  }
}

/** fsync of a file (opened read-only, like a directory). */
export const syncFile = fsyncDir;

/** Thaws a file system a crashed svcd may have left frozen; nothing when it is not. */
export async function thaw(dir: string): Promise<void> {
  await run('fsfreeze', ['-u', dir], 60_000).catch(() => {});
}

/** A capture started before the stack is paused, fired once it is (see armCapture). */
export interface ArmedCapture {
  /** Captures the image at `dst` (which must not exist); rejects when any step failed. */
  fire(dst: string): Promise<void>;
  /** Lets it go without touching anything. */
  cancel(): void;
}

// Without reflinks: reads the destination, then freeze, copy, thaw in one small shell.
const COPY_CAPTURE = [
  'IFS= read -r dst || exit 3',
  'fsfreeze -f "$1" || exit 1',
  'cp --reflink=auto --sparse=always -- "$2" "$dst"',
  'r=$?',
  'fsfreeze -u "$1" || r=1',
  'exit $r',
].join('\n');

/** Paths xfs_io's command parser takes as one word. */
const PLAIN = /^[A-Za-z0-9_.,+=@%/-]+$/;

/**
 * A process waiting to capture image `src` of the file system mounted at `dir`, started before
 * the caller pauses the stack, to keep frozen_for short. Where the image's file system clones,
 * xfs_io runs syncfs(2) and FICLONE itself when its commands arrive on stdin: with the stack
 * paused nothing writes, so once syncfs has returned every write made before the pause is in the
 * image (data, and metadata in its log: a clone replays the log when mounted, like after a power
 * cut), and FICLONE copies the image atomically. No process starts inside the freeze, and no
 * FIFREEZE: on a loop device over a loop device its log quiescing costs several nested flushes
 * (measured 36-116 ms against 3-32 ms for syncfs). Where the store cannot clone, a shell freezes
 * the file system (a plain copy is not atomic), copies sparsely with cp and thaws, even after a
 * failed copy and even if svcd dies meanwhile. Let go after 5 minutes if never fired.
 */
export function armCapture(dir: string, src: string, reflink = true): ArmedCapture {
  const xfsIo = reflink && PLAIN.test(dir) && PLAIN.test(src);
  const argv = xfsIo ? ['xfs_io', '-x', '-r', dir] : ['sh', '-c', COPY_CAPTURE, 'svc-capture', dir, src];
  const child = spawn(argv[0], argv.slice(1), { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  child.stdin.on('error', () => {}); // a process that died early: its exit code tells
  const exited = new Promise<number>((resolve) => {
    child.on('error', (err) => {
      stderr += err.message;
      resolve(-1);
    });
    child.on('close', (code) => resolve(code ?? -1));
  });
  const timer = setTimeout(
    guard('disk image: end input', () => child.stdin.end()),
    300_000,
  );
  timer.unref();
  return {
    async fire(dst) {
      clearTimeout(timer);
      if (xfsIo ? !PLAIN.test(dst) : dst.includes('\n'))
        throw new StorageError(`capture target ${JSON.stringify(dst)} is not a plain path`);
      // A failed `open` leaves the mounted directory current: the reflink then fails (EXDEV).
      child.stdin.end(xfsIo ? `syncfs\nopen -f ${dst}\nreflink ${src}\n` : `${dst}\n`);
      const code = await exited;
      if (code !== 0) throw new CommandFailed([...argv.slice(0, 4), '<', dst], stderr, `exit code ${code}`);
    },
    cancel() {
      clearTimeout(timer);
      child.stdin.end();
    },
  };
}
