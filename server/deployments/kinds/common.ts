// Small pieces every kind uses: the command target of an environment's host, and the shapes
// evidence takes from command results.
import type { CommandKind, Payloads, Results } from '../../../protocol/commands.ts';
import { commandTarget, HostUnavailable } from '../../hosts/command-target.ts';
import type { CommandTarget } from '../../hosts/dispatcher.ts';
import type { PhaseContext } from '../engine.ts';

/** The command target for a host of the deployment's team; throws when it cannot take commands. */
export function targetOf(ctx: PhaseContext<unknown>, hostId: string): Promise<CommandTarget> {
  return commandTarget(ctx.deps.db, ctx.deps.hub, ctx.dep.TeamID, hostId);
}

/** How long cleanup after a failure waits for a sidecar whose stream dropped to reconnect. */
export const RECONNECT_WAIT_MS = 30_000;

/**
 * The command target of a host for cleanup after a failure: a sidecar that dropped (or was
 * restarted) usually reconnects within seconds, so it is given that time before giving up.
 */
export async function targetAfterFailure(ctx: PhaseContext<unknown>, hostId: string): Promise<CommandTarget> {
  if (hostId) await ctx.deps.hub.waitConnected(hostId, RECONNECT_WAIT_MS);
  return targetOf(ctx, hostId);
}

/**
 * After a failed first create or fork: take down whatever the host made of the environment, when
 * the host can be reached now. One that comes back later is cleaned when the late result of its
 * create or fork arrives (deployments/late-results.ts).
 */
export async function removeFromHost(
  ctx: PhaseContext<unknown>,
  envId: string,
  hostId: string,
): Promise<void> {
  if (!hostId) return;
  try {
    await send(ctx, await targetOf(ctx, hostId), envId, 'env.destroy', {});
  } catch (err) {
    if (err instanceof HostUnavailable) return;
    ctx.deps.log.warn(
      { deployment: ctx.dep.ID, env: envId, err: (err as Error).message },
      'could not remove a failed environment from its host',
    );
  }
}

export function isReachable(ctx: PhaseContext<unknown>, hostKind: string, hostId: string): boolean {
  return hostKind !== 'sidecar' || ctx.deps.hub.isConnected(hostId);
}

export async function send<K extends CommandKind>(
  ctx: PhaseContext<unknown>,
  target: CommandTarget,
  envId: string,
  kind: K,
  payload: Payloads[K],
  timeoutMs?: number,
): Promise<Results[K]> {
  return ctx.deps.dispatcher.run(target, envId, kind, payload, timeoutMs, ctx.signal);
}

export const tookMs = (ctx: PhaseContext<unknown>): number => Date.now() - ctx.startedAt;

/** The first service runs warm commands and the post-snapshot health check. */
export function firstService(spec: { services: { name: string }[] }): string {
  const s = spec.services[0];
  if (!s) throw new Error('spec has no services');
  return s.name;
}
