// destroy: teardown, verdict. An unreachable host keeps its datasets (nothing is lost by
// accident); the environment is still marked destroyed.
import { type EnvStatus, getEnv, updateEnv } from '../../envs/store.ts';
import { getHostRow } from '../../hosts/store.ts';
import { type KindDef, type RunContext, Skip } from '../engine.ts';
import { isReachable, send, targetOf } from './common.ts';

type Ctx = RunContext<unknown>;

async function teardown(ctx: Ctx) {
  const env = await getEnv(ctx.deps.db, ctx.dep.TeamID, ctx.dep.EnvID);
  if (!env) throw new Error('environment no longer exists');
  if (!env.HostID) return new Skip({ reason: 'environment was never placed on a host' });
  const host = await getHostRow(ctx.deps.db, env.HostID);
  if (!host || !isReachable(ctx, host.kind, host.id)) {
    return new Skip({ reason: 'host not connected; datasets left in place' });
  }
  ctx.params.status_before = env.Status;
  await updateEnv(ctx.deps.db, env.ID, { status: 'destroying' });
  await send(ctx, await targetOf(ctx, env.HostID), env.ID, 'env.destroy', {});
  return null;
}

async function verdict(ctx: Ctx, failure: unknown) {
  if (failure) {
    // A failed destroy changes nothing: the environment keeps the status it had.
    const before = ctx.params.status_before as EnvStatus | undefined;
    if (before) await updateEnv(ctx.deps.db, ctx.dep.EnvID, { status: before });
    return { status: 'failed' as const, evidence: null };
  }
  await updateEnv(ctx.deps.db, ctx.dep.EnvID, { status: 'destroyed', endpoints: {} });
  return { status: 'succeeded' as const, evidence: null };
}

export const destroyKind: KindDef<unknown> = {
  kind: 'destroy',
  phases: [{ name: 'teardown', run: teardown }],
  verdict,
};
