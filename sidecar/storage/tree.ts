// The backends that keep datasets as directory trees under the data dir (`dir` and `btrfs`). They
// share the whole protocol: build every copy under a temporary name that starts with a dot, make
// it durable, then publish it with rename(2). A crash therefore never leaves a half snapshot or a
// half clone under a real name, and `recover` finishes or undoes an interrupted rollback swap.
// Only the three primitives differ (create, copy, remove), supplied as TreeOps.
import { mkdir, readdir, rename, rm, rmdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { StorageError, UnknownSnapshot } from './errors.ts';
import { exists, fsyncDir } from './exec.ts';
import type { Layout } from './layout.ts';
import { checkCloneTarget, checkName, checkVolumes } from './names.ts';
import { type TreeQuota, treeQuota } from './quota.ts';
import type { StorageBackend } from './types.ts';

export interface TreeOps {
  readonly kind: 'dir' | 'btrfs';
  /** Creates an empty dataset at `path`, which does not exist. */
  create(path: string): Promise<void>;
  /** Copies dataset `src` to `dst` (which does not exist), preserving everything; read-only for snapshots. */
  copy(src: string, dst: string, readOnly: boolean): Promise<void>;
  /** Removes one dataset and everything in it; nothing when `path` is missing. */
  remove(path: string): Promise<void>;
  /** Makes copies written under `dir` durable before they are published by rename. */
  flush(dir: string): Promise<void>;
  /** False when an existing volume is not in the backend's native form and must be converted. */
  isNative(path: string): Promise<boolean>;
}

const ignore = () => {};

export class TreeBackend implements StorageBackend {
  readonly kind: 'dir' | 'btrfs';
  readonly layout: Layout;
  readonly ops: TreeOps;
  #quota: Promise<TreeQuota> | undefined;

  constructor(layout: Layout, ops: TreeOps) {
    this.layout = layout;
    this.ops = ops;
    this.kind = ops.kind;
  }

  /** How this data dir bounds an env, decided on first use. */
  private quota(): Promise<TreeQuota> {
    this.#quota ??= treeQuota(this.layout, this.kind);
    return this.#quota;
  }

  async setQuota(envId: string, bytes: number): Promise<string> {
    checkName('env id', envId);
    return (await this.quota()).apply(envId, bytes);
  }

  volumePath(envId: string, volume: string): string {
    return this.layout.volumePath(envId, volume);
  }

  async prepare(envId: string, volumes: string[]): Promise<Record<string, string>> {
    checkName('env id', envId);
    checkVolumes(volumes);
    await (await this.quota()).restore(envId);
    await mkdir(this.layout.volDir(envId), { recursive: true });
    const out: Record<string, string> = {};
    for (const v of volumes) {
      await this.recover(envId, v);
      const path = this.layout.volumePath(envId, v);
      if (!(await exists(path))) await this.ops.create(path);
      else if (!(await this.ops.isNative(path))) await this.convert(envId, v, path);
      out[v] = path;
    }
    return out;
  }

  async hasSnapshot(envId: string, name: string): Promise<boolean> {
    try {
      return (await stat(this.layout.snapDir(envId, name))).isDirectory();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
  }

  async snapshot(
    envId: string,
    name: string,
    volumes: string[],
    captured?: () => Promise<void>,
  ): Promise<string[]> {
    checkVolumes(volumes);
    const final = this.layout.snapDir(envId, name);
    if (await this.hasSnapshot(envId, name))
      throw new StorageError(`env ${envId} already has a snapshot ${name}`);
    await (await this.quota()).restore(envId);
    for (const v of volumes) {
      await this.recover(envId, v);
      if (!(await exists(this.layout.volumePath(envId, v))))
        throw new StorageError(`env ${envId} has no volume ${v} to snapshot (prepare it first)`);
    }
    const tmp = this.layout.snapTemp(envId, name);
    await this.removeSnapshotDir(tmp);
    await mkdir(tmp, { recursive: true });
    try {
      // All volumes at once: the stack is frozen for this (frozen_for: the slowest copy, not the sum).
      await Promise.all(
        volumes.map((v) => this.ops.copy(this.layout.volumePath(envId, v), join(tmp, v), true)),
      );
      // The copies are independent of the live volumes now: later writes cannot reach them.
      await captured?.();
      await this.ops.flush(tmp);
      await rename(tmp, final);
      await fsyncDir(this.layout.snapsDir(envId));
    } catch (err) {
      await this.removeSnapshotDir(tmp).catch(ignore);
      throw err;
    }
    return volumes.map((v) => join(final, v));
  }

  async clone(
    fromEnv: string,
    snapshot: string,
    toEnv: string,
    volumes: string[],
  ): Promise<Record<string, string>> {
    checkCloneTarget(fromEnv, toEnv);
    const sources = await this.sources(fromEnv, snapshot, volumes);
    const volDir = this.layout.volDir(toEnv);
    for (const v of volumes) {
      if (await exists(this.layout.volumePath(toEnv, v)))
        throw new StorageError(`env ${toEnv} already has volume ${v}; destroy it before cloning into it`);
    }
    await mkdir(volDir, { recursive: true });
    const out: Record<string, string> = {};
    try {
      for (const v of volumes) {
        await this.ops.remove(this.layout.volClone(toEnv, v));
        await this.ops.copy(sources[v], this.layout.volClone(toEnv, v), false);
      }
      await this.ops.flush(volDir);
      for (const v of volumes) {
        out[v] = this.layout.volumePath(toEnv, v);
        await rename(this.layout.volClone(toEnv, v), out[v]);
      }
      await fsyncDir(volDir);
    } catch (err) {
      for (const v of volumes) await this.ops.remove(this.layout.volClone(toEnv, v)).catch(ignore);
      for (const path of Object.values(out)) await this.ops.remove(path).catch(ignore);
      await rmdir(volDir).catch(ignore);
      await rmdir(this.layout.envDir(toEnv)).catch(ignore);
      throw err;
    }
    return out;
  }

  async rollback(envId: string, snapshot: string, volumes: string[]): Promise<void> {
    const sources = await this.sources(envId, snapshot, volumes);
    const volDir = this.layout.volDir(envId);
    await (await this.quota()).restore(envId);
    await mkdir(volDir, { recursive: true });
    for (const v of volumes) {
      await this.recover(envId, v);
      // `recover` relies on a `.new` being promoted only once the live copy sits at `.old`.
      if (!(await exists(this.layout.volumePath(envId, v))))
        await this.ops.create(this.layout.volumePath(envId, v));
    }
    // Phase 1 copies everything aside: a failure here leaves the live volumes untouched.
    try {
      for (const v of volumes) await this.stage(envId, v, sources[v]);
      await this.ops.flush(volDir);
    } catch (err) {
      for (const v of volumes) await this.ops.remove(this.layout.volNew(envId, v)).catch(ignore);
      throw err;
    }
    // Phase 2 is renames only; `recover` completes it if the process dies in the middle.
    for (const v of volumes) await this.swap(envId, v);
    await fsyncDir(volDir);
    for (const v of volumes) await this.ops.remove(this.layout.volOld(envId, v));
  }

  async destroy(envId: string): Promise<void> {
    const volDir = this.layout.volDir(envId);
    await (await this.quota()).release(envId);
    for (const entry of await list(volDir)) await this.ops.remove(join(volDir, entry));
    const snapsDir = this.layout.snapsDir(envId);
    for (const entry of await list(snapsDir)) await this.removeSnapshotDir(join(snapsDir, entry));
    await rm(this.layout.envDir(envId), { recursive: true, force: true });
    await rm(snapsDir, { recursive: true, force: true });
  }

  /** Snapshot path of every volume; UnknownSnapshot when the env never captured `snapshot`. */
  private async sources(envId: string, snapshot: string, volumes: string[]): Promise<Record<string, string>> {
    checkVolumes(volumes);
    if (!(await this.hasSnapshot(envId, snapshot))) throw new UnknownSnapshot(envId, snapshot);
    const out: Record<string, string> = {};
    for (const v of volumes) {
      out[v] = join(this.layout.snapDir(envId, snapshot), v);
      if (!(await exists(out[v]))) throw new UnknownSnapshot(envId, snapshot, `it holds no volume ${v}`);
    }
    return out;
  }

  private async stage(envId: string, volume: string, source: string): Promise<void> {
    const next = this.layout.volNew(envId, volume);
    await this.ops.remove(next);
    await this.ops.copy(source, next, false);
  }

  private async swap(envId: string, volume: string): Promise<void> {
    const live = this.layout.volumePath(envId, volume);
    await rename(live, this.layout.volOld(envId, volume));
    await rename(this.layout.volNew(envId, volume), live);
  }

  /** Rewrites a volume that is not in native form (btrfs: a plain directory) through the swap. */
  private async convert(envId: string, volume: string, path: string): Promise<void> {
    await this.stage(envId, volume, path);
    await this.ops.flush(this.layout.volDir(envId));
    await this.swap(envId, volume);
    await fsyncDir(this.layout.volDir(envId));
    await this.ops.remove(this.layout.volOld(envId, volume));
  }

  /**
   * Puts a volume back into a consistent state after a crash. A `.clone` was never published, so
   * it goes. With the live volume present, any `.new`/`.old` is a leftover. Without it, a swap
   * stopped between its two renames: `.old` exists, and `.new` is complete (it is renamed only
   * after being flushed), so the swap is finished; a lone `.old` goes back.
   */
  private async recover(envId: string, volume: string): Promise<void> {
    const live = this.layout.volumePath(envId, volume);
    const next = this.layout.volNew(envId, volume);
    const old = this.layout.volOld(envId, volume);
    await this.ops.remove(this.layout.volClone(envId, volume));
    if (await exists(live)) {
      await this.ops.remove(next);
      await this.ops.remove(old);
    } else if (await exists(old)) {
      if (await exists(next)) {
        await rename(next, live);
        await this.ops.remove(old);
      } else await rename(old, live);
    } else await this.ops.remove(next);
  }

  private async removeSnapshotDir(dir: string): Promise<void> {
    for (const entry of await list(dir)) await this.ops.remove(join(dir, entry));
    await rm(dir, { recursive: true, force: true });
  }
}

/** Entries of `dir`; none when it is missing. */
export async function list(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return [];
    throw err;
  }
}
