// Quiet volumes: a snapshot of volumes that are empty and untouched needs no freeze.
//
// A snapshot freezes the stack so that its non-atomic copy of each volume (cp, a reflink of a disk
// image) sees one instant of the data, and checkpoints the databases first so that instant is a
// clean one. Both exist because a process may write while the copy runs. A sandbox that was just
// created (the deploy's own snapshot, taken a moment after the container started) usually holds
// only empty volumes: the image had nothing at the volume's path and no command has run yet. For
// such a volume the content is known without the freeze, and it can be proven unchanged across the
// copy instead of being held still for it:
//
// - `readdir` of the volume's root returns no entry: at that instant the volume is exactly an
//   empty directory with the root's metadata (listing and creating an entry exclude each other
//   under the directory's lock). Nothing is in it to checkpoint either: a database in this stack
//   has no file in this volume.
// - Every change a process can make to it afterwards (create, remove or rename an entry in it,
//   chmod/chown, an xattr or ACL, a utimes) sets the root's ctime to the kernel's clock at that
//   moment. The root is stat-ed before the listing and again once the copy is made and before it
//   is published (the storage layer's `captured` call); an equal ctime (and inode, mode, owner)
//   means no change happened in between, so the copy is the empty directory of that instant.
// - The kernel stamps ctime from a coarse clock that lags the real time by at most one tick
//   (≤ 10 ms). A change made within the tick of the root's last change could carry the same ctime,
//   so the root must have last changed well before the first stat (QUIET_AGE_MS): it last changed
//   when the container was created or a volume prepared, hundreds of milliseconds earlier; anything
//   recent takes the frozen path.
//
// When the second stat differs the copy is discarded before it is published (the storage layer
// removes what it made when `captured` throws) and the snapshot is taken again the frozen way, so
// a fork or a rollback of the version still gets exactly the files of one instant. Not taken
// under gVisor (the sandbox's own file cache may hold writes the host's directory does not show
// yet), nor on ZFS (its snapshot does not call `captured`, so the check could only come after
// publication), nor for volumes that are not empty (proving a tree unchanged costs a walk).

import type { BigIntStats } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';

/** How long ago a quiet root must have last changed: many times the kernel's clock tick. */
export const QUIET_AGE_MS = 50;

export interface Stamp {
  path: string;
  st: BigIntStats;
}

/** Whether a stack's volumes may be captured the quiet way at all (see the reasons above). */
export function quietEligible(storageKind: string, spec: { volumes: string[]; runtime?: string }): boolean {
  return spec.volumes.length > 0 && spec.runtime !== 'gvisor' && storageKind !== 'zfs';
}

/** The volumes changed while they were captured: the copy is not published. */
export class VolumesChanged extends Error {}

/**
 * Stamps of `paths` when every one is an empty directory that last changed over QUIET_AGE_MS
 * ago; null otherwise (or when one cannot be read): the snapshot freezes then.
 */
export async function quietVolumes(paths: string[], now = Date.now): Promise<Stamp[] | null> {
  if (!paths.length) return null;
  const out: Stamp[] = [];
  for (const path of paths) {
    try {
      const st = await stat(path, { bigint: true });
      if (!st.isDirectory()) return null;
      if ((await readdir(path)).length) return null;
      if (st.ctimeNs > BigInt(now() - QUIET_AGE_MS) * 1_000_000n) return null;
      out.push({ path, st });
    } catch {
      return null;
    }
  }
  return out;
}

/** Throws VolumesChanged when a stamped root changed since it was stamped (or cannot be read). */
export async function assertQuiet(stamps: Stamp[]): Promise<void> {
  for (const { path, st } of stamps) {
    const again = await stat(path, { bigint: true }).catch(() => null);
    const same =
      again &&
      again.ino === st.ino &&
      again.dev === st.dev &&
      again.ctimeNs === st.ctimeNs &&
      again.mode === st.mode &&
      again.uid === st.uid &&
      again.gid === st.gid;
    if (!same) throw new VolumesChanged(`volume ${path} changed while it was captured`);
  }
}
