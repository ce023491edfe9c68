// verify.collect: freeze the stack and copy each declared path of the agent service into a
// root-owned directory on the host, never following a symlink. Every service is frozen, not only
// the agent: a sibling sharing the agent's volume could otherwise swap a collected directory for
// a symlink mid-copy. The copy reads through the frozen container's root
// (/proc/<pid>/root) with every component pinned by a descriptor (copy.ts, pinned.ts), so even an
// unfrozen writer could not point it at the host. Then the copy itself is walked with lstat and
// checked against the limits. Anything refused removes the whole copy. The agent stays paused;
// the other services are unpaused again.
import { appendFile, chmod, mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Results } from '../../protocol/commands.ts';
import { sleep } from '../../shared/concurrency.ts';
import { engineOf, requireSpec, type SidecarContext } from '../context.ts';
import type { DockerEngine } from '../docker/engine.ts';
import { GVISOR_DOCKER_RUNTIME } from '../docker/render.ts';
import { PayloadError } from '../payload.ts';
import type { CommandContext } from '../runner.ts';
import { copyDeclared } from './copy.ts';
import { gvisorSource } from './gvisor-source.ts';
import { checkTree, Refusal } from './limits.ts';
import { pinRoot, unpin } from './pinned.ts';
import { processList } from './processes.ts';

export const verifyDir = (ctx: SidecarContext, id: string) => join(ctx.dataDir, 'verify', id);

/** The environment a verify work directory belongs to: the agent's (the grader's fork only reads it). */
const OWNERS = 'envs';

/** Records that `envId` uses the verify work directory `id`, so destroying it removes the directory. */
export async function claimVerifyDir(ctx: SidecarContext, id: string, envId: string): Promise<void> {
  await mkdir(verifyDir(ctx, id), { recursive: true, mode: 0o700 });
  await appendFile(join(verifyDir(ctx, id), OWNERS), `${envId}\n`, { mode: 0o600 });
}

/** Removes every verify work directory `envId` used (submission copies and grader logs). */
export async function removeVerifyDirs(ctx: SidecarContext, envId: string): Promise<number> {
  const root = join(ctx.dataDir, 'verify');
  let removed = 0;
  for (const id of await readdir(root).catch(() => [] as string[])) {
    const owners = await readFile(join(root, id, OWNERS), 'utf8').catch(() => '');
    if (!owners.split('\n').includes(envId)) continue;
    await rm(join(root, id), { recursive: true, force: true });
    removed++;
  }
  return removed;
}

/** Declared paths without the ones inside another declared path (copied with it already). */
function outermost(paths: string[]): string[] {
  const norm = [...new Set(paths.map((x) => `/${x.split('/').filter(Boolean).join('/')}`))].sort();
  for (const x of norm) {
    if (x === '/') throw new PayloadError("collect path '/' would copy the whole container");
    if (x.split('/').some((c) => c === '.' || c === '..'))
      throw new PayloadError(`collect path '${x}' must not contain '.' or '..'`);
  }
  return norm.filter((x) => !norm.some((y) => y !== x && x.startsWith(`${y}/`)));
}

export async function verifyCollect(
  ctx: SidecarContext,
  cmd: CommandContext<'verify.collect'>,
): Promise<Results['verify.collect']> {
  const { id, agent_service: agent } = cmd.payload;
  const paths = outermost(cmd.payload.collect);
  await requireSpec(ctx, cmd.envId);
  const engine = engineOf(ctx, cmd.envId);
  await engine.find(agent);
  cmd.progress(`freezing the stack (agent service ${agent})`);
  const frozen = await engine.pause();
  let result: Results['verify.collect'] | undefined;
  try {
    result = await copyOut(ctx, cmd, engine, id, agent, paths);
    return result;
  } finally {
    // The agent stays frozen for the snapshot; a refused submission gets none, so `resume` is honoured here.
    const keep = result?.refused.length && cmd.payload.resume === true ? [] : [agent];
    const thaw = frozen.filter((s) => !keep.includes(s));
    if (thaw.length) await engine.unpause(thaw);
  }
}

async function copyOut(
  ctx: SidecarContext,
  cmd: CommandContext,
  engine: DockerEngine,
  id: string,
  agent: string,
  paths: string[],
): Promise<Results['verify.collect']> {
  // Docker 20.10 applies containerd's pause/resume events late: under load a resume event of an
  // earlier unpause can arrive after this freeze and report the frozen agent running for a moment.
  // The paused event follows it, so wait (bounded) for the report instead of failing on it.
  let info = await engine.inspect(agent);
  for (
    const deadline = Date.now() + 10_000;
    info.State.Running && !info.State.Paused && Date.now() < deadline;
  ) {
    await sleep(20);
    info = await engine.inspect(agent);
  }
  if (!info.State.Pid || !info.State.Paused)
    throw new Error(`agent service '${agent}' has no frozen process to collect from`);
  // Under gVisor the host's process is the sandbox, whose root is not the agent's (gvisor-source.ts).
  const gvisor = info.HostConfig.Runtime === GVISOR_DOCKER_RUNTIME;
  const root = gvisor ? null : await pinRoot(`/proc/${info.State.Pid}/root`);
  const dest = join(verifyDir(ctx, id), 'submission');
  // What the agent left running at freeze time (a daemon shows up): part of the grading record.
  const processes = await processList(ctx.docker, info.Id);
  try {
    // The pid must still be the frozen agent's after the root was pinned (not a recycled pid).
    const again = await engine.inspect(agent);
    if (again.State.Pid !== info.State.Pid || !again.State.Paused)
      throw new Error(`agent service '${agent}' changed while it was being frozen`);
    await rm(dest, { recursive: true, force: true });
    await claimVerifyDir(ctx, id, cmd.envId);
    // Root-owned and 0700 (spec "Isolation guarantees"); the verifier reads it as uid 0.
    await mkdir(dest, { recursive: true, mode: 0o700 }); // a umask only removes bits
    await chmod(verifyDir(ctx, id), 0o700);
    const copied = await copyDeclared(root ?? gvisorSource(again), paths, dest);
    cmd.progress('checking the copy');
    await checkTree(dest, paths);
    return { files: copied.files, bytes: copied.bytes, missing: copied.missing, refused: [], processes };
  } catch (err) {
    if (!(err instanceof Refusal)) throw err;
    await rm(dest, { recursive: true, force: true });
    return { files: 0, bytes: 0, missing: [], refused: [`${err.path}: ${err.reason}`], processes };
  } finally {
    if (root) await unpin(root);
  }
}
