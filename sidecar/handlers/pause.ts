// env.pause / env.unpause: freeze or thaw every container of the stack (spec "Command kinds"). A
// pause first gives the exec default service (the agent, else the first service) a spare exec
// (docker/spare.ts), so the first exec after the thaw — a warm-pool claim's — skips
// Docker's exec start. The wait for it is bounded: the pause happens anyway.
import type { Results } from '../../protocol/commands.ts';
import { settledWithin } from '../../shared/concurrency.ts';
import { engineOf, requireSpec, type SidecarContext, stackOf } from '../context.ts';
import type { DockerEngine, ServiceContainer } from '../docker/engine.ts';
import { SPARE_READY_WAIT_MS } from '../docker/spare.ts';
import type { CommandContext } from '../runner.ts';

export async function envPause(
  ctx: SidecarContext,
  cmd: CommandContext<'env.pause'>,
): Promise<Results['env.pause']> {
  const spec = await requireSpec(ctx, cmd.envId);
  const engine = stackOf(ctx, cmd.envId, spec).engine;
  const all = await engine.containers();
  const running = all.filter((c) => c.state === 'running');
  await settledWithin(primeSpare(engine, spec.agent ?? spec.services[0]?.name, running), SPARE_READY_WAIT_MS);
  await engine.pauseHeld(running);
  return { services: running.map((c) => c.service) };
}

export async function envUnpause(
  ctx: SidecarContext,
  cmd: CommandContext<'env.unpause'>,
): Promise<Results['env.unpause']> {
  // A stack this process paused is on this host: its thaw (a warm-pool claim's) reads no spec
  // file, whose read waits in the thread pool behind a refill fork's copies.
  const engine = engineOf(ctx, cmd.envId);
  if (engine.holdsPaused()) return { services: await engine.unpause() };
  return { services: await stackOf(ctx, cmd.envId, await requireSpec(ctx, cmd.envId)).engine.unpause() };
}

/**
 * Starts a spare in `service`'s running container (listed now unless given); resolves whether one
 * is ready. Callers bound the wait and freeze anyway.
 */
export async function primeSpare(
  engine: DockerEngine,
  service: string | undefined,
  running?: ServiceContainer[],
): Promise<boolean> {
  if (!service) return false;
  const list = running ?? (await engine.containers());
  const target = list.find((c) => c.service === service && c.state === 'running');
  return target ? engine.spares.prepare(engine.docker, engine.project, target.service, target.id) : false;
}
