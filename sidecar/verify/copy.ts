// The copy of verify.collect: declared paths read from a pinned root (a frozen container's
// /proc/<pid>/root) into a host directory, never following a symlink at any component (see
// pinned.ts). Every entry is typed by fstat on the descriptor that pins it, so what is copied is
// exactly what was checked. Limits (files, bytes, depth) are counted while copying.
import { mkdir, open } from 'node:fs/promises';
import { join } from 'node:path';
import { LIMITS, Refusal, typeReason } from './limits.ts';
import { listPinned, openPinned, type Pinned, pinChild, unpin } from './pinned.ts';

export interface Tally {
  files: number;
  bytes: number;
}

export interface CopyResult extends Tally {
  missing: string[];
}

async function copyFile(src: Pinned, dst: string, tally: Tally, declared: string): Promise<void> {
  const input = await openPinned(src);
  try {
    const output = await open(dst, 'wx', src.stat.mode & 0o755);
    try {
      const buf = Buffer.allocUnsafe(1 << 20);
      for (;;) {
        const { bytesRead } = await input.read(buf, 0, buf.length, null);
        if (bytesRead === 0) break;
        tally.bytes += bytesRead;
        if (tally.bytes > LIMITS.bytes) throw new Refusal(declared, 'submission larger than 256 MiB');
        await output.write(buf, 0, bytesRead);
      }
    } finally {
      await output.close();
    }
  } finally {
    await input.close();
  }
  tally.files++;
  if (tally.files > LIMITS.files) throw new Refusal(declared, 'more than 20000 files');
}

async function copyTree(
  src: Pinned,
  dst: string,
  inContainer: string,
  depth: number,
  tally: Tally,
  declared: string,
): Promise<void> {
  const reason = typeReason(src.stat);
  if (reason) throw new Refusal(inContainer, reason);
  if (src.stat.isFile()) return copyFile(src, dst, tally, declared);
  if (depth > LIMITS.depth) throw new Refusal(inContainer, 'deeper than 32');
  await mkdir(dst, { mode: 0o755 });
  for (const name of (await listPinned(src)).sort()) {
    const child = await pinChild(src, name);
    if (!child) continue; // removed since the listing (only possible when nothing is frozen)
    try {
      await copyTree(
        child,
        join(dst, name),
        `${inContainer.replace(/\/$/, '')}/${name}`,
        depth + 1,
        tally,
        declared,
      );
    } finally {
      await unpin(child);
    }
  }
}

/** Pins the declared path's components from the root: real directories only on the way. */
async function locate(root: Pinned, path: string, declared = path): Promise<Pinned | 'missing'> {
  const parts = path.split('/').filter(Boolean);
  // Refusals name the declared path: `path` is its tail below `root` (a mount's directory under gVisor).
  const base = declared.slice(0, declared.length - path.length).replace(/\/$/, '');
  let at: Pinned = root;
  for (const [i, part] of parts.entries()) {
    const next = await pinChild(at, part);
    if (at !== root) await unpin(at);
    if (!next) return 'missing';
    at = next;
    if (at.stat.isSymbolicLink()) {
      await unpin(at);
      throw new Refusal(`${base}/${parts.slice(0, i + 1).join('/')}`, 'symlink');
    }
    if (i < parts.length - 1 && !at.stat.isDirectory()) {
      await unpin(at);
      return 'missing';
    }
  }
  return at;
}

/**
 * Copies each declared path (absolute, normalised, none inside another) from `root` into
 * `dest/<path>`. Throws a Refusal for the first file type or limit the rules refuse.
 */
export async function copyDeclared(
  root: Pinned | Source,
  paths: string[],
  dest: string,
): Promise<CopyResult> {
  const tally: Tally = { files: 0, bytes: 0 };
  const missing: string[] = [];
  for (const path of paths) {
    const src = typeof root === 'function' ? await root(path) : { root, inner: path };
    try {
      const at = await locate(src.root, src.inner, path);
      if (at === 'missing') {
        missing.push(path);
        continue;
      }
      try {
        const target = join(dest, ...path.split('/').filter(Boolean));
        await mkdir(join(target, '..'), { recursive: true, mode: 0o755 });
        await copyTree(at, target, path, 0, tally, path);
      } finally {
        if (at !== src.root) await unpin(at);
      }
    } finally {
      if (src.root !== root) await unpin(src.root);
    }
  }
  return { ...tally, missing };
}

/**
 * Where a declared path is read from when no one root holds them all (a gVisor container): a
 * directory pinned for this path alone (unpinned after it) and the path's tail inside it.
 */
export type Source = (path: string) => Promise<{ root: Pinned; inner: string }>;
