// fork: place, clone, health, verdict. The deployment's EnvID is the NEW environment (created by
// the request with stage `fork`); the clone runs on the host that holds the source snapshot.
// A fan-out (`count`) is N of these, one per new environment, all cloning the one snapshot of the
// source version: each keeps its own failure rule, and its clone evidence names the fan-out.
import { type Static, Type } from '@sinclair/typebox';
import { diskLimitMb, hostFields } from '../../../protocol/spec.ts';
import { getEnv, getVersion, updateEnv } from '../../envs/store.ts';
import { defineKind, type PhaseContext } from '../engine.ts';
import { endpointsHealth, removeFromHost, send, tookMs } from './common.ts';

/** Which fan-out a fork belongs to: its id, this fork's place (1-based) and how many it made. */
export const FanoutTag = Type.Object({
  id: Type.String(),
  index: Type.Integer({ minimum: 1 }),
  count: Type.Integer({ minimum: 1 }),
});
export type FanoutTag = Static<typeof FanoutTag>;

const ForkParams = Type.Object({
  from_env: Type.String(),
  fanout: Type.Optional(FanoutTag),
  version: Type.String(),
  host: Type.Optional(Type.String()),
  endpoints: Type.Optional(Type.Record(Type.String(), Type.String())),
});
export type ForkParams = Static<typeof ForkParams>;

type Ctx = PhaseContext<unknown, ForkParams>;

async function sourceVersion(ctx: Ctx) {
  const v = await getVersion(ctx.deps.db, ctx.dep.TeamID, ctx.params.version);
  if (!v?.Healthy || !v.Snapshot) throw new Error(`version ${ctx.params.version} is not a healthy snapshot`);
  return v;
}

async function placePhase(ctx: Ctx) {
  const v = await sourceVersion(ctx);
  const owner = await getEnv(ctx.deps.db, ctx.dep.TeamID, v.EnvID);
  if (!owner) throw new Error(`environment ${v.EnvID} holding the snapshot is gone`);
  await ctx.target(owner.HostID);
  ctx.params.host = owner.HostID;
  await updateEnv(ctx.deps.db, ctx.dep.EnvID, { hostId: owner.HostID });
  return { host: owner.HostID, reason: 'same host as source snapshot' };
}

async function clone(ctx: Ctx) {
  const v = await sourceVersion(ctx);
  const target = await ctx.target(ctx.params.host ?? '');
  const r = await send(ctx, target, ctx.dep.EnvID, 'env.fork', {
    from_env: v.EnvID,
    from_snapshot: v.Snapshot,
    services: v.Spec.services,
    volumes: v.Spec.volumes,
    egress: v.Spec.egress,
    agent: v.Spec.agent?.service ?? '',
    disk_mb: diskLimitMb(v.Spec),
    ...hostFields(v.Spec),
  });
  ctx.params.endpoints = r.endpoints;
  const evidence = { forked_in_ms: r.forked_in, from: v.Snapshot };
  return ctx.params.fanout ? { ...evidence, fanout: ctx.params.fanout } : evidence;
}

async function verdict(ctx: Ctx, failure: unknown) {
  // A failed fork leaves nothing behind on the host.
  if (failure) await removeFromHost(ctx, ctx.dep.EnvID, ctx.params.host ?? '');
  await updateEnv(ctx.deps.db, ctx.dep.EnvID, { status: failure ? 'failed' : 'running' });
  return {
    status: failure ? ('failed' as const) : ('succeeded' as const),
    evidence: { env: ctx.dep.EnvID, took_ms: tookMs(ctx) },
  };
}

export const forkKind = defineKind<unknown, ForkParams>({
  kind: 'fork',
  params: ForkParams,
  phases: [{ name: 'place', run: placePhase }, { name: 'clone', run: clone }, endpointsHealth],
  verdict,
});
