// The one interface the sidecar uses for volume data. Every environment volume is a "dataset"
// (a directory, a btrfs subvolume or a ZFS file system) bind-mounted into containers from
// `<data>/envs/<env>/vol/<volume>/` whatever the backend, so compose rendering never cares.
import type { Capabilities } from '../../protocol/commands.ts';
import type { XfsLoopOptions } from './xfs-loop.ts';

export type StorageKind = Capabilities['storage'];

export type CowKind = 'zfs' | 'btrfs' | 'reflink' | 'xfs-loop' | 'none';

export interface StorageBackend {
  /** Reported in capabilities `storage`. */
  readonly kind: StorageKind;
  /** How a clone shares data (capabilities `cow`); set by openStorage. */
  cow?: CowKind;
  /** Ensures an (empty on first use) dataset per volume; returns volume -> host path. Idempotent. */
  prepare(envId: string, volumes: string[]): Promise<Record<string, string>>;
  /** Host path of a volume (the bind-mount source); pure, touches nothing. */
  volumePath(envId: string, volume: string): string;
  /**
   * Captures every listed volume under `name` (the version id) and returns the dataset names.
   * All or nothing: a failure leaves no snapshot of that name. The caller has paused the stack.
   */
  snapshot(
    envId: string,
    name: string,
    volumes: string[],
    /**
     * Called once the content is captured and before it is made durable and published, so the
     * caller can thaw the stack early (a short frozen_for). Backends whose snapshot is one
     * atomic step (zfs) may not call it; the caller thaws afterwards then.
     */
    captured?: () => Promise<void>,
  ): Promise<string[]>;
  /**
   * Optional, before the caller pauses the stack for `snapshot` of the same name: checks it can be
   * taken and flushes the env's volumes, so the capture under the freeze has little left to do
   * (a short frozen_for). The snapshot still reports any error.
   */
  prepareSnapshot?(envId: string, name: string, volumes: string[]): Promise<void>;
  hasSnapshot(envId: string, name: string): Promise<boolean>;
  /**
   * Creates `toEnv`'s volumes from `fromEnv`'s snapshot. The copy is independent of the source:
   * writes on either side never show on the other, and destroying the source keeps the clone.
   * Refuses when `toEnv` already has one of the volumes; on failure removes what it created.
   */
  clone(fromEnv: string, snapshot: string, toEnv: string, volumes: string[]): Promise<Record<string, string>>;
  /**
   * Replaces the live volumes with the snapshot's content. Keeps every snapshot of the env, older
   * and newer, so later versions stay forkable. The caller has stopped the stack.
   */
  rollback(envId: string, snapshot: string, volumes: string[]): Promise<void>;
  /**
   * Bounds the env's volumes together to `bytes` (writes past it fail with ENOSPC or EDQUOT) and
   * mounts them `nosuid,nodev` where the backend can. Called before `prepare` or `clone` of the
   * env, again on a redeploy (a new limit applies). Returns how the limit is enforced on this
   * host, or `none: <reason>` when nothing here can enforce one.
   */
  setQuota(envId: string, bytes: number): Promise<string>;
  /** Removes every dataset, snapshot and directory of the env (`envs/<env>`, `snaps/<env>`). Idempotent. */
  destroy(envId: string): Promise<void>;
}

export interface StorageOptions {
  /** The sidecar's data directory; created when missing. */
  dataDir: string;
  /** ZFS pool to use when it exists (`--zfs-pool`). */
  zfsPool?: string;
  /**
   * When the data dir cannot clone, keep datasets in a loop-mounted XFS image (xfs-loop.ts).
   * `SVC_XFS_LOOP=auto` turns it on; `svc-server --dev` does for its local sidecar.
   */
  xfsLoop?: boolean | XfsLoopOptions;
  /** Told why the XFS image was not used. */
  log?: (line: string) => void;
}
