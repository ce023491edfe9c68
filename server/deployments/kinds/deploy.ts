// deploy: resolve, place, provision, join, prepare, start, health, warm, snapshot, ingress, verdict.
import { type Static, Type } from '@sinclair/typebox';
import type { Results } from '../../../protocol/commands.ts';
import { diskLimitMb, type EnvSpec, hostFields } from '../../../protocol/spec.ts';
import { snapshotRefusal } from '../../clouds/providers.ts';
import { listClouds } from '../../clouds/store.ts';
import {
  getVersion,
  insertVersion,
  markVersionHealthy,
  setVersionDigests,
  updateEnv,
} from '../../envs/store.ts';
import { appendEvent } from '../../events/store.ts';
import { defineKind, type PhaseContext, PhaseFailure, Skip } from '../engine.ts';
import { place } from '../placement.ts';
import { updateDeployment } from '../store.ts';
import { endpointsHealth, firstService, removeFromHost, send, targetAfterFailure, tookMs } from './common.ts';

export const WARM_TIMEOUT_SEC = 600;
export const NO_HOST_NO_CLOUD =
  'no connected host and no cloud that can provision: connect a cloud or run the sidecar join on a machine';

export interface DeployInput {
  spec: EnvSpec;
}

/** Persisted params: what the request asked for and what the phases decided. */
const DeployParams = Type.Object({
  env: Type.String(),
  warm: Type.Union([Type.Array(Type.String()), Type.Null()]),
  target: Type.Union([Type.String(), Type.Null()]),
  previous_version: Type.Optional(Type.String()),
  host: Type.Optional(Type.String()),
  provision_cloud: Type.Optional(Type.String()),
  endpoints: Type.Optional(Type.Record(Type.String(), Type.String())),
  started_in: Type.Optional(Type.Number()),
  snapshot_skipped: Type.Optional(Type.Boolean()),
});
export type DeployParams = Static<typeof DeployParams>;

type Ctx = PhaseContext<DeployInput, DeployParams>;

async function specOf(ctx: Ctx): Promise<EnvSpec> {
  return (await ctx.version('version not resolved')).Spec;
}

async function resolve(ctx: Ctx) {
  if (!ctx.input) throw new Error('no compose spec to resolve');
  const env = await ctx.env();
  if (env.CurrentVersionID) {
    const prev = await getVersion(ctx.deps.db, ctx.dep.TeamID, env.CurrentVersionID);
    if (prev?.Healthy && prev.Snapshot) ctx.params.previous_version = prev.ID;
  }
  const { spec } = ctx.input;
  const version = await insertVersion(ctx.deps.db, { projectId: env.ProjectID, envId: env.ID, spec });
  ctx.dep.VersionID = version.ID;
  await updateDeployment(ctx.deps.db, ctx.dep.ID, { versionId: version.ID });
  await updateEnv(ctx.deps.db, env.ID, { status: 'deploying' });
  return {
    version: version.ID,
    number: version.Number,
    services: spec.services.map((s) => s.name),
    volumes: spec.volumes,
  };
}

async function placePhase(ctx: Ctx) {
  const spec = await specOf(ctx);
  const placed = await place(ctx.deps, ctx.dep.TeamID, await ctx.env(), ctx.params.target, spec.runtime);
  if ('provision' in placed) return { host: '', reason: placed.reason };
  ctx.params.host = placed.hostId;
  return { host: placed.hostId, reason: placed.reason };
}

async function provision(ctx: Ctx) {
  if (ctx.params.host) return new Skip({ reason: 'a host was found' });
  const clouds = await listClouds(ctx.deps.db, ctx.dep.TeamID);
  const cloud = clouds.find((c) => c.Provider !== 'manual' && ctx.deps.provisioners.has(c.Provider));
  if (!cloud) throw new Error(NO_HOST_NO_CLOUD);
  const joinToken = await ctx.deps.mintJoinToken(ctx.dep.TeamID, cloud.ID);
  const machine = await ctx.deps.provisioners.get(cloud.Provider)!.provision(
    {
      ID: cloud.ID,
      TeamID: ctx.dep.TeamID,
      Provider: cloud.Provider,
      Name: cloud.Name,
      Config: cloud.Config,
    },
    {
      joinToken,
      serverUrl: ctx.deps.publicUrl,
      sidecarUrl: ctx.deps.sidecarUrl,
      name: `svc-${ctx.dep.EnvID.toLowerCase()}`,
    },
  );
  ctx.params.provision_cloud = cloud.ID;
  const evidence = {
    cloud: cloud.ID,
    provider: cloud.Provider,
    ref: machine.ref,
    ip: machine.ip,
    name: machine.name,
  };
  await appendEvent(
    ctx.deps.db,
    ctx.dep.TeamID,
    `dep:${ctx.dep.ID}`,
    'host.provisioned',
    evidence,
    ctx.deps.events,
  );
  return evidence;
}

async function join(ctx: Ctx) {
  if (ctx.params.host) return new Skip({ reason: 'placed on a connected host' });
  const started = Date.now();
  const hostId = await ctx.deps.hub.waitForHost(
    ctx.dep.TeamID,
    ctx.params.provision_cloud ?? '',
    ctx.deps.joinWaitMs,
  );
  ctx.params.host = hostId;
  return { host: hostId, joined_in_ms: Date.now() - started };
}

/** Spec "Targets, placement and drivers": hosted providers run one container per environment. */
export const multiServiceOnProvider = (provider: string, services: number): string =>
  `${provider} runs one container per environment; use your machines for multi-service stacks (${services} services declared)`;

async function prepare(ctx: Ctx) {
  const hostId = ctx.params.host ?? '';
  const target = await ctx.target(hostId);
  const spec = await specOf(ctx);
  if (target.kind.startsWith('driver:') && spec.services.length > 1) {
    throw new Error(multiServiceOnProvider(target.kind.slice('driver:'.length), spec.services.length));
  }
  await updateEnv(ctx.deps.db, ctx.dep.EnvID, { hostId });
  const r: Results['env.create'] = await send(ctx, target, ctx.dep.EnvID, 'env.create', {
    version: ctx.dep.VersionID,
    services: spec.services,
    volumes: spec.volumes,
    from_snapshot: '',
    warm: ctx.params.warm,
    egress: spec.egress,
    ...(await contextPayload(ctx, spec)),
    agent: spec.agent?.service ?? '',
    disk_mb: diskLimitMb(spec),
    ...hostFields(spec),
  });
  ctx.params.endpoints = r.endpoints;
  ctx.params.started_in = r.started_in;
  await setVersionDigests(ctx.deps.db, ctx.dep.VersionID, r.digests ?? {});
  // A driver host says what its provider enforces of the egress rule instead of degrading silently.
  const said = r.enforcement ? { egress: r.enforcement, caps: r.caps, sandbox: r.sandbox } : {};
  const disk = {
    disk_mb: diskLimitMb(spec),
    disk_quota: r.disk_quota ?? 'not reported by the host',
    runtime: r.runtime ?? spec.runtime ?? 'not reported by the host',
    ...(r.runtime_platform ? { runtime_platform: r.runtime_platform } : {}),
    ...(r.timings ? { timings: r.timings } : {}),
  };
  if (!spec.context) return { version: ctx.dep.VersionID, endpoints: r.endpoints, ...disk, ...said };
  return {
    version: ctx.dep.VersionID,
    endpoints: r.endpoints,
    ...disk,
    context: spec.context.sha256,
    digests: r.digests,
    ...said,
  };
}

/** The project context rides along as a one-time URL; the sidecar fetches it unless it has those bytes. */
async function contextPayload(ctx: Ctx, spec: EnvSpec) {
  if (!spec.context) return {};
  if (!ctx.deps.offerContext) throw new Error('this control plane cannot serve project contexts');
  return { context: { sha256: spec.context.sha256, blob: await ctx.deps.offerContext(spec.context.upload) } };
}

async function start(ctx: Ctx) {
  return { started_in_ms: ctx.params.started_in ?? 0 };
}

async function warm(ctx: Ctx) {
  const argv = ctx.params.warm;
  if (!argv || argv.length === 0) return new Skip({ reason: 'no warm command' });
  const target = await ctx.target(ctx.params.host ?? '');
  const service = firstService(await specOf(ctx));
  const r = await send(
    ctx,
    target,
    ctx.dep.EnvID,
    'env.exec',
    { service, cmd: argv, timeout_sec: WARM_TIMEOUT_SEC },
    (WARM_TIMEOUT_SEC + 10) * 1000,
  );
  if (r.exit_code !== 0) {
    throw new PhaseFailure(`warm command exited ${r.exit_code}`, {
      exit: r.exit_code,
      stderr: r.stderr.slice(-4096),
    });
  }
  return r.stderr ? { exit: 0, stderr: r.stderr.slice(-4096) } : { exit: 0 };
}

async function snapshot(ctx: Ctx) {
  const target = await ctx.target(ctx.params.host ?? '');
  // A provider that cannot snapshot a running sandbox does not fail the deploy for it.
  const refused = snapshotRefusal(target.kind);
  if (refused) {
    ctx.params.snapshot_skipped = true;
    return new Skip({ reason: refused });
  }
  const r = await send(ctx, target, ctx.dep.EnvID, 'env.snapshot', { name: ctx.dep.VersionID });
  const timings = r.timings ? { timings: r.timings } : {};
  return {
    snapshot: r.snapshot,
    datasets: r.datasets,
    frozen_for: r.frozen_for,
    consistent: r.consistent,
    ...timings,
  };
}

async function ingress(ctx: Ctx) {
  return new Skip({ endpoints: ctx.params.endpoints ?? {}, names: 'pending ingress proxy' });
}

async function verdict(ctx: Ctx, failure: { phase: string } | null) {
  const db = ctx.deps.db;
  if (!failure) {
    // env.snapshot is named after the version id; healthy without one when the provider refused it
    const snap = ctx.params.snapshot_skipped ? '' : ctx.dep.VersionID;
    await markVersionHealthy(db, ctx.dep.VersionID, snap);
    await updateEnv(db, ctx.dep.EnvID, { currentVersionId: ctx.dep.VersionID, status: 'running' });
    return {
      status: 'succeeded' as const,
      evidence: { version: ctx.dep.VersionID, snapshot: snap, took_ms: tookMs(ctx) },
    };
  }
  const env = await ctx.env();
  const prevId = ctx.params.previous_version;
  if (!prevId) {
    // A first create that failed leaves nothing behind on the host; an environment that already
    // runs a version (one with no snapshot to roll back to, e.g. on a provider) is left running.
    if (!env.CurrentVersionID) await removeFromHost(ctx, env.ID, env.HostID);
    await updateEnv(db, env.ID, { status: 'failed' });
    return { status: 'failed' as const, evidence: { reverted: 'no previous version' } };
  }
  try {
    const prev = await getVersion(db, ctx.dep.TeamID, prevId);
    if (!prev) throw new Error(`version ${prevId} is gone`);
    const target = await targetAfterFailure(ctx, env.HostID);
    const r = await send(ctx, target, env.ID, 'env.rollback', { snapshot: prev.Snapshot });
    await updateEnv(db, env.ID, {
      status: 'running',
      currentVersionId: prev.ID,
      endpoints: r.endpoints ?? env.Endpoints,
    });
    return { status: 'rolled_back' as const, evidence: { reverted_to: prev.ID } };
  } catch (err) {
    await updateEnv(db, env.ID, { status: 'failed' });
    return {
      status: 'failed' as const,
      evidence: { reverted: `rollback failed: ${(err as Error).message}` },
    };
  }
}

export const deployKind = defineKind<DeployInput, DeployParams>({
  kind: 'deploy',
  params: DeployParams,
  phases: [
    { name: 'resolve', run: resolve },
    { name: 'place', run: placePhase },
    { name: 'provision', run: provision },
    { name: 'join', run: join },
    { name: 'prepare', run: prepare },
    { name: 'start', run: start },
    endpointsHealth,
    { name: 'warm', run: warm },
    { name: 'snapshot', run: snapshot },
    { name: 'ingress', run: ingress },
  ],
  verdict,
});
