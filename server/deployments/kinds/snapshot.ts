// snapshot: snapshot, health, verdict. The request created the new version row (same spec as the
// current one) so its id is in the 202 response; the verdict makes it healthy and current.
import { type Static, Type } from '@sinclair/typebox';
import { markVersionHealthy, updateEnv } from '../../envs/store.ts';
import { defineKind, type PhaseContext } from '../engine.ts';
import { firstService, send, takeSnapshot, tookMs } from './common.ts';

const SnapshotParams = Type.Object({ snapshot: Type.Optional(Type.String()) });
type SnapshotParams = Static<typeof SnapshotParams>;

type Ctx = PhaseContext<unknown, SnapshotParams>;

export const HEALTH_EXEC_TIMEOUT_SEC = 30;

async function snapshot(ctx: Ctx) {
  const env = await ctx.env();
  return takeSnapshot(ctx, env.HostID, env.ID, ctx.dep.VersionID);
}

async function health(ctx: Ctx) {
  const env = await ctx.env();
  const v = await ctx.version('version is gone');
  const target = await ctx.target(env.HostID);
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
  const env = await ctx.env();
  if (failure) return { status: 'failed' as const, evidence: { kept: env.CurrentVersionID } };
  const snap = ctx.params.snapshot || ctx.dep.VersionID;
  await markVersionHealthy(ctx.deps.db, ctx.dep.VersionID, snap);
  await updateEnv(ctx.deps.db, env.ID, { currentVersionId: ctx.dep.VersionID });
  return {
    status: 'succeeded' as const,
    evidence: { version: ctx.dep.VersionID, snapshot: snap, took_ms: tookMs(ctx) },
  };
}

export const snapshotKind = defineKind<unknown, SnapshotParams>({
  kind: 'snapshot',
  params: SnapshotParams,
  phases: [
    { name: 'snapshot', run: snapshot },
    { name: 'health', run: health },
  ],
  verdict,
});
