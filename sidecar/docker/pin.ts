// Paths inside a tree that containers can write (the project context), opened so that what was
// checked is what is used: every component is opened relative to its already-open parent with
// O_PATH|O_NOFOLLOW, so a link at any component is seen (and refused), never followed, and the
// descriptor that results names one inode for good, whatever is renamed or swapped afterwards.
// The descriptor is used through `/proc/self/fd/<n>`, which the kernel resolves to exactly that
// inode (reading, chown, mounting), never by its path name again.
import { constants, type Stats } from 'node:fs';
import { chown, type FileHandle, lchown, mkdir, open, readdir, readlink } from 'node:fs/promises';

/** Linux O_PATH: a handle on the inode itself, for fstat and for `/proc/self/fd/<n>`. */
export const O_PATH = 0o10000000;
const PIN = O_PATH | constants.O_NOFOLLOW;

export interface Pinned {
  fh: FileHandle;
  st: Stats;
}

/** A link, a missing parent or a wrong kind on the way to a path the tenant controls. */
export class PinRefused extends Error {}

/** `/proc/self/fd/<n>` of a pinned inode, or of `name` inside a pinned directory. */
export const fdPath = (fh: FileHandle, name = '') => `/proc/self/fd/${fh.fd}${name ? `/${name}` : ''}`;

/** Opens `name` inside the pinned directory `dir` without following it (a link comes back as a link). */
export async function pinChild(dir: FileHandle, name: string): Promise<Pinned> {
  if (!name || name === '.' || name === '..' || name.includes('/'))
    throw new PinRefused(`'${name}' is not a single path component`);
  const fh = await open(fdPath(dir, name), PIN);
  try {
    return { fh, st: await fh.stat() };
  } catch (err) {
    await fh.close();
    throw err;
  }
}

export function kindOf(st: Stats): string {
  if (st.isDirectory()) return 'directory';
  if (st.isFile()) return 'regular file';
  if (st.isSymbolicLink()) return 'link';
  if (st.isBlockDevice() || st.isCharacterDevice()) return 'device file';
  if (st.isFIFO()) return 'named pipe';
  return 'socket';
}

/**
 * Opens `rel` beneath the trusted directory `root`, one component at a time: a link at any
 * component is refused, every component but the last must be a directory. With `create`, a
 * missing component is made as a directory inside its pinned parent. The caller closes `fh`.
 */
export async function pinBeneath(root: string, rel: string, create = false): Promise<Pinned> {
  const rootFh = await open(root, O_PATH | constants.O_DIRECTORY);
  let cur: Pinned = { fh: rootFh, st: null as unknown as Stats };
  const seen: string[] = [];
  try {
    cur.st = await rootFh.stat();
    for (const name of rel.split('/').filter((x) => x !== '' && x !== '.')) {
      if (!cur.st.isDirectory())
        throw new PinRefused(`'${seen.join('/')}' is a ${kindOf(cur.st)}, not a directory`);
      const parent = cur.fh;
      const next = await pinChild(parent, name).catch(async (err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
        if (!create) throw new PinRefused(`'${[...seen, name].join('/')}' does not exist`);
        await mkdir(fdPath(parent, name), { mode: 0o755 }).catch((e: NodeJS.ErrnoException) => {
          if (e.code !== 'EEXIST') throw e;
        });
        return pinChild(parent, name);
      });
      seen.push(name);
      if (next.st.isSymbolicLink()) {
        const target = await readlink(fdPath(parent, name)).catch(() => '?');
        await next.fh.close();
        throw new PinRefused(`'${seen.join('/')}' is a link (-> '${target}'); links are never followed here`);
      }
      await parent.close();
      cur = next;
    }
    return cur;
  } catch (err) {
    await cur.fh.close().catch(() => {});
    throw err;
  }
}

/**
 * Gives the pinned tree (every entry under it, links themselves) to `uid:gid`, each entry reached
 * through its pinned parent, so a directory swapped for a link during the walk is never entered.
 */
export async function chownPinned(node: Pinned, uid: number, gid: number): Promise<void> {
  // chown of /proc/self/fd/<n> follows the magic link to exactly this inode (fchown refuses O_PATH).
  await chown(fdPath(node.fh), uid, gid);
  if (!node.st.isDirectory()) return;
  for (const name of await readdir(fdPath(node.fh))) {
    const child = await pinChild(node.fh, name).catch(() => null); // removed meanwhile
    if (!child) continue;
    try {
      if (child.st.isSymbolicLink()) await lchown(fdPath(node.fh, name), uid, gid);
      else await chownPinned(child, uid, gid);
    } finally {
      await child.fh.close();
    }
  }
}
