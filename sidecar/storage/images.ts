// `dir` storage with one disk image per environment (on top of the disk limits):
// where no XFS project quota can bound an environment (this kernel has no CONFIG_XFS_QUOTA), its
// volumes live in a file system of its own, and that file system's image is what is snapshotted,
// forked and rolled back (disk-image.ts). On a data dir that clones, each is one reflink of the
// image file, whatever the data; the disk limit stays a kernel-enforced file system size.
//
//   envs/<env>/disk.img            the live image, mounted at envs/<env>/vol (volumes inside)
//   envs/<env>/disk_limit          the limit setQuota was given (bytes)
//   snaps/<env>/<name>/disk.img    a snapshot: a reflink of the image, taken with the stack paused
//   snaps/<env>/<name>/volumes.json  the volumes it holds
//
// Crash safety as for the trees: a snapshot is built in `snaps/<env>/.<name>.tmp` and published
// by rename; a clone or rollback writes `.disk.img.new` and renames it over `disk.img`, so the
// live image is always whole. Environments made before images (ext4 in `disks/<env>.img`, or plain
// directories) keep going through the tree backend.
import { mkdir, readFile, rename, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DEFAULT_DISK_MB } from '../../protocol/spec.ts';
import {
  type ArmedCapture,
  armCapture,
  copyImage,
  fitLimit,
  makeImage,
  mountImage,
  syncFile,
  thaw,
} from './disk-image.ts';
import { StorageError, UnknownSnapshot } from './errors.ts';
import { exists, fsyncDir, syncFs } from './exec.ts';
import type { Layout } from './layout.ts';
import { isMountPoint, umountAll } from './mounts.ts';
import { checkCloneTarget, checkName, checkVolumes } from './names.ts';
import { list, type TreeBackend } from './tree.ts';
import type { CowKind, StorageBackend } from './types.ts';

const ignore = () => {};

/** A snapshot checked and ready to capture: its final and temporary directories, the mount. */
interface Plan {
  envId: string;
  final: string;
  tmp: string;
  dir: string;
  /** False for an env without volumes (no disk image). */
  disk: boolean;
}
const MiB = 1024 * 1024;

export class ImageBackend implements StorageBackend {
  readonly kind = 'dir' as const;
  cow?: CowKind;
  readonly layout: Layout;
  /** The same data dir as directory trees: environments made before images. */
  readonly trees: TreeBackend;

  constructor(layout: Layout, trees: TreeBackend) {
    this.layout = layout;
    this.trees = trees;
  }

  volumePath(envId: string, volume: string): string {
    return this.layout.volumePath(envId, volume);
  }

  /** An env whose volumes predate images: an older ext4 disk, or plain directories. */
  private async legacy(envId: string): Promise<boolean> {
    if (await exists(this.layout.diskImage(envId))) return false;
    if (await exists(this.layout.legacyDisk(envId))) return true;
    return (await list(this.layout.volDir(envId))).length > 0;
  }

  private async limit(envId: string): Promise<number> {
    const n = Number(await readFile(join(this.layout.envDir(envId), 'disk_limit'), 'utf8').catch(() => ''));
    return Number.isSafeInteger(n) && n > 0 ? n : DEFAULT_DISK_MB * MiB;
  }

  /** Mounts the env's image again after a reboot (or an interrupted rollback); true when it has one. */
  private async mounted(envId: string): Promise<boolean> {
    const image = this.layout.diskImage(envId);
    if (!(await exists(image))) return false;
    const dir = this.layout.volDir(envId);
    if (!(await isMountPoint(dir))) {
      await mkdir(dir, { recursive: true });
      await mountImage(image, dir);
    }
    return true;
  }

  /**
   * At start: every env's image mounted again (after a reboot nothing is), before any container
   * that binds its volumes is started again; one a crash left frozen (only the copying capture
   * freezes) is thawed.
   */
  async restoreAll(log?: (line: string) => void): Promise<void> {
    for (const envId of await list(join(this.layout.dataDir, 'envs'))) {
      if (envId.startsWith('.')) continue;
      try {
        if ((await this.mounted(envId)) && !this.clones()) await thaw(this.layout.volDir(envId));
      } catch (err) {
        log?.(`disk image of ${envId} not mounted: ${(err as Error).message}`);
      }
    }
  }

  async setQuota(envId: string, bytes: number): Promise<string> {
    checkName('env id', envId);
    if (await this.legacy(envId)) return this.trees.setQuota(envId, bytes);
    await mkdir(this.layout.envDir(envId), { recursive: true });
    await writeFile(join(this.layout.envDir(envId), 'disk_limit'), String(bytes));
    if (!(await this.mounted(envId))) return `loop-mounted xfs image of ${bytes} bytes`;
    const now = await fitLimit(this.layout.diskImage(envId), this.layout.volDir(envId), bytes);
    return now === bytes
      ? `loop-mounted xfs image of ${bytes} bytes`
      : `loop-mounted xfs image of ${now} bytes (a disk never shrinks; recreate the environment for a smaller one)`;
  }

  async prepare(envId: string, volumes: string[]): Promise<Record<string, string>> {
    checkName('env id', envId);
    checkVolumes(volumes);
    if (await this.legacy(envId)) return this.trees.prepare(envId, volumes);
    const dir = this.layout.volDir(envId);
    await rm(this.layout.diskNew(envId), { force: true });
    if (await this.mounted(envId)) {
      if (!this.clones()) await thaw(dir);
    } else if (volumes.length) await this.publish(envId, makeImage);
    // No volumes (an image sandbox): no disk until a redeploy brings some.
    else await mkdir(dir, { recursive: true });
    const out: Record<string, string> = {};
    for (const v of volumes) {
      out[v] = this.layout.volumePath(envId, v);
      if (!(await exists(out[v]))) await mkdir(out[v]);
    }
    return out;
  }

  /**
   * Writes a new image for the env with `write(tmp, limit)`, makes it durable, puts it in place of the
   * live one (unmounted first) and mounts it, fitted to the env's limit.
   */
  private async publish(envId: string, write: (tmp: string, limit: number) => Promise<void>): Promise<void> {
    const tmp = this.layout.diskNew(envId);
    const dir = this.layout.volDir(envId);
    const limit = await this.limit(envId);
    await mkdir(this.layout.envDir(envId), { recursive: true });
    await rm(tmp, { force: true });
    try {
      await write(tmp, limit);
      await syncFile(tmp);
    } catch (err) {
      await rm(tmp, { force: true }).catch(ignore);
      throw err;
    }
    // Docker resolves bind mounts when a container starts: the caller has stopped the stack.
    await umountAll(dir);
    await rename(tmp, this.layout.diskImage(envId));
    await fsyncDir(this.layout.envDir(envId));
    await mkdir(dir, { recursive: true });
    await mountImage(this.layout.diskImage(envId), dir);
    await fitLimit(this.layout.diskImage(envId), dir, limit);
  }

  /** Whether the data dir makes reflink copies (openStorage sets `cow`). */
  private clones(): boolean {
    return this.cow === 'reflink' || this.cow === 'xfs-loop';
  }

  /** Snapshots planned and armed by prepareSnapshot, taken by the snapshot of that name. */
  readonly #armed = new Map<string, { name: string; plan: Plan | 'legacy'; capture?: ArmedCapture }>();

  async prepareSnapshot(envId: string, name: string, volumes: string[]): Promise<void> {
    this.#armed.get(envId)?.capture?.cancel();
    this.#armed.delete(envId);
    const plan = await this.plan(envId, name, volumes);
    if (plan === 'legacy' || !plan.disk) return void this.#armed.set(envId, { name, plan });
    // Most dirty data reaches the image now, while the stack still runs: the freeze has little left.
    await syncFs(plan.dir);
    const capture = armCapture(plan.dir, this.layout.diskImage(envId), this.clones());
    this.#armed.set(envId, { name, plan, capture });
  }

  async hasSnapshot(envId: string, name: string): Promise<boolean> {
    return (await stat(this.layout.snapDir(envId, name)).catch(() => null))?.isDirectory() ?? false;
  }

  async snapshot(
    envId: string,
    name: string,
    volumes: string[],
    captured?: () => Promise<void>,
  ): Promise<string[]> {
    const armed = this.#armed.get(envId);
    this.#armed.delete(envId);
    try {
      // Planned before the pause when prepareSnapshot ran: inside it, only the capture.
      const ready = armed?.name === name ? armed : undefined;
      const plan = ready?.plan ?? (await this.plan(envId, name, volumes));
      if (plan === 'legacy') return await this.trees.snapshot(envId, name, volumes, captured);
      return await this.capture(plan, volumes, ready?.capture, captured);
    } finally {
      armed?.capture?.cancel(); // nothing when it has fired
    }
  }

  /** Checks a snapshot can be taken and makes its temporary directory. */
  private async plan(envId: string, name: string, volumes: string[]): Promise<Plan | 'legacy'> {
    checkVolumes(volumes);
    const final = this.layout.snapDir(envId, name);
    if (await this.legacy(envId)) return 'legacy';
    if (await this.hasSnapshot(envId, name))
      throw new StorageError(`env ${envId} already has a snapshot ${name}`);
    const disk = await this.mounted(envId);
    const dir = this.layout.volDir(envId);
    for (const v of volumes) {
      if (!(await exists(this.layout.volumePath(envId, v))))
        throw new StorageError(`env ${envId} has no volume ${v} to snapshot (prepare it first)`);
    }
    const tmp = this.layout.snapTemp(envId, name);
    await rm(tmp, { recursive: true, force: true });
    await mkdir(tmp, { recursive: true });
    return { envId, final, tmp, dir, disk };
  }

  private async capture(
    { envId, final, tmp, dir, disk }: Plan,
    volumes: string[],
    armed: ArmedCapture | undefined,
    captured?: () => Promise<void>,
  ): Promise<string[]> {
    const image = join(tmp, 'disk.img');
    try {
      // The stack is paused: only syncfs and one reflink stand between it and the thaw.
      if (disk) await (armed ?? armCapture(dir, this.layout.diskImage(envId), this.clones())).fire(image);
      await captured?.();
      const held = disk ? (await list(dir)).filter((e) => !e.startsWith('.')) : [];
      await writeFile(join(tmp, 'volumes.json'), JSON.stringify(held));
      if (disk) await syncFile(image);
      await syncFile(join(tmp, 'volumes.json'));
      await rename(tmp, final);
      await fsyncDir(this.layout.snapsDir(envId));
    } catch (err) {
      await rm(tmp, { recursive: true, force: true }).catch(ignore);
      throw err;
    }
    return volumes.map((v) => `${join(final, 'disk.img')}:${v}`);
  }

  /**
   * The snapshot's image (null: the env had no disk then); UnknownSnapshot when it was never
   * captured or lacks a volume.
   */
  private async source(envId: string, snapshot: string, volumes: string[]): Promise<string | null> {
    checkVolumes(volumes);
    if (!(await this.hasSnapshot(envId, snapshot))) throw new UnknownSnapshot(envId, snapshot);
    const dir = this.layout.snapDir(envId, snapshot);
    const held = JSON.parse(await readFile(join(dir, 'volumes.json'), 'utf8')) as string[];
    for (const v of volumes)
      if (!held.includes(v)) throw new UnknownSnapshot(envId, snapshot, `it holds no volume ${v}`);
    return (await exists(join(dir, 'disk.img'))) ? join(dir, 'disk.img') : null;
  }

  async clone(
    fromEnv: string,
    snapshot: string,
    toEnv: string,
    volumes: string[],
  ): Promise<Record<string, string>> {
    checkCloneTarget(fromEnv, toEnv);
    if (await this.legacy(fromEnv)) {
      // A legacy source's snapshots are directories: its forks are legacy too.
      await this.trees.setQuota(toEnv, await this.limit(toEnv));
      return this.trees.clone(fromEnv, snapshot, toEnv, volumes);
    }
    const image = await this.source(fromEnv, snapshot, volumes);
    if ((await this.legacy(toEnv)) || (await this.mounted(toEnv))) {
      for (const v of volumes)
        if (await exists(this.layout.volumePath(toEnv, v)))
          throw new StorageError(`env ${toEnv} already has volume ${v}; destroy it before cloning into it`);
      throw new StorageError(`env ${toEnv} already has a disk; destroy it before cloning into it`);
    }
    const made = !(await exists(this.layout.envDir(toEnv)));
    if (!image) {
      await mkdir(this.layout.volDir(toEnv), { recursive: true });
      return {};
    }
    try {
      await this.publish(toEnv, (tmp) => copyImage(image, tmp));
    } catch (err) {
      await umountAll(this.layout.volDir(toEnv)).catch(ignore);
      await rm(this.layout.diskImage(toEnv), { force: true }).catch(ignore);
      await rmdir(this.layout.volDir(toEnv)).catch(ignore);
      if (made) await rm(this.layout.envDir(toEnv), { recursive: true, force: true }).catch(ignore);
      throw err;
    }
    return Object.fromEntries(volumes.map((v) => [v, this.layout.volumePath(toEnv, v)]));
  }

  async rollback(envId: string, snapshot: string, volumes: string[]): Promise<void> {
    if (await this.legacy(envId)) return this.trees.rollback(envId, snapshot, volumes);
    const image = await this.source(envId, snapshot, volumes);
    if (image) await this.publish(envId, (tmp) => copyImage(image, tmp));
  }

  async destroy(envId: string): Promise<void> {
    await umountAll(this.layout.volDir(envId));
    await this.trees.destroy(envId);
  }
}
