// Entry point of the storage layer: picks the backend for this host (spec: capabilities
// `storage`). ZFS only when the configured pool exists; btrfs when the data dir is on btrfs and we
// run as root (deleting subvolumes needs it); otherwise directories, which still get reflink
// copy-on-write copies from `cp --reflink=auto` on XFS (reflink=1) or btrfs. Where the data dir
// cannot clone, `xfsLoop` puts the datasets on an XFS image instead (xfs-loop.ts).
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { btrfsBackend } from './btrfs.ts';
import { dirBackend } from './dir.ts';
import { missingTool } from './disk-image.ts';
import { BadName } from './errors.ts';
import { fsType } from './exec.ts';
import { ImageBackend } from './images.ts';
import { Layout } from './layout.ts';
import { LoopDisks, treeQuota } from './quota.ts';
import type { TreeBackend } from './tree.ts';
import type { CowKind, StorageBackend, StorageKind, StorageOptions } from './types.ts';
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

/**
 * Where an env's disk limit needs a file system of its own (no XFS project quotas here), each env
 * gets a disk image that snapshots and forks as a whole (images.ts); else the directory trees.
 */
async function dirStorage(layout: Layout, trees: TreeBackend, cow: CowKind, log?: (line: string) => void) {
  if (!((await treeQuota(layout, 'dir')) instanceof LoopDisks)) return Object.assign(trees, { cow });
  const missing = await missingTool();
  if (missing) {
    log?.(`per-environment disk images not used (${missing} is missing): ext4 disks, copied on snapshot`);
    return Object.assign(trees, { cow });
  }
  const images = Object.assign(new ImageBackend(layout, trees), { cow });
  await images.restoreAll(log);
  return images;
}

export async function openStorage(opts: StorageOptions): Promise<StorageBackend> {
  const kind = await detectStorageKind(opts);
  const layout = new Layout(opts.dataDir);
  if (kind === 'zfs') return Object.assign(new ZfsBackend(layout, opts.zfsPool!), { cow: 'zfs' as const });
  if (kind === 'btrfs') return Object.assign(btrfsBackend(layout), { cow: 'btrfs' as const });
  const trees = dirBackend(layout);
  // Datasets already on an image are always mounted again, whatever the option says now.
  const imaged = await hasXfsImage(opts.dataDir);
  if (!imaged && (await canClone(join(opts.dataDir, 'envs'))))
    return dirStorage(layout, trees, 'reflink', opts.log);
  if (opts.xfsLoop || imaged) {
    const why = await xfsLoopUnavailable();
    if (!why) {
      try {
        const loopOpts = typeof opts.xfsLoop === 'object' ? opts.xfsLoop : {};
        const loop = await openXfsLoop(opts.dataDir, loopOpts);
        return growing(await dirStorage(layout, trees, 'xfs-loop', opts.log), loop);
      } catch (err) {
        opts.log?.(`XFS image for copy-on-write not used: ${(err as Error).message}`);
      }
    } else opts.log?.(`XFS image for copy-on-write not used: ${why}`);
  }
  return dirStorage(layout, trees, 'none', opts.log);
}
