// What every command handler works with: the data directory, the storage backend, the compose
// tool, the Docker client and the egress probe settings. Also the per-environment files:
// spec.json (what runs now) and versions/<snapshot>.json (what ran when a snapshot was taken,
// so a rollback re-renders the stack that matches the restored data, even after a restart).
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type Docker from 'dockerode';
import type { Egress, NetworkMode, Runtime, ServiceRecord } from '../protocol/spec.ts';
import { writeFileAtomic } from '../shared/atomic-file.ts';
import { stagingDir } from './docker/bind-staging.ts';
import type { BuildImages } from './docker/build-gc.ts';
import type { ComposeTool } from './docker/compose-tool.ts';
import type { ProbeOptions } from './docker/egress.ts';
import { DockerEngine, type EngineState } from './docker/engine.ts';
import { NoComposeTool } from './docker/errors.ts';
import type { HostRuntimes } from './docker/gvisor.ts';
import { projectName } from './docker/render.ts';
import { Stack } from './docker/stack.ts';
import type { SubnetAllocator } from './docker/subnets.ts';
import type { FsState } from './fs/tools.ts';
import type { Lane, StackPool } from './pool.ts';
import type { ProcessTable } from './processes/table.ts';
import type { CommandContext } from './runner.ts';
import type { StorageBackend } from './storage/index.ts';

export interface SavedSpec {
  services: ServiceRecord[];
  volumes: string[];
  egress: Egress;
  version?: string;
  /** The agent service, never run as uid 0. */
  agent?: string;
  /** Disk limit across the volumes in MiB. */
  disk_mb?: number;
  /** The runtime the stack runs under, resolved on this host (absent in older files: runc). */
  runtime?: Runtime;
  /** `none`: the stack has no network (render.ts); absent: its own network. */
  network?: NetworkMode;
}

export interface SidecarContext {
  dataDir: string;
  storage: StorageBackend;
  /** Null on a machine without a compose tool: the host still joins (and reports `compose: false`). */
  tool: ComposeTool | null;
  docker: Docker;
  /** What this process knows about its Docker engine across calls: spare execs, listing hints. */
  engineState: EngineState;
  /** This sidecar's built images: the holds of builds under way, the sweeps (build-gc.ts). */
  builds: BuildImages;
  probe: ProbeOptions;
  log: (msg: string) => void;
  /** Forks reading an environment's snapshots; a destroy of that environment waits for them. */
  readers: Map<string, Set<Promise<unknown>>>;
  /** The fault suite's hold hook (sidecar/test-hold.ts); absent unless SVC_TEST_HOOKS=1. */
  hold?: (point: string, commandId: string) => Promise<void>;
  /**
   * Each environment's network subnet; Docker's default pools when absent (they run out at about 30
   * networks).
   */
  subnets?: SubnetAllocator;
  /** Unused built images younger than this are kept as a build cache (SVC_BUILD_KEEP). */
  buildKeepMs?: number;
  /** Bounds the stack operations running at once (hundreds thrash Docker); unbounded when absent. */
  pool?: StackPool;
  /** Streamed file reads and watches in flight (fs/tools.ts), made on first use. */
  fs?: FsState;
  /** The runtimes this host runs and its default (SVC_RUNTIME); runc only when absent. */
  runtimes?: HostRuntimes;
  /** Live processes (proc.* kinds); absent where nothing streams them (unit tests). */
  processes?: ProcessTable;
}

/** Runs a stack operation in the host's pool, its place in the queue told through progress. */
export function pooled<T>(
  ctx: SidecarContext,
  lane: Lane,
  cmd: CommandContext,
  fn: () => Promise<T>,
): Promise<T> {
  return ctx.pool ? ctx.pool.run(lane, fn, (m) => cmd.progress(m)) : fn();
}

export const envDir = (ctx: SidecarContext, envId: string) => join(ctx.dataDir, 'envs', envId);
const specPath = (ctx: SidecarContext, envId: string) => join(envDir(ctx, envId), 'spec.json');
const versionPath = (ctx: SidecarContext, envId: string, snapshot: string) =>
  join(envDir(ctx, envId), 'versions', `${snapshot}.json`);

async function writeJson(path: string, value: unknown): Promise<void> {
  await mkdir(join(path, '..'), { recursive: true });
  await writeFileAtomic(path, JSON.stringify(value, null, 2));
}

async function readJson<T>(path: string): Promise<T | null> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as T;
  } catch {
    return null;
  }
}

export const saveSpec = (ctx: SidecarContext, envId: string, spec: SavedSpec) =>
  writeJson(specPath(ctx, envId), spec);
export const loadSpec = (ctx: SidecarContext, envId: string) => readJson<SavedSpec>(specPath(ctx, envId));
export const saveVersionSpec = (ctx: SidecarContext, envId: string, snapshot: string, spec: SavedSpec) =>
  writeJson(versionPath(ctx, envId, snapshot), spec);
export const loadVersionSpec = (ctx: SidecarContext, envId: string, snapshot: string) =>
  readJson<SavedSpec>(versionPath(ctx, envId, snapshot));

/** The environment's saved spec, or a clear error when this host does not run it. */
export async function requireSpec(ctx: SidecarContext, envId: string): Promise<SavedSpec> {
  const spec = await loadSpec(ctx, envId);
  if (!spec) throw new Error(`environment ${envId} is not on this host (no ${specPath(ctx, envId)})`);
  return spec;
}

/** The compose tool, or the error every stack command gives on a machine without one. */
export function composeTool(ctx: SidecarContext): ComposeTool {
  if (!ctx.tool)
    throw new NoComposeTool(
      'no compose tool on this machine: install the docker compose plugin or docker-compose, then restart svcd',
    );
  return ctx.tool;
}

/** The engine access of an environment's compose project, sharing the process's Docker state. */
export const engineOf = (ctx: SidecarContext, envId: string): DockerEngine =>
  new DockerEngine(projectName(envId), ctx.docker, ctx.engineState);

export function stackOf(
  ctx: SidecarContext,
  envId: string,
  spec: SavedSpec,
  volumePaths?: Record<string, string>,
  layerQuota?: boolean,
): Stack {
  return new Stack({
    envId,
    dir: envDir(ctx, envId),
    spec: {
      services: spec.services,
      volumes: spec.volumes,
      egress: spec.egress,
      runtime: spec.runtime,
      network: spec.network,
    },
    tool: composeTool(ctx),
    docker: ctx.docker,
    engineState: ctx.engineState,
    volumePaths,
    subnets: ctx.subnets,
    layerQuota,
    stageDir: stagingDir(ctx.dataDir, envId),
  });
}
