// Entry point of the storage layer: picks the backend for this host (spec: capabilities
// `storage`). ZFS only when the configured pool exists; btrfs when the data dir is on btrfs and we
// run as root (deleting subvolumes needs it); otherwise directories, which still get reflink
// copy-on-write copies from `cp --reflink=auto` on XFS (reflink=1) or btrfs. Where the data dir
// cannot clone, `xfsLoop` puts the datasets on an XFS image instead (xfs-loop.ts, issue 15).
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { btrfsBackend } from './btrfs.ts';
import { dirBackend } from './dir.ts';
import { BadName } from './errors.ts';
import { fsType } from './exec.ts';
import { Layout } from './layout.ts';
import type { StorageBackend, StorageKind, StorageOptions } from './types.ts';
import { canClone, growing, hasXfsImage, openXfsLoop, xfsLoopUnavailable } from './xfs-loop.ts';
import { ZfsBackend } from './zfs.ts';
import { poolExists } from './zfs-cli.ts';

export { BadName, CommandFailed, StorageError, UnknownSnapshot } from './errors.ts';
export type { CowKind, StorageBackend, StorageKind, StorageOptions } from './types.ts';

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
  if (kind === 'zfs') return Object.assign(new ZfsBackend(layout, opts.zfsPool!), { cow: 'zfs' as const });
  if (kind === 'btrfs') return Object.assign(btrfsBackend(layout), { cow: 'btrfs' as const });
  const dir = dirBackend(layout);
  // Datasets already on an image are always mounted again, whatever the option says now.
  const imaged = await hasXfsImage(opts.dataDir);
  if (!imaged && (await canClone(join(opts.dataDir, 'envs'))))
    return Object.assign(dir, { cow: 'reflink' as const });
  if (opts.xfsLoop || imaged) {
    const why = await xfsLoopUnavailable();
    if (!why) {
      try {
        const loopOpts = typeof opts.xfsLoop === 'object' ? opts.xfsLoop : {};
        return growing(dir, await openXfsLoop(opts.dataDir, loopOpts));
      } catch (err) {
        opts.log?.(`XFS image for copy-on-write not used: ${(err as Error).message}`);
      }
    } else opts.log?.(`XFS image for copy-on-write not used: ${why}`);
  }
  return Object.assign(dir, { cow: 'none' as const });
}
