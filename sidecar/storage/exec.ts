// Process and file-system primitives shared by the backends. Helper programs run through
// execFile (no shell, so names can never be interpreted) and fail with their stderr.
import { execFile } from 'node:child_process';
import { lstat, open } from 'node:fs/promises';
import { type Backoff, retryFailures } from '../../shared/concurrency.ts';
import { CommandFailed } from './errors.ts';

/** Runs `cmd args…` and returns its stdout; throws CommandFailed carrying stderr. */
export function run(cmd: string, args: string[], timeoutMs = 15 * 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      {
        encoding: 'utf8',
        maxBuffer: 256 * 1024 * 1024,
        timeout: timeoutMs,
        env: { ...process.env, LC_ALL: 'C' },
      },
      (err, stdout, stderr) => {
        if (err) reject(new CommandFailed([cmd, ...args], stderr, err.message));
        else resolve(stdout);
      },
    );
  });
}

/** The waits between tries at a busy dataset: from 100 ms, doubling up to 1 s. */
export const BUSY_BACKOFF: Backoff = { baseMs: 100, capMs: 1000, jitter: 0.25 };

/** Retries `fn` while `when(err)` says the failure is transient (zfs-fuse's "dataset is busy"). */
export function retry<T>(fn: () => Promise<T>, when: (err: Error) => boolean, attempts = 20): Promise<T> {
  return retryFailures(fn, { attempts, when, backoff: BUSY_BACKOFF });
}

export async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/** Makes a rename or creation inside `dir` durable (the directory entry itself). */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Flushes the whole file system holding `path` (syncfs). Used before a copy is published under
 * its real name, so a power loss can never leave a snapshot whose files are still in page cache.
 */
export async function syncFs(path: string): Promise<void> {
  await run('sync', ['-f', path]);
}

/** File-system type of `path` as `stat -f` names it: ext2/ext3, xfs, btrfs, zfs, fuseblk, … */
export async function fsType(path: string): Promise<string> {
  return (await run('stat', ['-f', '-c', '%T', path])).trim();
}
