// verify.collect: freeze the agent service and copy each declared path into a root-owned
// directory on the host, never following a symlink. The copy is read through the frozen
// container's root (/proc/<pid>/root): every path component is lstat'ed and only real
// directories are entered, so an agent cannot point the copy at the host (an absolute symlink
// would resolve against the host's root). Then the copy itself is walked with lstat and checked
// against the limits. Anything refused removes the whole copy. The agent stays paused.
import { constants } from 'node:fs';
import { chmod, lstat, mkdir, open, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Results } from '../../protocol/commands.ts';
import { requireSpec, type SidecarContext } from '../context.ts';
import { Engine } from '../docker/engine.ts';
import { projectName } from '../docker/render.ts';
import * as p from '../payload.ts';
import type { CommandContext } from '../runner.ts';
import { checkTree, LIMITS, Refusal, typeReason } from './limits.ts';
import { processList } from './processes.ts';

export const verifyDir = (ctx: SidecarContext, id: string) => join(ctx.dataDir, 'verify', id);

interface Tally {
  files: number;
  bytes: number;
}

async function copyFile(
  src: string,
  dst: string,
  mode: number,
  tally: Tally,
  declared: string,
): Promise<void> {
  const input = await open(src, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const output = await open(dst, 'wx', mode & 0o755);
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
  src: string,
  dst: string,
  inContainer: string,
  depth: number,
  tally: Tally,
  declared: string,
): Promise<void> {
  const st = await lstat(src);
  const reason = typeReason(st);
  if (reason) throw new Refusal(inContainer, reason);
  if (st.isFile()) return copyFile(src, dst, st.mode, tally, declared);
  if (depth > LIMITS.depth) throw new Refusal(inContainer, 'deeper than 32');
  await mkdir(dst, { mode: 0o755 });
  for (const name of (await readdir(src)).sort()) {
    await copyTree(
      join(src, name),
      join(dst, name),
      `${inContainer.replace(/\/$/, '')}/${name}`,
      depth + 1,
      tally,
      declared,
    );
  }
}

/** Checks the declared path's ancestors inside the container root: real directories only. */
async function locate(root: string, path: string): Promise<'missing' | string> {
  const parts = path.split('/').filter(Boolean);
  let at = root;
  for (const [i, part] of parts.entries()) {
    at = join(at, part);
    let st: Awaited<ReturnType<typeof lstat>>;
    try {
      st = await lstat(at);
    } catch {
      return 'missing';
    }
    if (st.isSymbolicLink()) throw new Refusal(`/${parts.slice(0, i + 1).join('/')}`, 'symlink');
    if (i < parts.length - 1 && !st.isDirectory()) return 'missing';
  }
  return at;
}

/** Declared paths without the ones inside another declared path (copied with it already). */
function outermost(paths: string[]): string[] {
  const norm = [...new Set(paths.map((x) => `/${x.split('/').filter(Boolean).join('/')}`))].sort();
  for (const x of norm)
    if (x === '/') throw new p.PayloadError("collect path '/' would copy the whole container");
  return norm.filter((x) => !norm.some((y) => y !== x && x.startsWith(`${y}/`)));
}

export async function verifyCollect(
  ctx: SidecarContext,
  cmd: CommandContext,
): Promise<Results['verify.collect']> {
  const id = p.str(cmd.payload, 'id', { name: true });
  const agent = p.str(cmd.payload, 'agent_service', { name: true });
  const paths = outermost(p.strList(cmd.payload, 'collect').map((x) => p.absolutePath(x, 'collect path')));
  await requireSpec(ctx, cmd.envId);
  const engine = new Engine(projectName(cmd.envId), ctx.docker);
  cmd.progress(`freezing agent service ${agent}`);
  await engine.pause([agent]);
  const info = await engine.inspect(agent);
  if (!info.State.Pid) throw new Error(`agent service '${agent}' has no running process to collect from`);
  const root = `/proc/${info.State.Pid}/root`;
  const processes = await processList(ctx.docker, info.Id);

  const dest = join(verifyDir(ctx, id), 'submission');
  await rm(dest, { recursive: true, force: true });
  // Root-owned and 0700 (spec "Isolation guarantees"); the verifier reads it as uid 0.
  await mkdir(dest, { recursive: true, mode: 0o700 }); // a umask only removes bits
  await chmod(verifyDir(ctx, id), 0o700);
  const tally: Tally = { files: 0, bytes: 0 };
  const missing: string[] = [];
  const refused: string[] = [];
  try {
    for (const path of paths) {
      const at = await locate(root, path);
      if (at === 'missing') {
        missing.push(path);
        continue;
      }
      const target = join(dest, ...path.split('/').filter(Boolean));
      await mkdir(join(target, '..'), { recursive: true, mode: 0o755 });
      await copyTree(at, target, path, 0, tally, path);
    }
    cmd.progress('checking the copy');
    await checkTree(dest, paths);
  } catch (err) {
    if (!(err instanceof Refusal)) throw err;
    refused.push(`${err.path}: ${err.reason}`);
  }
  if (refused.length) await rm(dest, { recursive: true, force: true });
  return {
    files: refused.length ? 0 : tally.files,
    bytes: refused.length ? 0 : tally.bytes,
    missing,
    refused,
    processes,
  };
}
