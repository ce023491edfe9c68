// Small pieces every kind uses: cleanup targets, sending a command, and the phases kinds share.
import type { CommandKind, Payloads, Results } from '../../../protocol/commands.ts';
import { updateEnv } from '../../envs/store.ts';
import { HostUnavailable } from '../../hosts/command-target.ts';
import type { CommandTarget } from '../../hosts/dispatcher.ts';
import type { AnyPhaseContext, PhaseContext, PhaseDef } from '../engine.ts';

/** How long cleanup after a failure waits for a sidecar whose stream dropped to reconnect. */
export const RECONNECT_WAIT_MS = 30_000;

/**
 * The command target of a host for cleanup after a failure: a sidecar that dropped (or was
 * restarted) usually reconnects within seconds, so it is given that time before giving up.
 */
export async function targetAfterFailure(ctx: AnyPhaseContext, hostId: string): Promise<CommandTarget> {
  if (hostId) await ctx.deps.hub.waitConnected(hostId, RECONNECT_WAIT_MS);
  return ctx.target(hostId);
}

/**
 * After a failed first create or fork: take down whatever the host made of the environment, when
 * the host can be reached now. One that comes back later is cleaned when the late result of its
 * create or fork arrives (deployments/late-results.ts).
 */
export async function removeFromHost(ctx: AnyPhaseContext, envId: string, hostId: string): Promise<void> {
  if (!hostId) return;
  try {
    await send(ctx, await ctx.target(hostId), envId, 'env.destroy', {});
  } catch (err) {
    if (err instanceof HostUnavailable) return;
    ctx.deps.log.warn(
      { deployment: ctx.dep.ID, env: envId, err: (err as Error).message },
      'could not remove a failed environment from its host',
    );
  }
}

export function isReachable(ctx: AnyPhaseContext, hostKind: string, hostId: string): boolean {
  return hostKind !== 'sidecar' || ctx.deps.hub.isConnected(hostId);
}

export async function send<K extends CommandKind>(
  ctx: AnyPhaseContext,
  target: CommandTarget,
  envId: string,
  kind: K,
  payload: Payloads[K],
  timeoutMs?: number,
): Promise<Results[K]> {
  const id = ctx.commandId?.(kind, payload);
  return ctx.deps.dispatcher.run(target, envId, kind, payload, timeoutMs, ctx.signal, undefined, id);
}

export const tookMs = (ctx: AnyPhaseContext): number => Date.now() - ctx.startedAt;

/** The first service runs warm commands and the post-snapshot health check. */
export function firstService(spec: { services: { name: string }[] }): string {
  const s = spec.services[0];
  if (!s) throw new Error('spec has no services');
  return s.name;
}

/**
 * The health phase of kinds that start an environment from a create or a fork: the endpoints the
 * host reported become the environment's.
 */
export const endpointsHealth: PhaseDef<unknown, { endpoints?: Record<string, string> }> = {
  name: 'health',
  async run(ctx) {
    const endpoints = ctx.params.endpoints ?? {};
    await updateEnv(ctx.deps.db, ctx.dep.EnvID, { endpoints });
    return { endpoints };
  },
};

/** The snapshot kind's and verify's capture: every volume under `name`, recorded in params. */
export async function takeSnapshot(
  ctx: PhaseContext<unknown, { snapshot?: string }>,
  hostId: string,
  envId: string,
  name: string,
  keepPaused?: string[],
) {
  const target = await ctx.target(hostId);
  const r = await send(
    ctx,
    target,
    envId,
    'env.snapshot',
    keepPaused ? { name, keep_paused: keepPaused } : { name },
  );
  ctx.params.snapshot = r.snapshot;
  // The host's own steps (pause, capture, unpause, ...) go in the evidence, as a deploy's do: they
  // say where a long frozen_for went.
  return {
    snapshot: r.snapshot,
    datasets: r.datasets,
    frozen_for: r.frozen_for,
    consistent: r.consistent,
    ...(r.timings ? { timings: r.timings } : {}),
  };
}
