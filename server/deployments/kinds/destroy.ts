// destroy: teardown, verdict. An unreachable host keeps its datasets (nothing is lost by
// accident); the environment is still marked destroyed.
import { type Static, Type } from '@sinclair/typebox';
import { type EnvStatus, getEnv, updateEnv } from '../../envs/store.ts';
import { getHostRow } from '../../hosts/store.ts';
import { defineKind, type PhaseContext, Skip } from '../engine.ts';
import { isReachable, send, targetAfterFailure } from './common.ts';

/** The environment's status before the teardown, restored when a failed teardown cannot be retried. */
const DestroyParams = Type.Object({ status_before: Type.Optional(Type.Unsafe<EnvStatus>(Type.String())) });
type DestroyParams = Static<typeof DestroyParams>;

type Ctx = PhaseContext<unknown, DestroyParams>;

async function teardown(ctx: Ctx) {
  const env = await ctx.env();
  if (!env.HostID) return new Skip({ reason: 'environment was never placed on a host' });
  const host = await getHostRow(ctx.deps.db, env.HostID);
  if (!host || !isReachable(ctx, host.kind, host.id)) {
    return new Skip({ reason: 'host not connected; datasets left in place' });
  }
  ctx.params.status_before = env.Status;
  await updateEnv(ctx.deps.db, env.ID, { status: 'destroying' });
  await send(ctx, await ctx.target(env.HostID), env.ID, 'env.destroy', {});
  return null;
}

/**
 * A teardown that failed may still have run on the host (its stream dropped, the sidecar or the
 * control plane restarted while it ran): the environment would show its old status with nothing
 * behind it. env.destroy is idempotent, so it is sent once more, after the host had its time to
 * come back; only if that fails too does the environment keep the status it had (or `failed`).
 */
async function verdict(ctx: Ctx, failure: { message: string } | null) {
  if (failure) {
    const env = await getEnv(ctx.deps.db, ctx.dep.TeamID, ctx.dep.EnvID);
    if (env?.HostID && env.Status === 'destroying') {
      try {
        await send(ctx, await targetAfterFailure(ctx, env.HostID), env.ID, 'env.destroy', {});
        await updateEnv(ctx.deps.db, env.ID, { status: 'destroyed', endpoints: {} });
        return { status: 'failed' as const, evidence: { destroyed_on_retry: true } };
      } catch (err) {
        const before = ctx.params.status_before ?? 'failed';
        await updateEnv(ctx.deps.db, env.ID, { status: before });
        return { status: 'failed' as const, evidence: { retry: (err as Error).message } };
      }
    }
    return { status: 'failed' as const, evidence: null };
  }
  await updateEnv(ctx.deps.db, ctx.dep.EnvID, { status: 'destroyed', endpoints: {} });
  return { status: 'succeeded' as const, evidence: null };
}

export const destroyKind = defineKind<unknown, DestroyParams>({
  kind: 'destroy',
  params: DestroyParams,
  phases: [{ name: 'teardown', run: teardown }],
  verdict,
});
