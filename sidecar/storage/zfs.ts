// `zfs` storage. Datasets: `<pool>/envs/<env>/vol/<volume>`, mounted at the layout's volume path.
// A snapshot is `…/vol/<volume>@<name>` per volume, tagged `svc:env=<env>`, plus a marker
// `<pool>/envs/<env>@<name>` taken last: the marker publishes the version (all or nothing), the
// way rename does for the directory backends. Clones are `zfs clone` (constant time).
//
// Rollback without losing later versions. `zfs rollback` reaches an older snapshot only with -r,
// which destroys every newer one (still forkable versions). Instead rollback clones the snapshot
// into `…/tmp/<volume>`, promotes the clone, and swaps it in by rename; the old live dataset is
// renamed to `…/old/<volume>/<id>`. `zfs promote` hands the snapshots up to the target (the shared
// history) to the new live dataset and leaves only the newer ones, the abandoned branch, on the
// retired one. A retired dataset that holds no snapshot any more (the usual reset to the newest
// version) is destroyed at once, so repeated resets leave nothing behind; one that holds newer
// versions stays, unmounted, and those versions stay forkable (snapshots are looked up by name
// under the whole env, live or retired).
//
// Destroy with living forks. A fork is a ZFS clone of one of this env's snapshots, and ZFS
// refuses to destroy a snapshot with clones (-R would destroy the forks too). So destroy first
// promotes every clone outside the env whose origin is inside it, which moves the shared history
// into that fork, then destroys the env's datasets leaves first with plain -r. History moved into
// a fork stays tagged with this env and is destroyed (deferred while other forks still need it).
//
// Disk limit: `quota` on `<pool>/envs/<env>` bounds all its descendants together, so
// every volume, clone and rollback dataset is inside the env's one limit, and so is the history
// its versions keep. A fork is a clone: what it shares with its origin is charged to the origin,
// the fork's own quota counts what it writes (and its own versions).

import { rm } from 'node:fs/promises';
import { nameSuffix } from '../../protocol/ids.ts';
import { StorageError, UnknownSnapshot } from './errors.ts';
import type { Layout } from './layout.ts';
import { checkCloneTarget, checkName, checkVolumes } from './names.ts';
import type { StorageBackend } from './types.ts';
import { datasetOf, ensureContainer, isMissing, mountAt, zExists, zfs, zList, zRename } from './zfs-cli.ts';

const TAG = 'svc:env';
/** The env's disk limit in bytes, a user property on its dataset. */
const LIMIT_PROP = 'svc:disk_limit';
const ignore = () => {};

export class ZfsBackend implements StorageBackend {
  readonly kind = 'zfs' as const;
  readonly pool: string;
  readonly layout: Layout;
  /** Envs whose destroy is under way: a clone from them could be caught half promoted. */
  private readonly destroying = new Set<string>();

  constructor(layout: Layout, pool: string) {
    this.layout = layout;
    this.pool = pool;
  }

  volumePath(envId: string, volume: string): string {
    return this.layout.volumePath(envId, volume);
  }

  async prepare(envId: string, volumes: string[]): Promise<Record<string, string>> {
    checkVolumes(volumes);
    await this.ensureEnv(envId);
    await this.upgradeLimit(envId);
    const out: Record<string, string> = {};
    for (const v of volumes) {
      out[v] = this.layout.volumePath(envId, v);
      if (!(await this.recover(envId, v)))
        await zfs(['create', '-o', `mountpoint=${out[v]}`, this.volDs(envId, v)]);
    }
    return out;
  }

  async hasSnapshot(envId: string, name: string): Promise<boolean> {
    return zExists(this.marker(envId, name));
  }

  async snapshot(envId: string, name: string, volumes: string[]): Promise<string[]> {
    checkVolumes(volumes);
    const marker = this.marker(envId, name);
    await this.ensureEnv(envId);
    if (await zExists(marker)) throw new StorageError(`env ${envId} already has a snapshot ${name}`);
    for (const v of volumes) {
      if (!(await this.recover(envId, v)))
        throw new StorageError(`env ${envId} has no volume ${v} to snapshot (prepare it first)`);
      // Without the marker, a snapshot of this name is a leftover of an interrupted call.
      const snap = `${this.volDs(envId, v)}@${name}`;
      if (await zExists(snap)) await zfs(['destroy', snap]);
    }
    const made: string[] = [];
    try {
      for (const v of volumes) {
        const snap = `${this.volDs(envId, v)}@${name}`;
        await zfs(['snapshot', '-o', `${TAG}=${envId}`, snap]);
        made.push(snap);
      }
      await zfs(['snapshot', '-o', `${TAG}=${envId}`, marker]);
    } catch (err) {
      for (const snap of made) await zfs(['destroy', snap]).catch(ignore);
      throw err;
    }
    return made;
  }

  async clone(
    fromEnv: string,
    snapshot: string,
    toEnv: string,
    volumes: string[],
  ): Promise<Record<string, string>> {
    checkCloneTarget(fromEnv, toEnv);
    if (this.destroying.has(fromEnv)) throw new StorageError(`env ${fromEnv} is being destroyed`);
    const sources = await this.sources(fromEnv, snapshot, volumes);
    for (const v of volumes) {
      if (await zExists(this.volDs(toEnv, v)))
        throw new StorageError(`env ${toEnv} already has volume ${v}; destroy it before cloning into it`);
    }
    await this.ensureEnv(toEnv);
    const out: Record<string, string> = {};
    try {
      for (const v of volumes) {
        const path = this.layout.volumePath(toEnv, v);
        const cloneFrom = (src: string) =>
          zfs(['clone', '-o', `mountpoint=${path}`, src, this.volDs(toEnv, v)]);
        // Forks are not serialised with the source env's commands: a rollback there may have just
        // moved the snapshot to another dataset (promote), so a vanished source is looked up again.
        await cloneFrom(sources[v]).catch(async (err: Error) => {
          if (!isMissing(err)) throw err;
          await cloneFrom((await this.sources(fromEnv, snapshot, [v]))[v]);
        });
        out[v] = path;
      }
    } catch (err) {
      for (const v of Object.keys(out)) await zfs(['destroy', this.volDs(toEnv, v)]).catch(ignore);
      throw err;
    }
    return out;
  }

  async rollback(envId: string, snapshot: string, volumes: string[]): Promise<void> {
    checkVolumes(volumes);
    if (!(await this.hasSnapshot(envId, snapshot))) throw new UnknownSnapshot(envId, snapshot);
    await this.upgradeLimit(envId);
    for (const v of volumes) await this.recover(envId, v);
    const sources = await this.sources(envId, snapshot, volumes);
    await ensureContainer(`${this.envDs(envId)}/tmp`);
    // Phase 1 builds every new live dataset aside; on failure the live volumes are untouched and
    // each clone is retired (a promoted one holds history the live dataset now descends from).
    try {
      for (const v of volumes) {
        await zfs(['clone', sources[v], this.tmpDs(envId, v)]);
        await zfs(['promote', this.tmpDs(envId, v)]);
      }
    } catch (err) {
      for (const v of volumes) {
        if (await zExists(this.tmpDs(envId, v)))
          await this.retire(envId, v, this.tmpDs(envId, v)).catch(ignore);
      }
      throw err;
    }
    // Phase 2 is renames only; `recover` completes it after a crash.
    for (const v of volumes) {
      if (await zExists(this.volDs(envId, v))) await this.retire(envId, v, this.volDs(envId, v));
      await zRename(this.tmpDs(envId, v), this.volDs(envId, v));
      await mountAt(this.volDs(envId, v), this.layout.volumePath(envId, v));
    }
  }

  /**
   * `quota` on the env's dataset, which bounds everything below it: every volume, the history its
   * versions keep (snapshots) and retired datasets. A volume, clone or rollback made later is a
   * descendant, so it is bounded without anything set on it. The limit is also kept as the user
   * property `svc:disk_limit`. Volumes made by an older svcd (a `refquota` each) lose it.
   * `setuid=off,devices=off` are inherited.
   */
  async setQuota(envId: string, bytes: number): Promise<string> {
    await this.ensureEnv(envId);
    const env = this.envDs(envId);
    await zfs(['set', 'setuid=off', env]);
    await zfs(['set', 'devices=off', env]);
    await zfs(['set', `${LIMIT_PROP}=${bytes}`, env]);
    const how = await this.envQuota(envId, bytes);
    for (const [ds, refquota] of await zList(`${env}/vol`, 'filesystem', ['name', 'refquota']))
      if (ds !== `${env}/vol` && refquota !== 'none') await zfs(['set', 'refquota=none', ds]);
    return how;
  }

  /** Sets `quota`; below what the env uses already (a smaller redeploy), it is held where it is. */
  private async envQuota(envId: string, bytes: number): Promise<string> {
    const env = this.envDs(envId);
    const how = `zfs quota of ${bytes} bytes on ${env} across volumes (versions included)`;
    try {
      await zfs(['set', `quota=${bytes}`, env]);
      return how;
    } catch (err) {
      if (!/less than current used/.test((err as Error).message)) throw err;
      const used = (await zfs(['get', '-Hp', '-o', 'value', 'used', env])).trim();
      await zfs(['set', `quota=${used}`, env]);
      return `zfs quota of ${used} bytes on ${env} across volumes (it uses more than ${bytes} bytes already; no further growth)`;
    }
  }

  /** A fork's quota again after a destroy lifted it (held at its use if history it shares stays). */
  private async restoreQuota(envDs: string): Promise<void> {
    const limit = (await zfs(['get', '-Hp', '-o', 'value', LIMIT_PROP, envDs])).trim();
    if (/^\d+$/.test(limit)) await this.envQuota(envDs.split('/')[2], Number(limit));
  }

  /** An env an older svcd limited per volume (`svc:disk_limit`, no `quota`) gets its quota. */
  private async upgradeLimit(envId: string): Promise<void> {
    const [limit, quota] = (
      await zfs(['get', '-Hp', '-o', 'value', `${LIMIT_PROP},quota`, this.envDs(envId)])
    )
      .trim()
      .split('\n');
    if (/^\d+$/.test(limit) && (quota === '0' || quota === 'none')) await this.envQuota(envId, Number(limit));
  }

  async destroy(envId: string): Promise<void> {
    const envDs = this.envDs(envId);
    this.destroying.add(envId);
    const lifted = new Set<string>();
    try {
      await this.destroyDatasets(envDs, lifted);
      await this.dropOrphanSnapshots();
    } finally {
      this.destroying.delete(envId);
      for (const fork of lifted) await this.restoreQuota(fork).catch(ignore);
    }
    await rm(this.layout.envDir(envId), { recursive: true, force: true });
    await rm(this.layout.snapsDir(envId), { recursive: true, force: true });
  }

  private envDs(envId: string): string {
    return `${this.pool}/envs/${checkName('env id', envId)}`;
  }
  private volDs(envId: string, volume: string): string {
    return `${this.envDs(envId)}/vol/${checkName('volume name', volume)}`;
  }
  private tmpDs(envId: string, volume: string): string {
    return `${this.envDs(envId)}/tmp/${checkName('volume name', volume)}`;
  }
  private oldDs(envId: string, volume: string): string {
    return `${this.envDs(envId)}/old/${checkName('volume name', volume)}`;
  }
  private marker(envId: string, name: string): string {
    return `${this.envDs(envId)}@${checkName('snapshot name', name)}`;
  }

  private async ensureEnv(envId: string): Promise<void> {
    for (const ds of [`${this.pool}/envs`, this.envDs(envId), `${this.envDs(envId)}/vol`])
      await ensureContainer(ds);
  }

  /** The ZFS snapshot holding each volume's copy, live or retired; UnknownSnapshot otherwise. */
  private async sources(envId: string, name: string, volumes: string[]): Promise<Record<string, string>> {
    checkVolumes(volumes);
    if (!(await this.hasSnapshot(envId, name))) throw new UnknownSnapshot(envId, name);
    const snaps = (await zList(this.envDs(envId), 'snapshot', ['name', TAG]))
      .filter(([snap, tag]) => snap.endsWith(`@${name}`) && (tag === envId || tag === '-'))
      .map(([snap]) => snap);
    const out: Record<string, string> = {};
    for (const v of volumes) {
      const mine = (ds: string | null) =>
        ds === this.volDs(envId, v) || ds?.startsWith(`${this.oldDs(envId, v)}/`) === true;
      const found = snaps.find((s) => mine(datasetOf(s)));
      if (!found) throw new UnknownSnapshot(envId, name, `it holds no volume ${v}`);
      out[v] = found;
    }
    return out;
  }

  /**
   * Brings a volume back to a consistent state after an interrupted rollback and makes sure it is
   * mounted; returns whether the live dataset exists. A `tmp` clone next to a live dataset is
   * retired (it may hold promoted history); a `tmp` without one is the swap's second half.
   */
  private async recover(envId: string, volume: string): Promise<boolean> {
    const live = this.volDs(envId, volume);
    const tmp = this.tmpDs(envId, volume);
    const hasLive = await zExists(live);
    if (await zExists(tmp)) {
      if (hasLive) await this.retire(envId, volume, tmp);
      else await zRename(tmp, live);
    } else if (!hasLive) return false;
    await mountAt(live, this.layout.volumePath(envId, volume));
    return true;
  }

  /** Moves a dataset out of the way under `old/<volume>/`; drops it when it keeps no snapshot. */
  private async retire(envId: string, volume: string, dataset: string): Promise<void> {
    await ensureContainer(`${this.envDs(envId)}/old`);
    await ensureContainer(this.oldDs(envId, volume));
    await zfs(['set', 'mountpoint=none', dataset]);
    const id = `${Date.now().toString(36)}${nameSuffix(6)}`;
    const retired = `${this.oldDs(envId, volume)}/${id}`;
    await zRename(dataset, retired);
    // No snapshot means no clone can depend on it, so this can never take a fork with it.
    if ((await zList(retired, 'snapshot', ['name'])).length === 0) await zfs(['destroy', retired]);
  }

  /**
   * Destroys every dataset under `envDs`. Clones elsewhere whose origin is inside are promoted
   * first (one per round: a promote moves whole stretches of history and rewrites other origins),
   * then datasets that no clone depends on and that have no children go, until none is left.
   */
  private async destroyDatasets(envDs: string, lifted: Set<string>): Promise<void> {
    const inside = (ds: string | null) => ds !== null && (ds === envDs || ds.startsWith(`${envDs}/`));
    for (let round = 0; ; round++) {
      const rows = await zList(`${this.pool}/envs`, 'filesystem', ['name', 'origin']);
      const own = rows.map(([name]) => name).filter(inside);
      if (own.length === 0) return;
      const dependent = rows.find(([name, origin]) => !inside(name) && inside(datasetOf(origin)));
      if (dependent) {
        // The promote charges the moved history to the fork, which its quota may refuse: the
        // fork's quota is lifted until the history it does not need is gone (restoreQuota).
        const fork = dependent[0].split('/').slice(0, 3).join('/');
        if (!lifted.has(fork)) await zfs(['set', 'quota=none', fork]);
        lifted.add(fork);
        await zfs(['promote', dependent[0]]);
        continue;
      }
      const pinned = new Set(rows.map(([, origin]) => datasetOf(origin)));
      const leaves = own.filter((ds) => !pinned.has(ds) && !own.some((o) => o.startsWith(`${ds}/`)));
      if (leaves.length === 0 || round > 10_000)
        throw new StorageError(`cannot destroy ${envDs}: ${own.join(', ')}`);
      for (const ds of leaves) await zfs(['destroy', '-r', ds]);
    }
  }

  /**
   * Snapshots tagged with an env that no longer exists: history that promotes moved into forks.
   * `destroy -d` removes them now, or when the last clone that still needs one goes.
   */
  private async dropOrphanSnapshots(): Promise<void> {
    const root = `${this.pool}/envs`;
    const envs = new Set((await zList(root, 'filesystem', ['name'])).map(([n]) => n));
    for (const [snap, tag, deferred] of await zList(root, 'snapshot', ['name', TAG, 'defer_destroy'])) {
      if (tag === '-' || deferred === 'on' || envs.has(`${root}/${tag}`)) continue;
      await zfs(['destroy', '-d', snap]);
    }
  }
}
