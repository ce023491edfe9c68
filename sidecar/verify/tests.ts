// What a verifier gets beyond the base contract: the task's tests (directories of the project
// context, taken from the grader fork's own copy through pinned descriptors, layered in order into
// a root-owned copy) mounted read-only at /tests in the verifier's container only, and the verifier's own variables. The tests' digest (every path, kind and byte)
// goes into the evidence, so a recorded grade names exactly what graded it.
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { lstat, mkdir, readdir, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { CONTEXT_VOLUME, type VerifierSpec } from '../../protocol/spec.ts';
import type { SidecarContext } from '../context.ts';
import { contextWhy, fdPath, kindOf, pinBeneath } from '../docker/pin.ts';
import { PayloadError } from '../payload.ts';
import { LIMITS } from './limits.ts';
import { listPinned, openPinned, type Pinned, pinChild, pinRoot, unpin } from './pinned.ts';

export interface GraderExtras {
  binds: string[];
  env: string[];
  testsDigest: string | null;
}

const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]{0,255}$/;

/** sha256 over the sorted tree: `<path>\0<kind>\0<content or link>\0` per entry. */
export async function treeDigest(root: string): Promise<string> {
  const hash = createHash('sha256');
  const walk = async (rel: string): Promise<void> => {
    for (const name of (await readdir(join(root, rel))).sort()) {
      const path = rel ? `${rel}/${name}` : name;
      const st = await lstat(join(root, path));
      if (st.isDirectory()) {
        hash.update(`${path}\0dir\0`);
        await walk(path);
      } else if (st.isSymbolicLink()) hash.update(`${path}\0link\0${await readlink(join(root, path))}\0`);
      else if (st.isFile()) {
        hash.update(`${path}\0file\0`);
        hash.update(await readFile(join(root, path)));
        hash.update('\0');
      }
    }
  };
  await walk('');
  return `sha256:${hash.digest('hex')}`;
}

/**
 * Copies the tree `src` over `dst` without ever following a link on either side: an entry of a
 * later layer replaces whatever the earlier one left at its path (a link included, so a link of one
 * layer can never redirect the next layer's files out of the copy). Links are copied as links; the
 * verifier sees them inside its own container only. `src` is read through pinned descriptors (it
 * lies in the grader fork's context, which its running services may be changing), within the
 * submission's bounds (`budget` is shared by the layers of one copy).
 */
export async function layer(src: string | Pinned, dst: string, budget = { bytes: 0, files: 0 }, depth = 0) {
  const dir = typeof src === 'string' ? await pinRoot(src) : src;
  try {
    if (depth > LIMITS.depth) throw new Error(`the verifier's tests are deeper than ${LIMITS.depth} levels`);
    for (const name of await listPinned(dir)) {
      const entry = await pinChild(dir, name); // null: removed meanwhile
      if (!entry) continue;
      try {
        await layerEntry(dir, name, entry, join(dst, name), budget, depth);
      } finally {
        await unpin(entry);
      }
    }
  } finally {
    if (typeof src === 'string') await unpin(dir);
  }
}

async function layerEntry(
  dir: Pinned,
  name: string,
  entry: Pinned,
  to: string,
  budget: { bytes: number; files: number },
  depth: number,
): Promise<void> {
  const st = entry.stat;
  // Every entry counts, directories and links too: a tree of empty directories costs inodes and
  // time like files do.
  budget.files++;
  if (budget.files > LIMITS.files)
    throw new Error(`the verifier's tests hold more than ${LIMITS.files} files and directories`);
  const there = await lstat(to).catch(() => null);
  if (st.isDirectory()) {
    if (there && !there.isDirectory()) await rm(to, { force: true });
    if (!there?.isDirectory()) await mkdir(to, { mode: 0o755 });
    return layer(entry, to, budget, depth + 1);
  }
  if (!st.isFile() && !st.isSymbolicLink()) return;
  if (there) await rm(to, { recursive: true, force: true });
  if (st.isSymbolicLink()) return symlink(await readlink(fdPath(dir, name)), to);
  budget.bytes += st.size;
  if (budget.bytes > LIMITS.bytes)
    throw new Error(`the verifier's tests are larger than ${LIMITS.bytes >> 20} MiB`);
  const mode = st.mode & 0o777;
  if (st.size === 0) return writeFile(to, '', { flag: 'wx', mode });
  const fh = await openPinned(entry);
  try {
    // Only the size that was counted is copied, however the file grows meanwhile.
    const from = fh.createReadStream({ autoClose: false, start: 0, end: st.size - 1 });
    await pipeline(from, createWriteStream(to, { flags: 'wx', mode }));
  } finally {
    await fh.close();
  }
}

/** A context directory of the tests, pinned beneath the context (a link on the way is refused). */
async function testsDir(dataset: string, tests: unknown): Promise<Pinned> {
  if (typeof tests !== 'string' || tests === '' || tests.startsWith('/') || tests.split('/').includes('..'))
    throw new PayloadError('verifier.tests must be directories inside the project context');
  const dir = await pinBeneath(dataset, join('files', tests)).catch((err: Error) => {
    throw new Error(
      `the verifier's tests '${tests}' are not a directory of this environment's project context: ${contextWhy(err)}`,
    );
  });
  if (!dir.stat.isDirectory()) {
    await unpin(dir);
    throw new Error(`the verifier's tests '${tests}' are a ${kindOf(dir.stat)}, not a directory`);
  }
  return dir;
}

/**
 * `work` is the verify run's own directory: the tests directories are layered into `<work>/tests`
 * in order (a later one's files replace same-named ones, as Harbor merges a step's tests over the
 * task's), root-owned, and that copy is what the verifier sees.
 */
export async function graderExtras(
  ctx: SidecarContext,
  envId: string,
  verifier: VerifierSpec,
  work: string,
): Promise<GraderExtras> {
  const env: string[] = [];
  for (const [k, v] of Object.entries(verifier.env ?? {})) {
    if (!ENV_KEY.test(k)) throw new PayloadError(`verifier.env.${k.slice(0, 60)} is malformed`);
    env.push(`${k}=${v}`);
  }
  if (verifier.tests === undefined) return { binds: [], env, testsDigest: null };
  const list = Array.isArray(verifier.tests) ? verifier.tests : [verifier.tests];
  if (list.length === 0 || list.length > 16)
    throw new PayloadError('verifier.tests lists 1 to 16 directories');
  // Always a copy, root-owned in the run's own directory: the context's own directory could be
  // swapped for a link by a running service between any check and Docker's mount.
  const dataset = ctx.storage.volumePath(envId, CONTEXT_VOLUME);
  const dir = join(work, 'tests');
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { mode: 0o755 });
  const budget = { bytes: 0, files: 0 };
  for (const t of list) {
    const src = await testsDir(dataset, t);
    try {
      await layer(src, dir, budget);
    } finally {
      await unpin(src);
    }
  }
  return { binds: [`${dir}:/tests:ro`], env, testsDigest: await treeDigest(dir) };
}
