// Reading a container's files through descriptors pinned one path component at a time, so a
// name swapped for a symlink between two steps can never send the read elsewhere (spec
// "Isolation guarantees" 3; a sibling once raced `renameat2(RENAME_EXCHANGE)` against a
// path-string walk under /proc/<pid>/root and got host files copied).
//
// Node has no openat(2). `/proc/self/fd/<dirfd>/<name>` is the same lookup: the kernel jumps to
// the object the descriptor holds (not to a path re-read from text), then looks up `name` in it.
// Every step opens with O_PATH|O_NOFOLLOW, which pins the entry itself (a symlink stays a symlink,
// a device or FIFO is never really opened), and its type is read with fstat on that descriptor.
// Only a pinned regular file is reopened for reading, through its own descriptor.
import { constants, type Stats } from 'node:fs';
import { type FileHandle, open, readdir } from 'node:fs/promises';

/** O_PATH is 010000000 on x86-64 and arm64 (Node does not export it). */
const O_PATH = 0o10000000;

export interface Pinned {
  handle: FileHandle;
  stat: Stats;
}

const viaFd = (h: FileHandle) => `/proc/self/fd/${h.fd}`;

function checkName(name: string): void {
  if (!name || name === '.' || name === '..' || name.includes('/') || name.includes('\0'))
    throw new Error(`not a single path component: ${JSON.stringify(name)}`);
}

/** Pins a directory the caller trusts (e.g. /proc/<pid>/root, a magic link to the container's root). */
export async function pinRoot(path: string): Promise<Pinned> {
  const handle = await open(path, O_PATH | constants.O_DIRECTORY);
  return { handle, stat: await handle.stat() };
}

/** Pins `name` inside the pinned directory without following it; null when it does not exist. */
export async function pinChild(dir: Pinned, name: string): Promise<Pinned | null> {
  checkName(name);
  let handle: FileHandle;
  try {
    handle = await open(`${viaFd(dir.handle)}/${name}`, O_PATH | constants.O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw err;
  }
  try {
    return { handle, stat: await handle.stat() };
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/** The names in a pinned directory. */
export async function listPinned(dir: Pinned): Promise<string[]> {
  if (!dir.stat.isDirectory()) throw new Error('not a directory');
  return readdir(viaFd(dir.handle));
}

/** Opens a pinned regular file for reading: the very inode that was pinned, whatever its name is now. */
export async function openPinned(file: Pinned): Promise<FileHandle> {
  if (!file.stat.isFile()) throw new Error('not a regular file');
  return open(viaFd(file.handle), constants.O_RDONLY | constants.O_NOCTTY);
}

export const unpin = (p: Pinned | null) => p?.handle.close().catch(() => {});
