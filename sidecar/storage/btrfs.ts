// `btrfs` storage: one subvolume per volume. Snapshots are read-only subvolume snapshots under
// `snaps/<env>/<name>/<volume>`, clones and rollbacks writable snapshots of those: each is a
// metadata operation whose cost does not depend on the amount of data. Creating a snapshot commits
// a btrfs transaction, so a published snapshot is durable without a separate sync.
import { lstat, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { copyTree } from './dir.ts';
import { run, syncFs } from './exec.ts';
import type { Layout } from './layout.ts';
import { limitNewSubvolume } from './quota.ts';
import { TreeBackend, type TreeOps } from './tree.ts';

/** BTRFS_FIRST_FREE_OBJECTID: the inode number of every subvolume's root directory. */
const SUBVOLUME_ROOT_INO = 256;

export async function isSubvolume(path: string): Promise<boolean> {
  try {
    const st = await lstat(path);
    return st.isDirectory() && st.ino === SUBVOLUME_ROOT_INO;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/** Subvolumes below `root` (not `root` itself), parents before children. */
async function nestedSubvolumes(root: string): Promise<string[]> {
  const found: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const path = join(dir, entry.name);
      if (await isSubvolume(path)) found.push(path);
      await walk(path);
    }
  };
  await walk(root);
  return found;
}

export const btrfsOps: TreeOps = {
  kind: 'btrfs',
  async create(path) {
    await run('btrfs', ['subvolume', 'create', path]);
    await limitNewSubvolume(path);
  },
  async copy(src, dst, readOnly) {
    if (await isSubvolume(src)) {
      await run('btrfs', ['subvolume', 'snapshot', ...(readOnly ? ['-r'] : []), src, dst]);
      if (!readOnly) await limitNewSubvolume(dst);
      return;
    }
    // A plain directory (written before this data dir was btrfs-managed): a reflink copy into a
    // new subvolume, so from then on everything is a snapshot.
    await run('btrfs', ['subvolume', 'create', dst]);
    if (!readOnly) await limitNewSubvolume(dst);
    await copyTree(src, dst);
    await syncFs(dst);
    if (readOnly) await run('btrfs', ['property', 'set', '-ts', dst, 'ro', 'true']);
  },
  async remove(path) {
    // Read-only snapshots refuse unlink; deleting the subvolume is also O(1) for the caller.
    if (!(await isSubvolume(path))) await rm(path, { recursive: true, force: true });
    else
      await run('btrfs', ['subvolume', 'delete', path]).catch(async (err: Error) => {
        // A container may have created subvolumes inside its volume (the ioctl needs no privilege).
        if (!/not empty/i.test(err.message)) throw err;
        for (const nested of (await nestedSubvolumes(path)).reverse()) await btrfsOps.remove(nested);
        await run('btrfs', ['subvolume', 'delete', path]);
      });
  },
  flush: async () => {},
  isNative: isSubvolume,
};

export function btrfsBackend(layout: Layout): TreeBackend {
  return new TreeBackend(layout, btrfsOps);
}
