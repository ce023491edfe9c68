// Disk limits for the directory-tree backends (without them one environment could fill its host).
// An environment's volumes all live in `envs/<env>/vol/`, so one bound on that directory bounds
// them together. How depends on the data dir's file system, decided once:
//
// - XFS mounted with project quotas (`prjquota`, e.g. svcd's own XFS store): `vol/` becomes an
//   XFS project (id derived from the env id) with a hard block and inode limit. Copies into it
//   inherit the project, so reflink clones and renames keep working inside `vol/`.
// - Anywhere else, as root: `vol/` is a file system of its own. New environments get an XFS disk
//   image the storage layer snapshots and forks as a whole (images.ts); environments
//   made before that keep ext4 in a sparse `disks/<env>.img` of the limit's size (LoopDisks below),
//   loop-mounted `nosuid,nodev`. Writes past either get ENOSPC.
// - btrfs: a qgroup per env that all its subvolumes join, with the limit (btrfs-quota.ts).
// - Otherwise (no root): nothing can enforce a limit; the reason is reported, never hidden.
//
// Either way `vol/` is a mount point with `nosuid,nodev` where svcd may mount (containers' bind
// mounts inherit those flags, so a setuid file or device node in a volume does nothing).
import { createHash } from 'node:crypto';
import { mkdir, readdir, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { limitEnv } from './btrfs-quota.ts';
import { exists, run } from './exec.ts';
import type { Layout } from './layout.ts';
import { isMountPoint, mountOf, umountAll } from './mounts.ts';

export { isMountPoint, mountOf, unmountUnder } from './mounts.ts';

export interface TreeQuota {
  /** Bounds `envs/<env>/vol` to `bytes`; called before any volume is made there. Returns how it is enforced. */
  apply(envId: string, bytes: number): Promise<string>;
  /** Undoes `apply` (before the env's directories are removed). Idempotent. */
  release(envId: string): Promise<void>;
  /** Mounts again what `apply` mounted, when a reboot took it away (before any use of `vol/`). */
  restore(envId: string): Promise<void>;
}

/** A stable XFS project id for an env: 31 bits of its hash, above the ids people pick by hand. */
export function projectId(envId: string): number {
  return (
    (Number.parseInt(createHash('sha256').update(envId).digest('hex').slice(0, 8), 16) % 0x7fff0000) + 0x10000
  );
}

const isRoot = () => process.getuid?.() === 0;

/** `vol/` bound onto itself `nosuid,nodev` (where no file system of its own is mounted there). */
async function secureBind(dir: string): Promise<void> {
  if (!isRoot() || (await isMountPoint(dir))) return;
  await run('mount', ['--bind', dir, dir]);
  await run('mount', ['-o', 'remount,bind,nosuid,nodev', dir]);
}

/** `envs/<env>/disk_limit`: the limit `apply` set, in bytes; only such envs get their mounts back. */
const limitFile = (layout: Layout, envId: string) => join(layout.envDir(envId), 'disk_limit');

async function applied(layout: Layout, envId: string, bytes: number): Promise<void> {
  await writeFile(limitFile(layout, envId), String(bytes));
}

/** The nosuid,nodev bind again after a reboot, for an env `apply` was run for. */
async function rebind(layout: Layout, envId: string): Promise<void> {
  if (await exists(limitFile(layout, envId))) await secureBind(layout.volDir(envId));
}

class XfsProjects implements TreeQuota {
  readonly layout: Layout;
  readonly mountPoint: string;
  constructor(layout: Layout, mountPoint: string) {
    this.layout = layout;
    this.mountPoint = mountPoint;
  }
  private xq(command: string) {
    return run('xfs_quota', ['-x', '-c', command, this.mountPoint]);
  }
  async apply(envId: string, bytes: number): Promise<string> {
    const dir = this.layout.volDir(envId);
    await mkdir(dir, { recursive: true });
    const id = projectId(envId);
    await this.xq(`project -s -p ${dir} ${id}`);
    const inodes = Math.max(100_000, Math.floor(bytes / 4096));
    await this.xq(`limit -p bhard=${Math.ceil(bytes / 1024)}k ihard=${inodes} ${id}`);
    await secureBind(dir);
    await applied(this.layout, envId, bytes);
    return `xfs project quota ${id}`;
  }
  restore(envId: string): Promise<void> {
    return rebind(this.layout, envId);
  }
  async release(envId: string): Promise<void> {
    await umountAll(this.layout.volDir(envId));
    await this.xq(`limit -p bhard=0 ihard=0 ${projectId(envId)}`).catch(() => {});
  }
}

/** ext4 in a sparse image file per env, loop-mounted at `vol/` (environments made before images.ts). */
export class LoopDisks implements TreeQuota {
  readonly layout: Layout;
  constructor(layout: Layout) {
    this.layout = layout;
  }
  image(envId: string): string {
    return this.layout.legacyDisk(envId);
  }
  async apply(envId: string, bytes: number): Promise<string> {
    const dir = this.layout.volDir(envId);
    const image = this.image(envId);
    const size = Math.max(bytes, 16 * 1024 * 1024); // ext4's own metadata needs a few MiB
    await mkdir(dir, { recursive: true });
    await mkdir(join(this.layout.dataDir, 'disks'), { recursive: true, mode: 0o700 });
    const predate = "none: this environment's volumes predate disk limits; recreate it to get one";
    if (await isMountPoint(dir)) {
      if (!(await exists(image))) return predate; // only the nosuid,nodev bind of such an env
      // A redeploy with a larger limit grows the file system in place (never shrinks it). Online
      // growth needs CAP_SYS_RESOURCE; without it the old size stays, and the answer says so.
      const had = (await stat(image)).size;
      if (had >= size) return `loop-mounted ext4 of ${had} bytes`;
      try {
        const dev = (await run('findmnt', ['-n', '-o', 'SOURCE', '--target', dir])).trim().split('\n')[0];
        await truncate(image, size);
        await run('losetup', ['-c', dev]);
        await run('resize2fs', [dev]);
        return `loop-mounted ext4 of ${size} bytes`;
      } catch (err) {
        const why = (err as Error).message.split('\n').filter(Boolean).at(-1);
        return `loop-mounted ext4 of ${had} bytes (the larger limit applies when the environment is recreated: ${why})`;
      }
    }
    if (!(await exists(image))) {
      // Volumes made before the env had a limit (an older svcd) are never moved under a running
      // stack: the env stays unbounded until it is recreated, and says so.
      if ((await readdir(dir)).length) {
        await secureBind(dir);
        return predate;
      }
      await writeFile(image, '', { mode: 0o600 });
      await truncate(image, size);
      await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-E', 'lazy_itable_init=1,lazy_journal_init=1', image]);
    }
    await run('mount', ['-o', 'loop,nosuid,nodev', image, dir]);
    // mkfs leaves lost+found: the volume list is ours alone.
    await rm(join(dir, 'lost+found'), { recursive: true, force: true });
    return `loop-mounted ext4 of ${size} bytes`;
  }
  async restore(envId: string): Promise<void> {
    const dir = this.layout.volDir(envId);
    if (!(await exists(this.image(envId))) || (await isMountPoint(dir))) return;
    await mkdir(dir, { recursive: true });
    await run('mount', ['-o', 'loop,nosuid,nodev', this.image(envId), dir]);
  }
  async release(envId: string): Promise<void> {
    await umountAll(this.layout.volDir(envId));
    await rm(this.image(envId), { force: true });
  }
}

/**
 * btrfs: one qgroup per env holding all its subvolumes, the limit on it (btrfs-quota.ts). A
 * redeploy sets the new limit on the group at once.
 */
class BtrfsQgroups implements TreeQuota {
  readonly layout: Layout;
  constructor(layout: Layout) {
    this.layout = layout;
  }
  async apply(envId: string, bytes: number): Promise<string> {
    const volDir = this.layout.volDir(envId);
    await mkdir(volDir, { recursive: true });
    const how = await limitEnv(this.layout, envId, bytes);
    await applied(this.layout, envId, bytes);
    await secureBind(volDir);
    return how;
  }
  restore(envId: string): Promise<void> {
    return rebind(this.layout, envId);
  }
  async release(envId: string): Promise<void> {
    await umountAll(this.layout.volDir(envId));
  }
}

class NoQuota implements TreeQuota {
  readonly why: string;
  readonly layout: Layout;
  constructor(layout: Layout, why: string) {
    this.layout = layout;
    this.why = why;
  }
  async apply(envId: string, bytes: number): Promise<string> {
    await mkdir(this.layout.volDir(envId), { recursive: true });
    await secureBind(this.layout.volDir(envId));
    await applied(this.layout, envId, bytes);
    return `none: ${this.why}`;
  }
  restore(envId: string): Promise<void> {
    return rebind(this.layout, envId);
  }
  async release(envId: string): Promise<void> {
    await umountAll(this.layout.volDir(envId));
  }
}

const hasTool = (tool: string) =>
  run(tool, ['-V']).then(
    () => true,
    () => false,
  );

/** How the directory backends bound an env on this data dir. */
export async function treeQuota(layout: Layout, kind: 'dir' | 'btrfs'): Promise<TreeQuota> {
  // Where volumes live decides (a store may mount its own file system, or link one, at envs/).
  const envs = join(layout.dataDir, 'envs');
  await mkdir(envs, { recursive: true });
  const m = await mountOf(envs);
  if (kind === 'dir' && m?.fstype === 'xfs' && m.superOpts.some((o) => o === 'prjquota' || o === 'pquota')) {
    if (isRoot() && !/\s/.test(layout.dataDir)) return new XfsProjects(layout, m.point);
  }
  if (!isRoot()) return new NoQuota(layout, 'svcd does not run as root (no quotas, no loop devices)');
  if (kind === 'btrfs') return new BtrfsQgroups(layout);
  if (!(await hasTool('mkfs.ext4')) || !(await hasTool('losetup')))
    return new NoQuota(layout, 'mkfs.ext4 or losetup is missing (apt-get install e2fsprogs mount)');
  return new LoopDisks(layout);
}
