// rollback: restore, health, verdict. The version is a healthy snapshot of this environment
// (checked by the request); the verdict makes it current.
import { getEnv, getVersion, updateEnv } from '../../envs/store.ts';
import type { KindDef, PhaseContext } from '../engine.ts';
import { send, targetOf } from './common.ts';

type Ctx = PhaseContext<unknown>;

async function restore(ctx: Ctx) {
  const env = await getEnv(ctx.deps.db, ctx.dep.TeamID, ctx.dep.EnvID);
  const v = await getVersion(ctx.deps.db, ctx.dep.TeamID, ctx.dep.VersionID);
  if (!env || !v) throw new Error('environment or version is gone');
  const target = await targetOf(ctx, env.HostID);
  const r = await send(ctx, target, env.ID, 'env.rollback', { snapshot: v.Snapshot });
  ctx.params.endpoints = r.endpoints;
  ctx.params.snapshot = r.snapshot;
  return { snapshot: r.snapshot };
}

async function health(ctx: Ctx) {
  const endpoints = (ctx.params.endpoints as Record<string, string>) ?? {};
  await updateEnv(ctx.deps.db, ctx.dep.EnvID, { endpoints });
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

export const rollbackKind: KindDef<unknown> = {
  kind: 'rollback',
  phases: [
    { name: 'restore', run: restore },
    { name: 'health', run: health },
  ],
  verdict,
};
