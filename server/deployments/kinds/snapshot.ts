// snapshot: snapshot, health, verdict. The request created the new version row (same spec as the
// current one) so its id is in the 202 response; the verdict makes it healthy and current.
import { getEnv, getVersion, markVersionHealthy, updateEnv } from '../../envs/store.ts';
import type { KindDef, PhaseContext } from '../engine.ts';
import { firstService, send, targetOf, tookMs } from './common.ts';

type Ctx = PhaseContext<unknown>;

export const HEALTH_EXEC_TIMEOUT_SEC = 30;

async function envOf(ctx: Ctx) {
  const env = await getEnv(ctx.deps.db, ctx.dep.TeamID, ctx.dep.EnvID);
  if (!env) throw new Error('environment no longer exists');
  return env;
}

/** Shared with deploy and verify: capture every volume under `name`. */
export async function takeSnapshot(
  ctx: Ctx,
  hostId: string,
  envId: string,
  name: string,
  keepPaused?: string[],
) {
  const target = await targetOf(ctx, hostId);
  const r = await send(
    ctx,
    target,
    envId,
    'env.snapshot',
    keepPaused ? { name, keep_paused: keepPaused } : { name },
  );
  ctx.params.snapshot = r.snapshot;
  return { snapshot: r.snapshot, datasets: r.datasets, frozen_for: r.frozen_for, consistent: r.consistent };
}

async function snapshot(ctx: Ctx) {
  const env = await envOf(ctx);
  return takeSnapshot(ctx, env.HostID, env.ID, ctx.dep.VersionID);
}

async function health(ctx: Ctx) {
  const env = await envOf(ctx);
  const v = await getVersion(ctx.deps.db, ctx.dep.TeamID, ctx.dep.VersionID);
  if (!v) throw new Error('version is gone');
  const target = await targetOf(ctx, env.HostID);
  // Any exit code counts: the point is that the stack answers after the unpause.
  await send(
    ctx,
    target,
    env.ID,
    'env.exec',
    { service: firstService(v.Spec), cmd: ['true'], timeout_sec: HEALTH_EXEC_TIMEOUT_SEC },
    (HEALTH_EXEC_TIMEOUT_SEC + 10) * 1000,
  );
  return { answered: true };
}

async function verdict(ctx: Ctx, failure: unknown) {
  const env = await envOf(ctx);
  if (failure) return { status: 'failed' as const, evidence: { kept: env.CurrentVersionID } };
  const snap = (ctx.params.snapshot as string) || ctx.dep.VersionID;
  await markVersionHealthy(ctx.deps.db, ctx.dep.VersionID, snap);
  await updateEnv(ctx.deps.db, env.ID, { currentVersionId: ctx.dep.VersionID });
  return {
    status: 'succeeded' as const,
    evidence: { version: ctx.dep.VersionID, snapshot: snap, took_ms: tookMs(ctx) },
  };
}

export const snapshotKind: KindDef<unknown> = {
  kind: 'snapshot',
  phases: [
    { name: 'snapshot', run: snapshot },
    { name: 'health', run: health },
  ],
  verdict,
};
