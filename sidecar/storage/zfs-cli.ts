// A thin wrapper over the `zfs`/`zpool` programs. zfs-fuse (and ZFS in general, while a mount is
// being released) answers "dataset is busy" for a moment after use, so mutations are retried.
import { CommandFailed } from './errors.ts';
import { retry, run } from './exec.ts';

const TRANSIENT = /busy|cannot unmount/i;
/**
 * Attempts at a busy dataset: ~2 minutes (retry's delay grows to 1 s). Under host disk load,
 * zfs-fuse kept a freshly promoted clone "busy" for a rename 2–19 s, once past 35 s (the former
 * budget of 40), failing rollbacks; it always cleared with time. A phase may take 15 minutes.
 */
const BUSY_ATTEMPTS = 125;
const isTransient = (err: Error) => err instanceof CommandFailed && TRANSIENT.test(err.message);
export const isMissing = (err: Error) => err instanceof CommandFailed && /does not exist/.test(err.stderr);

export async function zfs(args: string[]): Promise<string> {
  return retry(() => run('zfs', args), isTransient, BUSY_ATTEMPTS);
}

/**
 * `zfs rename`, safe to retry. Under load zfs-fuse can report "cannot open '<from>': dataset does
 * not exist" around a rename: either an earlier attempt renamed it and failed to remount ("busy",
 * retried), or the dataset is briefly invisible. Gone from `from` and present at `to` is success;
 * still at `from` is tried again.
 */
export async function zRename(from: string, to: string): Promise<void> {
  let gone = false; // the source really is missing: no retry can help
  await retry(
    async () => {
      try {
        await run('zfs', ['rename', from, to]);
      } catch (err) {
        if (isMissing(err as Error) && !(await zExists(from))) {
          if (await zExists(to)) return;
          gone = true;
        }
        throw err;
      }
    },
    (err) => !gone && (isTransient(err) || isMissing(err)),
    BUSY_ATTEMPTS,
  );
}

export async function poolExists(pool: string): Promise<boolean> {
  try {
    return (await run('zpool', ['list', '-H', '-o', 'name', pool], 10_000)).trim() === pool;
  } catch {
    return false;
  }
}

/** A file system or snapshot exists. */
export async function zExists(name: string): Promise<boolean> {
  try {
    await run('zfs', ['list', '-H', '-t', 'all', '-o', 'name', name]);
    return true;
  } catch (err) {
    if (isMissing(err as Error)) return false;
    throw err;
  }
}

/** Rows of `zfs list -r` under `root` (tab-separated props); empty when `root` does not exist. */
export async function zList(
  root: string,
  type: 'filesystem' | 'snapshot',
  props: string[],
): Promise<string[][]> {
  try {
    const out = await run('zfs', ['list', '-H', '-r', '-t', type, '-o', props.join(','), root]);
    return out
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => l.split('\t'));
  } catch (err) {
    if (isMissing(err as Error)) return [];
    throw err;
  }
}

/** A dataset that only groups others: never mounted, so it leaves no directory anywhere. */
export async function ensureContainer(name: string): Promise<void> {
  if (await zExists(name)) return;
  try {
    await zfs(['create', '-o', 'mountpoint=none', name]);
  } catch (err) {
    if (!(err instanceof CommandFailed && /already exists/.test(err.stderr))) throw err;
  }
}

/** Mounts `name` at `path`, whatever its current mountpoint property. */
export async function mountAt(name: string, path: string): Promise<void> {
  const [mountpoint, mounted] = (await zfs(['get', '-H', '-o', 'value', 'mountpoint,mounted', name]))
    .trim()
    .split('\n');
  if (mountpoint !== path) await zfs(['set', `mountpoint=${path}`, name]);
  else if (mounted !== 'yes') await zfs(['mount', name]);
}

/** The dataset part of a snapshot name (`pool/a@s` → `pool/a`); null for `-`. */
export function datasetOf(snapshotOrDash: string): string | null {
  return snapshotOrDash === '-' ? null : snapshotOrDash.split('@')[0];
}
