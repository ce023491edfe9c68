// btrfs disk limits: one limit across all of an environment's volumes, with qgroups. Each
// environment gets a level-1 qgroup `1/<n>` (n from a hash of the env id, recorded in
// `envs/<env>/qgroup` so it survives restarts) whose referenced-bytes limit is the env's limit.
// Every subvolume the env makes joins it when created (`-i 1/<n>`): volumes, a fork's clones,
// rollback copies and the read-only snapshots of its versions. A group's referenced bytes count
// each extent once, whoever of its members shares it, so the limit bounds the env's live data plus
// what only its versions still hold: everything the env keeps on the host.
//
// Why versions are members too: btrfs keeps a parent qgroup's numbers exact through a snapshot
// only when source and snapshot share that one parent and the parent shares nothing outside
// itself (the kernel's quick inherit). A snapshot outside the group marks the whole file system's
// accounting inconsistent, and while it is, btrfs accounts nothing and enforces no limit at all.
// A fork's clone does share with another env's group, so after forks (and after a group's members
// are removed) the accounting needs a rescan of the file system: `settle` runs it (one at a time,
// again when another operation spoiled it meanwhile) before the operation returns.
import { createHash } from 'node:crypto';
import { lstat, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CommandFailed } from './errors.ts';
import { exists, run } from './exec.ts';
import type { Layout } from './layout.ts';

const GROUP = /^1\/\d{1,15}$/;

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

/** `envs/<env>/qgroup`: the env's level-1 qgroup, written before the group is created. */
export const groupFile = (layout: Layout, envId: string) => join(layout.envDir(envId), 'qgroup');

/** The env's qgroup id: 44 bits of the env id's hash (+ `attempt` after a collision), level 1. */
export function groupId(envId: string, attempt = 0): string {
  const n = Number.parseInt(createHash('sha256').update(envId).digest('hex').slice(0, 11), 16);
  return `1/${n + 1 + attempt}`;
}

async function recorded(file: string): Promise<string | null> {
  const text = (await readFile(file, 'utf8').catch(() => '')).trim();
  return GROUP.test(text) ? text : null;
}

/** The recorded qgroup of an env; null when it has none (no limit, or made by an older svcd). */
export const groupOfEnv = (layout: Layout, envId: string) => recorded(groupFile(layout, envId));

/**
 * Where a subvolume at `path` belongs: `<data>/envs/<env>/vol/<x>` or `<data>/snaps/<env>/<dir>/<x>`.
 * Returns the env's qgroup and the legacy per-volume limit (`disk_limit` without a group: an env
 * limited by an older svcd, whose new volumes keep getting the limit each).
 */
export async function placement(path: string): Promise<{ group: string | null; legacyLimit: number | null }> {
  const parts = path.split('/');
  const n = parts.length;
  const inVol = parts[n - 2] === 'vol' && parts[n - 4] === 'envs';
  const inSnaps = parts[n - 4] === 'snaps';
  if (n < 5 || !(inVol || inSnaps)) return { group: null, legacyLimit: null };
  const envDir = join(parts.slice(0, n - 4).join('/') || '/', 'envs', parts[n - 3]);
  const group = await recorded(join(envDir, 'qgroup'));
  if (group || !inVol) return { group, legacyLimit: null };
  return { group: null, legacyLimit: await envLimit(envDir) };
}

/** `envs/<env>/disk_limit` in bytes, or null. */
async function envLimit(envDir: string): Promise<number | null> {
  const bytes = Number(await readFile(join(envDir, 'disk_limit'), 'utf8').catch(() => ''));
  return Number.isInteger(bytes) && bytes > 0 ? bytes : null;
}

/**
 * Runs `fn` with the group limit of the env holding `path` (a volume or rollback copy) lifted.
 * Deleting a subvolume nested in a volume reserves metadata in the volume, whose group may be at
 * its limit: btrfs then refuses with EDQUOT. The limit is set again afterwards, whatever happens.
 */
export async function withoutLimit<T>(path: string, fn: () => Promise<T>): Promise<T> {
  const parts = path.split('/');
  const n = parts.length;
  if (n < 5 || parts[n - 2] !== 'vol' || parts[n - 4] !== 'envs') return fn();
  const envDir = parts.slice(0, n - 2).join('/') || '/';
  const group = await recorded(join(envDir, 'qgroup'));
  const bytes = await envLimit(envDir);
  if (!group || !bytes) return fn();
  const dir = parts.slice(0, n - 1).join('/');
  await run('btrfs', ['qgroup', 'limit', 'none', group, dir]);
  try {
    return await fn();
  } finally {
    await run('btrfs', ['qgroup', 'limit', String(bytes), group, dir]);
  }
}

/** Rows of `btrfs qgroup show -c`: qgroup id → its children (level-0 ids of member subvolumes). */
export async function qgroupChildren(path: string): Promise<Map<string, string[]>> {
  const out = await run('btrfs', ['qgroup', 'show', '-c', '--raw', path]);
  const rows = new Map<string, string[]>();
  for (const line of out.split('\n')) {
    const [id, , , child] = line.trim().split(/\s+/);
    if (!id || !/^\d+\/\d+$/.test(id)) continue;
    rows.set(id, !child || child === '-' ? [] : child.split(','));
  }
  return rows;
}

const failedWith = (err: unknown, what: RegExp) => err instanceof CommandFailed && what.test(err.message);

/**
 * Enables quotas, makes (or finds) the env's group and sets its limit. Subvolumes the env already
 * has (a volume made before svcd set limits across volumes, with a per-volume limit, and its
 * versions) join the group and lose their own limit. Returns how the limit is enforced.
 */
export async function limitEnv(layout: Layout, envId: string, bytes: number): Promise<string> {
  const data = layout.dataDir;
  await run('btrfs', ['quota', 'enable', data]);
  const file = groupFile(layout, envId);
  /** Creates the group; false when it exists already. */
  const create = (g: string) =>
    run('btrfs', ['qgroup', 'create', g, data]).then(
      () => true,
      (err) => {
        if (failedWith(err, /exists/i)) return false;
        throw err;
      },
    );
  let group = await recorded(file);
  // Made again (members re-joined) when quotas were disabled and enabled since.
  let adopt = group !== null && (await create(group));
  if (!group) {
    for (let attempt = 0; ; attempt++) {
      const candidate = groupId(envId, attempt);
      await writeFile(file, candidate);
      // An existing group with members is another env's (a hash collision): the next id.
      if (!(await create(candidate)) && ((await qgroupChildren(data)).get(candidate)?.length ?? 0) > 0)
        continue;
      group = candidate;
      break;
    }
    adopt = true;
  }
  await run('btrfs', ['qgroup', 'limit', String(bytes), group, data]);
  if (adopt) {
    for (const path of await subvolumesOfEnv(layout, envId)) {
      const id = (await run('btrfs', ['inspect-internal', 'rootid', path])).trim();
      await run('btrfs', ['qgroup', 'limit', 'none', `0/${id}`, data]);
      await run('btrfs', ['qgroup', 'assign', '--no-rescan', `0/${id}`, group, data]).catch((err) => {
        if (!failedWith(err, /exists/i)) throw err;
      });
    }
    await settle(data);
  }
  const simple = (await quotaMode(data)) === 'squota';
  return `btrfs ${simple ? 'simple-quota ' : ''}qgroup ${group} limit of ${bytes} bytes across volumes (data only its versions keep included)`;
}

/**
 * `qgroup` (full accounting: a fork needs a rescan) or `squota` (simple quotas, kernel 6.7+,
 * enabled by the admin with `btrfs quota enable --simple`: every extent is charged to the
 * subvolume that wrote it, never inconsistent, so no rescans; a fork's group counts what it writes).
 */
export async function quotaMode(path: string): Promise<string> {
  const file = await flagFile(path);
  if (!file) return 'qgroup';
  return (await readFile(join(file, '..', 'mode'), 'utf8').catch(() => 'qgroup')).trim();
}

/** The env's subvolumes at the top of its volume and snapshot directories. */
async function subvolumesOfEnv(layout: Layout, envId: string): Promise<string[]> {
  const found: string[] = [];
  const list = (dir: string) => readdir(dir).catch(() => [] as string[]);
  for (const v of await list(layout.volDir(envId))) found.push(join(layout.volDir(envId), v));
  for (const s of await list(layout.snapsDir(envId)))
    for (const v of await list(join(layout.snapsDir(envId), s)))
      found.push(join(layout.snapsDir(envId), s, v));
  const out: string[] = [];
  for (const path of found) if (await isSubvolume(path)) out.push(path);
  return out;
}

/**
 * Removes a destroyed env's group. Its subvolumes are deleted already; btrfs keeps their qgroups
 * (and their membership) until the cleaner has dropped them, which a commit starts: that is waited
 * for a moment (the group then goes without touching the accounting), then what remains is
 * unlinked, which can leave the accounting to rescan.
 */
export async function dropGroup(dataDir: string, group: string): Promise<void> {
  await run('btrfs', ['filesystem', 'sync', dataDir]);
  let children = (await qgroupChildren(dataDir)).get(group);
  for (let i = 0; i < 120 && children?.length; i++) {
    await sleep(25);
    children = (await qgroupChildren(dataDir)).get(group);
  }
  if (!children) return;
  for (const child of children)
    await run('btrfs', ['qgroup', 'remove', '--no-rescan', child, group, dataDir]).catch(() => {});
  // The env's data is gone whatever happens here: a group left behind has no members and is
  // taken over by the next env whose id hashes to it (limitEnv), so it never fails the destroy.
  await run('btrfs', ['qgroup', 'destroy', group, dataDir]).catch(() => {});
  await settle(dataDir);
}

/** sysfs `qgroups/inconsistent` of the file system holding `path`; null when the kernel has none. */
async function flagFile(path: string): Promise<string | null> {
  const uuid = (await run('findmnt', ['-n', '-o', 'UUID', '-T', path]).catch(() => '')).trim();
  const file = `/sys/fs/btrfs/${uuid}/qgroups/inconsistent`;
  return uuid && (await exists(file)) ? file : null;
}

async function inconsistent(path: string): Promise<boolean> {
  const file = await flagFile(path);
  if (!file) return true; // cannot tell: a rescan is always correct
  return (await readFile(file, 'utf8')).trim() !== '0';
}

let queue: Promise<void> = Promise.resolve();

/**
 * Makes the qgroup accounting of the file system holding `path` consistent again (limits are
 * enforced only then): a rescan while btrfs says it is inconsistent. One at a time per process;
 * a rescan another process (or an earlier call) started is waited for; one spoiled by an
 * operation that ran meanwhile is started again, a bounded number of times.
 */
export function settle(path: string): Promise<void> {
  const next = queue.then(async () => {
    for (let i = 0; i < 10 && (await inconsistent(path)); i++) {
      await run('btrfs', ['quota', 'rescan', '-w', path]).catch(async (err) => {
        if (failedWith(err, /not enabled|not connected/i)) return; // quotas were turned off
        if (!failedWith(err, /in progress/i)) throw err;
        await run('btrfs', ['quota', 'rescan', '-W', path]).catch(() => {});
      });
      if (!(await flagFile(path))) return; // no flag to check again: one rescan
    }
  });
  queue = next.catch(() => {});
  return next;
}
