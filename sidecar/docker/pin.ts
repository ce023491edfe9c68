// Paths inside a tree that containers can write (the project context), opened so that what was
// checked is what is used: every component is pinned relative to its already-pinned parent with
// O_PATH|O_NOFOLLOW (verify/pinned.ts), so a link at any component is seen (and refused), never
// followed, and the descriptor that results names one inode for good, whatever is renamed or
// swapped afterwards. It is used through `/proc/self/fd/<n>`, which the kernel resolves to exactly
// that inode (reading, chown, mounting), never by its path name again.
import type { Stats } from 'node:fs';
import { chown, lchown, mkdir, readlink } from 'node:fs/promises';
import { listPinned, type Pinned, pinChild, pinRoot, unpin } from '../verify/pinned.ts';

export type { Pinned };

/** A link, a missing component or a wrong kind on the way to a path the tenant controls. */
export class PinRefused extends Error {}

/** A refusal of `pinBeneath(dataset, 'files/<path>')` in the compose file's terms (`./<path>`). */
export const contextWhy = (err: Error) =>
  err instanceof PinRefused ? err.message.replace(/^'files\/?/, "'./") : err.message;

/** `/proc/self/fd/<n>` of a pinned inode, or of `name` inside a pinned directory. */
export const fdPath = (p: Pinned, name = '') => `/proc/self/fd/${p.handle.fd}${name ? `/${name}` : ''}`;

export function kindOf(st: Stats): string {
  if (st.isDirectory()) return 'directory';
  if (st.isFile()) return 'regular file';
  if (st.isSymbolicLink()) return 'link';
  if (st.isBlockDevice() || st.isCharacterDevice()) return 'device file';
  if (st.isFIFO()) return 'named pipe';
  return 'socket';
}

/**
 * Pins `rel` beneath the trusted directory `root`, one component at a time: a link at any
 * component is refused, every component but the last must be a directory. With `create`, a
 * missing component is made as a directory inside its pinned parent. The caller unpins it.
 */
export async function pinBeneath(root: string, rel: string, create = false): Promise<Pinned> {
  let cur = await pinRoot(root);
  const seen: string[] = [];
  try {
    for (const name of rel.split('/').filter((x) => x !== '' && x !== '.')) {
      if (!cur.stat.isDirectory())
        throw new PinRefused(`'${seen.join('/')}' is a ${kindOf(cur.stat)}, not a directory`);
      seen.push(name);
      let next = await pinChild(cur, name);
      if (!next && create) {
        await mkdir(fdPath(cur, name), { mode: 0o755 }).catch((e: NodeJS.ErrnoException) => {
          if (e.code !== 'EEXIST') throw e;
        });
        next = await pinChild(cur, name);
      }
      if (!next) throw new PinRefused(`'${seen.join('/')}' does not exist`);
      if (next.stat.isSymbolicLink()) {
        const target = await readlink(fdPath(cur, name)).catch(() => '?');
        await unpin(next);
        throw new PinRefused(`'${seen.join('/')}' is a link (-> '${target}'); links are never followed here`);
      }
      await unpin(cur);
      cur = next;
    }
    return cur;
  } catch (err) {
    await unpin(cur);
    throw err;
  }
}

/**
 * Gives the pinned tree (every entry under it, links themselves) to `uid:gid`, each entry reached
 * through its pinned parent, so a directory swapped for a link during the walk is never entered.
 */
export async function chownPinned(node: Pinned, uid: number, gid: number): Promise<void> {
  // chown of /proc/self/fd/<n> follows the magic link to exactly this inode (fchown refuses O_PATH).
  await chown(fdPath(node), uid, gid);
  if (!node.stat.isDirectory()) return;
  for (const name of await listPinned(node)) {
    const child = await pinChild(node, name); // null: removed meanwhile
    if (!child) continue;
    try {
      if (child.stat.isSymbolicLink()) await lchown(fdPath(node, name), uid, gid);
      else await chownPinned(child, uid, gid);
    } finally {
      await unpin(child);
    }
  }
}
