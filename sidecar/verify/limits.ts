// The submission rules of verify.collect (spec "Errors" 4, "Limits"): only regular files and
// directories, at most 32 levels deep, 256 MiB and 20,000 files. Reasons are the spec's words.
import type { Stats } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';

export const LIMITS = { bytes: 256 * 1024 * 1024, files: 20_000, depth: 32 } as const;

export class Refusal extends Error {
  readonly path: string;
  readonly reason: string;
  constructor(path: string, reason: string) {
    super(`${path}: ${reason}`);
    this.path = path;
    this.reason = reason;
  }
}

/** The refusal reason for a file type, or null for regular files and directories. */
export function typeReason(st: Stats): string | null {
  if (st.isSymbolicLink()) return 'symlink';
  if (st.isFIFO()) return 'fifo';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'device';
  if (st.isSocket()) return 'socket';
  return st.isFile() || st.isDirectory() ? null : 'not a regular file';
}

/**
 * Walks the finished copy with lstat and throws the first Refusal: the copy is checked as it
 * landed on disk, not as the container claimed it was.
 */
export async function checkTree(dest: string, declared: string[]): Promise<{ files: number; bytes: number }> {
  const tally = { files: 0, bytes: 0 };
  const walk = async (dir: string, inside: string, depth: number, root: string): Promise<void> => {
    const st = await lstat(dir);
    const reason = typeReason(st);
    if (reason) throw new Refusal(inside, reason);
    if (st.isFile()) {
      tally.files++;
      tally.bytes += st.size;
      if (tally.bytes > LIMITS.bytes) throw new Refusal(root, 'submission larger than 256 MiB');
      if (tally.files > LIMITS.files) throw new Refusal(root, 'more than 20000 files');
      return;
    }
    if (depth > LIMITS.depth) throw new Refusal(inside, 'deeper than 32');
    for (const name of await readdir(dir))
      await walk(join(dir, name), `${inside.replace(/\/$/, '')}/${name}`, depth + 1, root);
  };
  for (const path of declared) {
    const at = join(dest, ...path.split('/').filter(Boolean));
    const exists = await lstat(at).then(
      () => true,
      () => false,
    );
    if (exists) await walk(at, path, 0, path);
  }
  return tally;
}
