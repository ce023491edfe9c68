// fork: place, clone, health, verdict. The deployment's EnvID is the NEW environment (created by
// the request with stage `fork`); the clone runs on the host that holds the source snapshot.
import { diskLimitMb } from '../../../protocol/spec.ts';
import { getEnv, getVersion, updateEnv } from '../../envs/store.ts';
import type { KindDef, PhaseContext } from '../engine.ts';
import { removeFromHost, send, targetOf, tookMs } from './common.ts';

interface ForkParams {
  from_env: string;
  version: string;
  host?: string;
  endpoints?: Record<string, string>;
}

type Ctx = PhaseContext<unknown>;
const p = (ctx: Ctx) => ctx.params as unknown as ForkParams;

async function sourceVersion(ctx: Ctx) {
  const v = await getVersion(ctx.deps.db, ctx.dep.TeamID, p(ctx).version);
  if (!v?.Healthy || !v.Snapshot) throw new Error(`version ${p(ctx).version} is not a healthy snapshot`);
  return v;
}

async function placePhase(ctx: Ctx) {
  const v = await sourceVersion(ctx);
  const owner = await getEnv(ctx.deps.db, ctx.dep.TeamID, v.EnvID);
  if (!owner) throw new Error(`environment ${v.EnvID} holding the snapshot is gone`);
  await targetOf(ctx, owner.HostID);
  p(ctx).host = owner.HostID;
  await updateEnv(ctx.deps.db, ctx.dep.EnvID, { hostId: owner.HostID });
  return { host: owner.HostID, reason: 'same host as source snapshot' };
}

async function clone(ctx: Ctx) {
  const v = await sourceVersion(ctx);
  const target = await targetOf(ctx, p(ctx).host as string);
  const r = await send(ctx, target, ctx.dep.EnvID, 'env.fork', {
    from_env: v.EnvID,
    from_snapshot: v.Snapshot,
    services: v.Spec.services,
    volumes: v.Spec.volumes,
    egress: v.Spec.egress,
    agent: v.Spec.agent?.service ?? '',
    disk_mb: diskLimitMb(v.Spec),
  });
  p(ctx).endpoints = r.endpoints;
  return { forked_in_ms: r.forked_in, from: v.Snapshot };
}

async function health(ctx: Ctx) {
  const endpoints = p(ctx).endpoints ?? {};
  await updateEnv(ctx.deps.db, ctx.dep.EnvID, { endpoints });
  return { endpoints };
}

async function verdict(ctx: Ctx, failure: unknown) {
  // A failed fork leaves nothing behind on the host.
  if (failure) await removeFromHost(ctx, ctx.dep.EnvID, p(ctx).host ?? '');
  await updateEnv(ctx.deps.db, ctx.dep.EnvID, { status: failure ? 'failed' : 'running' });
  return {
    status: failure ? ('failed' as const) : ('succeeded' as const),
    evidence: { env: ctx.dep.EnvID, took_ms: tookMs(ctx) },
  };
}

export const forkKind: KindDef<unknown> = {
  kind: 'fork',
  phases: [
    { name: 'place', run: placePhase },
    { name: 'clone', run: clone },
    { name: 'health', run: health },
  ],
  verdict,
};
