// env.create, env.fork and env.rollback: datasets first, then the stack up with health wait, then
// the egress probe. A first create or a fork that fails leaves nothing running behind it.
import { chown, readdir, stat } from 'node:fs/promises';
import type { Payloads, Results } from '../../protocol/commands.ts';
import { CONTEXT_VOLUME, DEFAULT_DISK_MB, type Runtime, type ServiceRecord } from '../../protocol/spec.ts';
import { Timings } from '../../shared/timings.ts';
import {
  composeTool,
  loadSpec,
  loadVersionSpec,
  requireSpec,
  type SavedSpec,
  type SidecarContext,
  saveSpec,
  stackOf,
} from '../context.ts';
import { buildImages } from '../docker/build.ts';
import { buildOwner } from '../docker/build-gc.ts';
import type { ProbeReport } from '../docker/egress.ts';
import { EgressLeak, ProbeError } from '../docker/errors.ts';
import { checkCreatedRuntime, resolveRuntime } from '../docker/gvisor.ts';
import { engineBoundsLayers } from '../docker/layer-quota.ts';
import { checkProjectFields, contextFiles, contextOf, ensureContext } from '../docker/project.ts';
import { checkNetworkMode } from '../docker/render.ts';
import type { Stack } from '../docker/stack.ts';
import { refuseRootAgent, refuseRootProcess } from '../docker/users.ts';
import type { CommandContext } from '../runner.ts';
import { beginEarlyCapture, dropEarly } from './early-capture.ts';
import { quietEligible, quietVolumes } from './quiet.ts';
import { holdStayUp } from './stay-up.ts';

/**
 * Docker gives an empty volume the owner of the image's directory at the mount point when it
 * creates the container (root, when the image has no such directory or only `working_dir` made
 * it), so a non-root service could not write to its own fresh volume. Between create and start,
 * an empty volume still owned by root is given to the numeric user of the service mounting it.
 */
async function ownFreshVolumes(services: ServiceRecord[], paths: Record<string, string>): Promise<void> {
  for (const s of services) {
    const m = /^(\d+)(?::(\d+))?$/.exec(s.user);
    if (!m || m[1] === '0') continue;
    for (const mount of s.volumes) {
      const path = paths[mount.split(':')[0]];
      if (!path) continue;
      const [st, entries] = await Promise.all([stat(path), readdir(path)]);
      if (entries.length === 0 && st.uid === 0) await chown(path, Number(m[1]), Number(m[2] ?? m[1]));
    }
  }
}

/**
 * What the host keeps of a create or fork payload (checked on receipt, agent included). The runtime
 * is resolved here: the payload's, else (a fork) its source's, else this host's default.
 */
function specOf(
  ctx: SidecarContext,
  payload: Payloads['env.create'] | Payloads['env.fork'],
  version: string,
  inherited?: Runtime,
): SavedSpec {
  const { services, volumes, egress, disk_mb = DEFAULT_DISK_MB, agent } = payload;
  const runtime = resolveRuntime(ctx.runtimes, payload.runtime ?? inherited);
  const spec: SavedSpec = { services, volumes, egress, version, disk_mb, runtime };
  if (agent) spec.agent = agent;
  if (payload.network) spec.network = payload.network;
  checkProjectFields(spec.services, spec.volumes);
  checkNetworkMode(spec);
  return spec;
}

/** The runtime a create reports, with gVisor's platform when it is gvisor. */
function runtimeReport(ctx: SidecarContext, spec: SavedSpec) {
  const runtime = spec.runtime ?? 'runc';
  const gvisor = ctx.runtimes?.gvisor;
  return runtime === 'gvisor' && gvisor
    ? { runtime, runtime_platform: `${gvisor.platform} (runsc ${gvisor.version}, network ${gvisor.network})` }
    : { runtime };
}

/** env.create only: the context into its dataset (once per digest), then the images it builds. */
async function prepareProject(
  ctx: SidecarContext,
  cmd: CommandContext<'env.create'>,
  spec: SavedSpec,
  paths: Record<string, string>,
) {
  const dataset = paths[CONTEXT_VOLUME];
  if (!dataset) return;
  const context = contextOf(cmd.payload);
  if (context) await ensureContext(dataset, context, cmd.progress);
  const owner = buildOwner(ctx.dataDir);
  await buildImages(ctx.docker, spec.services, contextFiles(dataset), cmd.progress, spec.egress, owner);
}

/** Bounds the env's volumes (before any is made) to its disk limit; returns how this host enforces it. */
async function limitDisk(ctx: SidecarContext, cmd: CommandContext, envId: string, spec: SavedSpec) {
  const mb = spec.disk_mb ?? DEFAULT_DISK_MB;
  const how = await ctx.storage.setQuota(envId, mb * 1024 * 1024);
  cmd.progress(`disk limit ${mb} MiB: ${how}`);
  return how;
}

/** `storage_opt` sizes are rendered where the engine enforces them; said plainly where it cannot. */
async function layerQuotaFor(ctx: SidecarContext, cmd: CommandContext, spec: SavedSpec): Promise<boolean> {
  const asked = spec.services.filter((s) => s.layer_mb);
  if (!asked.length) return false;
  if (await engineBoundsLayers(ctx.docker)) return true;
  cmd.progress(
    `storage_opt size of ${asked.map((s) => s.name).join(', ')} not applied: this engine bounds writable layers only with overlay2 on XFS with project quotas`,
  );
  return false;
}

/** The agent never runs as uid 0: its user by any spelling or passwd name, then its real process. */
async function checkAgentBeforeStart(stack: Stack, spec: SavedSpec): Promise<void> {
  if (!spec.agent) return;
  const user = spec.services.find((s) => s.name === spec.agent)?.user ?? '';
  await refuseRootAgent(stack.engine, spec.agent, user);
}

/** Stamps the volumes and starts their snapshot under the version's name when they are quiet. */
async function beginEarly(ctx: SidecarContext, envId: string, spec: SavedSpec): Promise<void> {
  await dropEarly(ctx, envId);
  if (!spec.version || !quietEligible(ctx.storage.kind, spec)) return;
  const stamps = await quietVolumes(spec.volumes.map((v) => ctx.storage.volumePath(envId, v)));
  if (stamps) beginEarlyCapture(ctx, envId, spec.version, spec.volumes, stamps);
}

/** Brings the stack up on prepared datasets and probes egress; returns what env.create reports. */
async function startStack(
  ctx: SidecarContext,
  cmd: CommandContext,
  envId: string,
  spec: SavedSpec,
  paths: Record<string, string>,
  timings = new Timings(),
  create = false,
) {
  await ownFreshVolumes(spec.services, paths);
  // Relative binds are pinned and staged by `up` itself, on every start (bind-staging.ts).
  await saveSpec(ctx, envId, spec);
  const layerQuota = await layerQuotaFor(ctx, cmd, spec);
  const stack = stackOf(ctx, envId, spec, paths, layerQuota);
  cmd.progress(
    // A fresh stack is created through the Engine API, one that exists through the compose tool.
    `starting ${spec.services.length} service${spec.services.length === 1 ? '' : 's'} (compose tool: ${stack.tool.argv.join(' ')})`,
  );
  const beforeStart = async () => {
    const names = spec.services.map((s) => s.name);
    await checkCreatedRuntime(stack.engine, names, spec.runtime ?? 'runc');
    await checkAgentBeforeStart(stack, spec);
    await ownFreshVolumes(spec.services, paths);
    // A create is followed by the deploy's snapshot: quiet volumes are copied while they start.
    if (create) await timings.step('early_capture', () => beginEarly(ctx, envId, spec));
  };
  // A denied network's probe runs while the health wait does (it needs only one running container
  // in the stack's network), not after it: the command's result, and so any exec in this
  // environment (the runner runs one command at a time per environment), still waits for its
  // verdict, which is awaited here, before any command. An allowed network is not probed: its
  // verdict is `allowed` whatever a probe would reach (the probe proves a denial).
  let probe: Promise<ProbeReport> | undefined;
  const probeNow =
    spec.egress === 'allow'
      ? undefined
      : () => {
          probe ??= timings.step('egress_probe', () => stack.verifyEgress(ctx.probe));
          probe.catch(() => {}); // awaited below
        };
  let started_in: number;
  let stayUp: Promise<void> | null;
  try {
    ({ started_in, stayUp } = await stack.up(600, beforeStart, probeNow, timings, create));
  } catch (err) {
    // A leak stops the stack, which fails the health wait: the leak is the reason to report.
    const probed = await probe?.catch((e: unknown) => e);
    throw probed instanceof EgressLeak ? probed : err;
  }
  if (spec.agent) await refuseRootProcess(stack.engine, spec.agent);
  const egress =
    spec.egress === 'allow' ? 'allowed' : (await verifiedEgress(stack, ctx, probe, timings)).verdict;
  cmd.progress(`healthy; egress ${egress}`);
  return { stack, started_in, egress, stayUp };
}

/**
 * The verdict of the probe started beside the health wait. One that failed without a verdict
 * (its container exited under it: a one-shot, say) is run again on the healthy stack, as it
 * always was before; a leak stands.
 */
async function verifiedEgress(
  stack: Stack,
  ctx: SidecarContext,
  early: Promise<ProbeReport> | undefined,
  timings: Timings,
): Promise<ProbeReport> {
  if (early) {
    try {
      return await early;
    } catch (err) {
      if (!(err instanceof ProbeError)) throw err;
    }
  }
  return timings.step('egress_probe_again', () => stack.verifyEgress(ctx.probe));
}

async function tearDown(
  ctx: SidecarContext,
  envId: string,
  spec: SavedSpec,
  alsoData: boolean,
): Promise<void> {
  try {
    await stackOf(ctx, envId, spec).down();
  } catch (err) {
    ctx.log(`cleaning up ${envId} after a failure: ${(err as Error).message}`);
  }
  if (alsoData)
    await ctx.storage.destroy(envId).catch((err) => ctx.log(`removing datasets of ${envId}: ${err.message}`));
}

export async function envCreate(
  ctx: SidecarContext,
  cmd: CommandContext<'env.create'>,
): Promise<Results['env.create']> {
  const spec = specOf(ctx, cmd.payload, cmd.payload.version);
  composeTool(ctx); // before any dataset is made
  // The images it builds are held against collection until its spec is saved (or it failed).
  const release = await ctx.builds.hold(spec.services.map((s) => s.image));
  try {
    return await createWith(ctx, cmd, spec);
  } finally {
    release();
  }
}

async function createWith(ctx: SidecarContext, cmd: CommandContext<'env.create'>, spec: SavedSpec) {
  const fromSnapshot = cmd.payload.from_snapshot;
  const timings = new Timings();
  const previous = await loadSpec(ctx, cmd.envId);
  const diskQuota = await timings.step('disk_limit', () => limitDisk(ctx, cmd, cmd.envId, spec));
  if (fromSnapshot) {
    if (!(await ctx.storage.hasSnapshot(cmd.envId, fromSnapshot)))
      throw new Error(`environment ${cmd.envId} has no snapshot ${fromSnapshot}`);
    if (previous) await stackOf(ctx, cmd.envId, previous).down();
    await ctx.storage.rollback(cmd.envId, fromSnapshot, spec.volumes);
  }
  const paths = await timings.step('storage_prepare', () => ctx.storage.prepare(cmd.envId, spec.volumes));
  try {
    await timings.step('project', () => prepareProject(ctx, cmd, spec, paths));
    // A create is always followed by the deploy's snapshot: the stay-up window of a check-less
    // container is left to run beside it (stay-up.ts), not waited here.
    const started = await startStack(ctx, cmd, cmd.envId, spec, paths, timings, true);
    const { stack, started_in, egress } = started;
    const [endpoints, digests] = await timings.step('report', () =>
      Promise.all([stack.endpoints(), stack.digests()]),
    );
    if (started.stayUp) holdStayUp(ctx, cmd.envId, started.stayUp);
    return {
      endpoints,
      started_in,
      digests,
      storage: ctx.storage.kind,
      egress,
      disk_quota: diskQuota,
      ...runtimeReport(ctx, spec),
      timings: timings.ms,
    };
  } catch (err) {
    await dropEarly(ctx, cmd.envId);
    // A redeploy that fails keeps its containers for the rollback the control plane sends next;
    // a first create that fails leaves nothing running.
    if (!previous) await tearDown(ctx, cmd.envId, spec, false);
    throw err;
  }
}

export async function envFork(
  ctx: SidecarContext,
  cmd: CommandContext<'env.fork'>,
): Promise<Results['env.fork']> {
  const started = Date.now();
  const { from_env: from, from_snapshot: snapshot } = cmd.payload;
  const source = (await loadVersionSpec(ctx, from, snapshot)) ?? (await loadSpec(ctx, from));
  const spec = specOf(ctx, cmd.payload, snapshot, source?.runtime ?? (source ? 'runc' : undefined));
  composeTool(ctx); // before any dataset is cloned
  if (await loadSpec(ctx, cmd.envId)) throw new Error(`environment ${cmd.envId} already exists on this host`);
  await limitDisk(ctx, cmd, cmd.envId, spec).catch(async (err) => {
    await ctx.storage.destroy(cmd.envId).catch(() => {});
    throw err;
  });
  const readers = ctx.readers.get(from) ?? new Set();
  ctx.readers.set(from, readers);
  const cloning = ctx.storage.clone(from, snapshot, cmd.envId, spec.volumes);
  readers.add(cloning);
  let paths: Record<string, string>;
  try {
    paths = await cloning;
  } finally {
    readers.delete(cloning);
  }
  cmd.progress(
    `cloned ${spec.volumes.length} volume${spec.volumes.length === 1 ? '' : 's'} from ${from}@${snapshot}`,
  );
  try {
    const { stack } = await startStack(ctx, cmd, cmd.envId, spec, paths);
    return { forked_in: Date.now() - started, endpoints: await stack.endpoints() };
  } catch (err) {
    await tearDown(ctx, cmd.envId, spec, true);
    throw err;
  }
}

export async function envRollback(
  ctx: SidecarContext,
  cmd: CommandContext<'env.rollback'>,
): Promise<Results['env.rollback']> {
  const { snapshot } = cmd.payload;
  const current = await requireSpec(ctx, cmd.envId);
  if (!(await ctx.storage.hasSnapshot(cmd.envId, snapshot)))
    throw new Error(`environment ${cmd.envId} has no snapshot ${snapshot}`);
  // The spec that ran when the snapshot was taken, so data and stack match again.
  const target = (await loadVersionSpec(ctx, cmd.envId, snapshot)) ?? current;
  cmd.progress('stopping the stack');
  // Docker resolves bind mounts when a container starts: never swap a dataset under a live one.
  await stackOf(ctx, cmd.envId, current).down();
  await ctx.storage.rollback(cmd.envId, snapshot, target.volumes);
  cmd.progress(
    `restored ${target.volumes.length} volume${target.volumes.length === 1 ? '' : 's'} from ${snapshot}`,
  );
  const paths = await ctx.storage.prepare(cmd.envId, target.volumes);
  const { stack } = await startStack(ctx, cmd, cmd.envId, { ...target, version: snapshot }, paths);
  return { snapshot, endpoints: await stack.endpoints() };
}
