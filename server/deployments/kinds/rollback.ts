// rollback: restore, health, verdict. The version is a healthy snapshot of this environment
// (checked by the request); the verdict makes it current.
import { type Static, Type } from '@sinclair/typebox';
import { getEnv, getVersion, updateEnv } from '../../envs/store.ts';
import { defineKind, type PhaseContext } from '../engine.ts';
import { endpointsHealth, send } from './common.ts';

const RollbackParams = Type.Object({
  version: Type.String(),
  endpoints: Type.Optional(Type.Record(Type.String(), Type.String())),
  snapshot: Type.Optional(Type.String()),
});
export type RollbackParams = Static<typeof RollbackParams>;

type Ctx = PhaseContext<unknown, RollbackParams>;

async function restore(ctx: Ctx) {
  const env = await getEnv(ctx.deps.db, ctx.dep.TeamID, ctx.dep.EnvID);
  const v = await getVersion(ctx.deps.db, ctx.dep.TeamID, ctx.dep.VersionID);
  if (!env || !v) throw new Error('environment or version is gone');
  const target = await ctx.target(env.HostID);
  const r = await send(ctx, target, env.ID, 'env.rollback', { snapshot: v.Snapshot });
  ctx.params.endpoints = r.endpoints;
  ctx.params.snapshot = r.snapshot;
  return { snapshot: r.snapshot };
}

/** The restored endpoints become the environment's; the evidence names the snapshot restored. */
async function health(ctx: Ctx) {
  await endpointsHealth.run(ctx);
  return { restored: ctx.params.snapshot };
}

async function verdict(ctx: Ctx, failure: unknown) {
  if (failure) {
    const env = await getEnv(ctx.deps.db, ctx.dep.TeamID, ctx.dep.EnvID);
    return { status: 'failed' as const, evidence: { kept: env?.CurrentVersionID ?? '' } };
  }
  await updateEnv(ctx.deps.db, ctx.dep.EnvID, { currentVersionId: ctx.dep.VersionID, status: 'running' });
  return { status: 'succeeded' as const, evidence: { version: ctx.dep.VersionID } };
}

export const rollbackKind = defineKind<unknown, RollbackParams>({
  kind: 'rollback',
  params: RollbackParams,
  phases: [
    { name: 'restore', run: restore },
    { name: 'health', run: health },
  ],
  verdict,
});
