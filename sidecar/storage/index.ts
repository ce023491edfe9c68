// Entry point of the storage layer: picks the backend for this host (spec: capabilities
// `storage`). ZFS only when the configured pool exists; btrfs when the data dir is on btrfs and we
// run as root (deleting subvolumes needs it); otherwise directories, which still get reflink
// copy-on-write copies from `cp --reflink=auto` on XFS (reflink=1) or btrfs.
import { mkdir } from 'node:fs/promises';
import { btrfsBackend } from './btrfs.ts';
import { dirBackend } from './dir.ts';
import { BadName } from './errors.ts';
import { fsType } from './exec.ts';
import { Layout } from './layout.ts';
import type { StorageBackend, StorageKind, StorageOptions } from './types.ts';
import { ZfsBackend } from './zfs.ts';
import { poolExists } from './zfs-cli.ts';

export { BadName, CommandFailed, StorageError, UnknownSnapshot } from './errors.ts';
export type { StorageBackend, StorageKind, StorageOptions } from './types.ts';

const POOL = /^[A-Za-z][A-Za-z0-9_.:-]*$/;

function checkPool(pool: string): string {
  if (!POOL.test(pool) || pool.length > 64) throw new BadName(`zfs pool '${pool}' is not a valid pool name`);
  return pool;
}

/** The backend `openStorage` would pick; creates the data dir when missing. */
export async function detectStorageKind(opts: StorageOptions): Promise<StorageKind> {
  if (opts.zfsPool && (await poolExists(checkPool(opts.zfsPool)))) return 'zfs';
  await mkdir(opts.dataDir, { recursive: true });
  if (process.getuid?.() === 0 && (await fsType(opts.dataDir)) === 'btrfs') return 'btrfs';
  return 'dir';
}

export async function openStorage(opts: StorageOptions): Promise<StorageBackend> {
  const kind = await detectStorageKind(opts);
  const layout = new Layout(opts.dataDir);
  if (kind === 'zfs') return new ZfsBackend(layout, opts.zfsPool!);
  if (kind === 'btrfs') return btrfsBackend(layout);
  return dirBackend(layout);
}
