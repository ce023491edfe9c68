// File system entries of a container: one path's stat from the Engine API (no program needed in
// the image), and a directory's listing by `find` inside the container (a shell and find, with
// GNU find's -printf or else busybox/coreutils stat). Each listed record is a header line then the
// path NUL-terminated, so a name holding a newline is read exactly.
import { posix } from 'node:path';
import type Docker from 'dockerode';
import type { FsEntry } from '../../protocol/fs.ts';
import { MODE_DIR, MODE_SYMLINK, type PathStat, statPath } from '../docker/archive.ts';
import { execHead } from './tools.ts';

// Go's os.FileMode bits in the engine's path stat.
const GO_SPECIAL = (2 ** 26) | (2 ** 25) | (2 ** 24) | (2 ** 21) | (2 ** 19); // device, pipe, socket, char device, irregular
const GO_SETUID = 2 ** 23;
const GO_SETGID = 2 ** 22;
const GO_STICKY = 2 ** 20;

/** An entry and its inode (a watch tells a rename by it; the API's record has no inode). */
export interface Listed {
  entry: FsEntry;
  inode: string;
}

export function entryOfStat(path: string, s: PathStat): FsEntry {
  const m = s.mode;
  const type =
    (m & MODE_DIR) !== 0
      ? 'dir'
      : (m & MODE_SYMLINK) !== 0
        ? 'symlink'
        : (m & GO_SPECIAL) !== 0
          ? 'other'
          : 'file';
  const mode =
    (m & 0o777) |
    ((m & GO_SETUID) !== 0 ? 0o4000 : 0) |
    ((m & GO_SETGID) !== 0 ? 0o2000 : 0) |
    ((m & GO_STICKY) !== 0 ? 0o1000 : 0);
  const when = new Date(s.mtime);
  return {
    name: path === '/' ? '/' : posix.basename(path),
    path,
    type,
    size: s.size,
    mode,
    mtime: Number.isNaN(when.getTime()) ? new Date(0).toISOString() : when.toISOString(),
  };
}

/** A path as the API takes it: absolute, normalised, without a trailing slash (but `/`). */
export function cleanPath(path: string): string {
  const p = posix.normalize(path);
  return p.length > 1 && p.endsWith('/') ? p.slice(0, -1) : p;
}

/** The path's own stat (a symlink is the link), or null when it does not exist. */
export async function statEntry(container: Docker.Container, service: string, path: string) {
  const s = await statPath(container, service, path);
  return s ? { entry: entryOfStat(path, s), stat: s } : null;
}

const LIST_SCRIPT = [
  `if find -H "$1" -maxdepth 0 -printf '' >/dev/null 2>&1; then`,
  `  exec find -H "$1" -mindepth 1 -maxdepth "$2" -printf '%y %m %s %T@ %i\\n%p\\0'`,
  'fi',
  `exec find -H "$1" -mindepth 1 -maxdepth "$2" -exec stat -c '%f %s %Y %i' {} ';' -print0`,
].join('\n');

export const LIST_NEEDS =
  'listing needs /bin/sh and find (GNU findutils, or busybox/coreutils find and stat)';

/** The type bits of st_mode (S_IFMT): regular file, directory, symbolic link. */
function kindOf(mode: number): FsEntry['type'] {
  const ifmt = mode & 0o170000;
  if (ifmt === 0o100000) return 'file';
  if (ifmt === 0o040000) return 'dir';
  if (ifmt === 0o120000) return 'symlink';
  return 'other';
}
const LETTER: Record<string, FsEntry['type']> = { f: 'file', d: 'dir', l: 'symlink' };

/** One record's header: GNU `%y %m %s %T@ %i` (5 fields) or stat's `%f %s %Y %i` (4 fields). */
function parseHeader(line: string): Omit<FsEntry, 'name' | 'path'> & { inode: string } {
  const f = line.split(' ');
  if (f.length === 5) {
    const [letter, mode, size, mtime, inode] = f;
    return {
      type: LETTER[letter] ?? 'other',
      mode: Number.parseInt(mode, 8) & 0o7777,
      size: Number(size),
      mtime: new Date(Number(mtime) * 1000).toISOString(),
      inode,
    };
  }
  const [raw, size, mtime, inode] = f;
  const m = Number.parseInt(raw, 16);
  return {
    type: kindOf(m),
    mode: m & 0o7777,
    size: Number(size),
    mtime: new Date(Number(mtime) * 1000).toISOString(),
    inode: inode ?? '',
  };
}

export function parseListing(out: Buffer, limit: number): { listed: Listed[]; complete: boolean } {
  const listed: Listed[] = [];
  let at = 0;
  while (at < out.length && listed.length < limit) {
    const nl = out.indexOf(0x0a, at);
    if (nl < 0) return { listed, complete: false };
    const nul = out.indexOf(0x00, nl + 1);
    if (nul < 0) return { listed, complete: false };
    const head = parseHeader(out.subarray(at, nl).toString('utf8'));
    const path = out.subarray(nl + 1, nul).toString('utf8');
    at = nul + 1;
    if (!Number.isFinite(head.size) || Number.isNaN(Date.parse(head.mtime))) continue;
    const { inode, ...rest } = head;
    listed.push({ entry: { name: posix.basename(path), path, ...rest }, inode });
  }
  return { listed, complete: at >= out.length };
}

/** Bytes of listing kept for `limit` entries: a header and a path of up to 4 KiB each. */
const bytesFor = (limit: number) => Math.min(64 * 1024 * 1024, limit * 4200);

/**
 * The entries under `dir` down to `depth` levels, at most `limit` (truncated says there were more).
 * `dir` must be a directory (or a link to one): callers stat it first.
 */
export async function listDir(
  container: Docker.Container,
  service: string,
  dir: string,
  depth: number,
  limit: number,
): Promise<{ listed: Listed[]; truncated: boolean }> {
  const r = await execHead(
    container,
    service,
    ['/bin/sh', '-c', LIST_SCRIPT, 'sh', dir, String(depth)],
    LIST_NEEDS,
    bytesFor(limit),
  );
  const { listed, complete } = parseListing(r.stdout, limit);
  return { listed, truncated: r.exitCode === null || !complete };
}
