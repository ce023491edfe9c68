// Subvolumes a container creates inside its volume (disk limits on btrfs). The
// BTRFS_IOC_SUBVOL_CREATE ioctl needs only write access to the directory, so any container can
// make one. With full qgroup accounting (this kernel, 6.18, checked) a new subvolume gets only its
// own level-0 qgroup and joins no group, so what is written into it would not count against its
// env's limit. With simple quotas (kernel 6.7+) the kernel itself adds a new subvolume to every
// group its parent subvolume belongs to, but only when the creator names no group: the ioctl's
// qgroup-inherit argument needs no privilege either (checked: uid 1000 made a subvolume in any
// group it named), and then the subvolume is in that group alone. So in both modes a container
// could escape its env's limit and charge another env's group (using up that env's limit).
//
// `adoptNested` closes both: every subvolume below a volume of an env (found through the parent
// ids of one `btrfs subvolume list`, never through path names a container chose) is put into that
// env's group and taken out of other envs' groups, and the accounting is rescanned when btrfs
// says it must be (`settle`). The backend runs it whenever it touches an env and every few
// seconds (`Sweeper`).
import { readdir, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { guard } from '../../shared/faults.ts';
import { groupOfEnv, qgroupChildren, settle } from './btrfs-quota.ts';
import { CommandFailed } from './errors.ts';
import { run } from './exec.ts';
import { Layout } from './layout.ts';

/** `statfs` f_type of btrfs. */
const BTRFS_SUPER_MAGIC = 0x9123683e;

/** The top-level subvolume (FS_TREE): the parent of subvolumes made at the file system's root. */
const FS_TREE = '5';

// A subvolume's name may contain a newline, which can make extra lines appear in the list; the
// ids and parent ids at the start of each real line are never affected, so extra lines can only
// add parent claims (assigning more, never less).
const LINE = /^ID (\d+) gen \d+ top level (\d+) path /;

/** Every subvolume of the file system holding `path`: id → the parent ids claimed for it. */
export async function subvolumeParents(path: string): Promise<Map<string, Set<string>>> {
  const parents = new Map<string, Set<string>>();
  for (const line of (await run('btrfs', ['subvolume', 'list', path])).split('\n')) {
    const m = LINE.exec(line);
    if (!m) continue;
    const set = parents.get(m[1]) ?? new Set<string>();
    set.add(m[2]);
    parents.set(m[1], set);
  }
  return parents;
}

/** The groups recorded by this data dir's envs (`envs/<env>/qgroup`). */
async function envGroups(dataDir: string): Promise<Set<string>> {
  const layout = new Layout(dataDir);
  const envs = await readdir(join(layout.dataDir, 'envs')).catch(() => [] as string[]);
  const out = new Set<string>();
  for (const env of envs) {
    // Not an env id (names.ts): not an env; `envDir` refuses it.
    const group = await groupOfEnv(layout, env).catch(() => null);
    if (group) out.add(group);
  }
  return out;
}

const quietly = (err: unknown, what: RegExp) => err instanceof CommandFailed && what.test(err.message);

/**
 * Puts every subvolume below a member of an env's group into that group, and out of other envs'
 * groups (only groups this data dir's envs recorded count). `only` limits the check to those
 * subvolume ids (a sweep looks at new ones). Returns the changes made (`assign|remove 0/<id>
 * 1/<n>`), after the accounting is consistent again.
 */
export async function adoptNested(
  dataDir: string,
  only?: Set<string>,
  listed?: Map<string, Set<string>>,
): Promise<string[]> {
  const parents = listed ?? (await subvolumeParents(dataDir));
  const ids = [...parents.keys()].filter((id) => !only || only.has(id));
  if (!ids.length) return [];
  const ours = await envGroups(dataDir);
  if (!ours.size) return [];
  let rows: Map<string, string[]>;
  try {
    rows = await qgroupChildren(dataDir);
  } catch (err) {
    if (quietly(err, /not enabled|not connected|quota/i)) return []; // no quotas: no limits
    throw err;
  }
  const groupsOf = new Map<string, Set<string>>(); // subvolume id → its level-1 groups
  for (const [group, children] of rows) {
    if (!ours.has(group)) continue; // another tool's group on the same file system
    for (const child of children) {
      const id = child.replace(/^0\//, '');
      groupsOf.set(id, (groupsOf.get(id) ?? new Set()).add(group));
    }
  }
  // The groups a subvolume belongs in: those of its root-most grouped ancestor (the volume svcd
  // made in its env's group), never those of a nested one between (which a container may have
  // put into another env's group: the inherit argument of the ioctl needs no privilege either).
  const memo = new Map<string, Set<string>>();
  const rightful = (id: string, seen: Set<string>): Set<string> => {
    const known = memo.get(id);
    if (known) return known;
    const out = new Set<string>();
    for (const p of parents.get(id) ?? []) {
      if (p === FS_TREE || seen.has(p)) continue;
      const up = rightful(p, new Set([...seen, p]));
      for (const g of up.size ? up : (groupsOf.get(p) ?? [])) out.add(g);
    }
    memo.set(id, out);
    return out;
  };
  const made: string[] = [];
  const relation = async (verb: 'assign' | 'remove', id: string, group: string) => {
    await run('btrfs', ['qgroup', verb, '--no-rescan', `0/${id}`, group, dataDir]).then(
      () => made.push(`${verb} 0/${id} ${group}`),
      (err) => {
        // Deleted meanwhile (its qgroup is gone), or done by a concurrent sweep.
        if (!quietly(err, /exists|no such|not found|invalid argument/i)) throw err;
      },
    );
  };
  for (const id of ids) {
    const belongs = rightful(id, new Set([id]));
    if (!belongs.size) continue; // not inside an env's volume (a volume, version or fork itself)
    const own = groupsOf.get(id) ?? new Set<string>();
    for (const g of belongs) if (!own.has(g)) await relation('assign', id, g);
    for (const g of own) if (!belongs.has(g)) await relation('remove', id, g);
  }
  if (made.length) await settle(dataDir);
  return made;
}

/**
 * The periodic part: every `intervalMs` one `btrfs subvolume list`; only subvolumes not seen
 * before are checked (one `btrfs qgroup show`). Stops by itself once the data dir is no longer
 * on btrfs (unmounted) or gone; its timer never keeps the process alive.
 */
export class Sweeper {
  readonly dataDir: string;
  #known = new Set<string>();
  #running: Promise<string[]> | null = null;
  #timer: NodeJS.Timeout | undefined;

  constructor(dataDir: string) {
    this.dataDir = dataDir;
  }

  start(intervalMs: number): void {
    if (this.#timer || intervalMs <= 0) return;
    this.#timer = setInterval(
      guard('btrfs quota sweep', () => {
        this.tick().catch(() => {}); // a failed sweep is tried again on the next tick
      }),
      intervalMs,
    );
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Checks every subvolume of the file system now (when svcd touches an env). */
  all(): Promise<string[]> {
    return this.once(false);
  }

  /** Checks the subvolumes made since the last sweep. */
  async tick(): Promise<string[]> {
    const st = await statfs(this.dataDir).catch(() => null);
    if (!st || st.type !== BTRFS_SUPER_MAGIC) {
      this.stop();
      return [];
    }
    return this.once(true);
  }

  private once(onlyNew: boolean): Promise<string[]> {
    // One at a time; a full check asked for during a sweep runs after it.
    const prior = this.#running ?? Promise.resolve([]);
    const next = prior
      .catch(() => [])
      .then(async () => {
        const parents = await subvolumeParents(this.dataDir);
        const fresh = new Set([...parents.keys()].filter((id) => !this.#known.has(id)));
        if (onlyNew && !fresh.size) return [];
        const made = await adoptNested(this.dataDir, onlyNew ? fresh : undefined, parents);
        for (const id of parents.keys()) this.#known.add(id);
        return made;
      });
    this.#running = next;
    return next;
  }
}
