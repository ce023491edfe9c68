// env.destroy: bring the stack down (containers, network, firewall rules) and remove every
// dataset and snapshot of the environment, its verify work directories (submission copies,
// grader logs) and the stored results of its commands, leaving nothing it held behind. Forks
// still copying out of this environment's snapshots finish first. Then the built images no
// environment uses any more (and older than the keep bound) are collected.
import type { Results } from '../../protocol/commands.ts';
import { loadSpec, type SidecarContext, stackOf } from '../context.ts';
import { DEFAULT_BUILD_KEEP_MS } from '../docker/build-gc.ts';
import { projectName } from '../docker/render.ts';
import { type CommandContext, forgetEnvCommands } from '../runner.ts';
import { removeVerifyDirs } from '../verify/collect.ts';

export async function envDestroy(
  ctx: SidecarContext,
  cmd: CommandContext<'env.destroy'>,
): Promise<Results['env.destroy']> {
  const readers = ctx.readers.get(cmd.envId);
  if (readers?.size) {
    cmd.progress(
      `waiting for ${readers.size} fork${readers.size === 1 ? '' : 's'} copying from this environment`,
    );
    await Promise.allSettled([...readers]);
  }
  // Down works from labels when the spec is gone (a half-created environment after a crash).
  const spec = (await loadSpec(ctx, cmd.envId)) ?? { services: [], volumes: [], egress: 'deny' as const };
  ctx.engineState.spares.dropProject(projectName(cmd.envId));
  await stackOf(ctx, cmd.envId, spec).down();
  await ctx.storage.destroy(cmd.envId);
  await removeVerifyDirs(ctx, cmd.envId);
  await forgetEnvCommands(ctx.dataDir, cmd.envId);
  ctx.readers.delete(cmd.envId);
  // Its built images may be unused now; a failure to collect them never fails the destroy.
  await ctx.builds
    .collect(ctx.docker, ctx.dataDir, ctx.buildKeepMs ?? DEFAULT_BUILD_KEEP_MS)
    .then((r) => r.removed.length && cmd.progress(`removed ${r.removed.length} unused built image(s)`))
    .catch((err: Error) => ctx.log(`collecting built images after destroying ${cmd.envId}: ${err.message}`));
  return { destroyed: cmd.envId };
}
