// Renders the compose file of one environment from its spec. Pure: names and YAML text only.
//
// - Volumes are named volumes of the `local` driver bound to the dataset directory the storage
//   layer prepared, so an image's content at the mount path is copied up on first use exactly as
//   with ordinary named volumes, while the data lives where snapshots and forks can reach it.
// - Every container gets memory, pids and cpu limits (spec zero → sidecar defaults).
// - The stack has one network, compose's `default` (so it is `<project>_default`), whose Linux
//   bridge has a name derived from the env id: the host firewall rules of a deny stack match it.
// - `egress: deny` makes that network internal and publishes nothing; `allow` publishes ports.
// - Network mode `none` (a deny image sandbox: one service, nothing published) renders no network:
//   the service has only loopback, so there is no bridge to firewall and nothing to reach.
// - Every container runs with `no-new-privileges` (a setuid binary gains nothing), an init process
//   as PID 1 (orphans are reaped, so zombies cannot use up the pid limit) and a bounded log
//   (json-file, rotated at LOG_MAX_SIZE, LOG_MAX_FILES files kept).
// - A gvisor environment names Docker's `runsc` runtime for every service (gvisor.ts registers it).
import { createHash } from 'node:crypto';
import { stringify } from 'yaml';
import {
  type Egress,
  effectiveResources,
  type HealthCheck,
  type NetworkMode,
  type Runtime,
  type ServiceRecord,
} from '../../protocol/spec.ts';
import type { StagedBinds } from './bind-staging.ts';
import { DockerError } from './errors.ts';
import { BRIDGE_PREFIX } from './firewall.ts';
import { renderBinds } from './render-project.ts';

export const ENV_LABEL = 'svc.env';
export const LOG_MAX_SIZE = '10m';
export const LOG_MAX_FILES = 3;
/** The name gVisor's runsc is registered under with the Docker daemon. */
export const GVISOR_DOCKER_RUNTIME = 'runsc';

export interface RenderInput {
  envId: string;
  services: ServiceRecord[];
  volumes: string[];
  egress: Egress;
  /** runc when absent. */
  runtime?: Runtime;
  /** volume → host directory of its dataset (the storage layer's `prepare` result). */
  volumePaths: Record<string, string>;
  /** service → the staging path of each of its relative binds (bind-staging.ts). */
  stagedBinds?: StagedBinds;
  /** Cpu limits above the host's cpu count are refused by Docker; they are lowered to it. */
  hostCpus?: number;
  /** The network's IPv4 subnet (subnets.ts); Docker's default pools when unset. */
  subnet?: string;
  /** Whether the engine bounds a container's writable layer (`storage_opt: {size}`). */
  layerQuota?: boolean;
  /** `none`: no network (protocol/spec.ts NetworkModeSchema); absent: the stack's own network. */
  network?: NetworkMode;
}

const PROJECT = /^[a-z0-9][a-z0-9_-]*$/;

/** Compose project name of an env: the env id in lower case (spec: "Sidecar program"). */
export function projectName(envId: string): string {
  const project = envId.toLowerCase();
  if (!PROJECT.test(project) || project.length > 63) {
    throw new DockerError(
      `env id '${envId}' cannot name a compose project: use lower-case letters, digits, '_' and '-' (at most 63)`,
    );
  }
  return project;
}

export function networkName(envId: string): string {
  return `${projectName(envId)}_default`;
}

/**
 * Linux bridge of the stack's network: 'svc' + 12 hex chars of sha256(env id), 15 chars
 * (IFNAMSIZ-1). The prefix is what the firewall's INPUT jump matches (firewall.ts).
 */
export function bridgeName(envId: string): string {
  return `${BRIDGE_PREFIX}${createHash('sha256').update(envId).digest('hex').slice(0, 12)}`;
}

/** Compose interpolates `$` in every value; the spec's values are final, so `$` is escaped. */
function lit(text: string): string {
  return text.replaceAll('$', '$$$$');
}

function litAll(value: string | string[]): string | string[] {
  return typeof value === 'string' ? lit(value) : value.map(lit);
}

function healthcheck(h: HealthCheck): Record<string, unknown> {
  if (h.test[0] === 'NONE') return { disable: true };
  const out: Record<string, unknown> = { test: h.test.map(lit) };
  if (h.interval) out.interval = h.interval;
  if (h.timeout) out.timeout = h.timeout;
  if (h.retries > 0) out.retries = h.retries;
  if (h.start_period) out.start_period = h.start_period;
  return out;
}

function volumeName(mount: string): string {
  return mount.split(':')[0];
}

function service(svc: ServiceRecord, input: RenderInput): Record<string, unknown> {
  const res = effectiveResources(svc.resources);
  const cpus = input.hostCpus && input.hostCpus > 0 ? Math.min(res.cpus, input.hostCpus) : res.cpus;
  const out: Record<string, unknown> = { image: svc.image };
  if (svc.entrypoint !== null) out.entrypoint = litAll(svc.entrypoint);
  if (svc.command !== null) out.command = litAll(svc.command);
  if (svc.user) out.user = lit(svc.user);
  if (svc.working_dir) out.working_dir = lit(svc.working_dir);
  const env = Object.entries(svc.env);
  if (env.length) out.environment = Object.fromEntries(env.map(([k, v]) => [k, lit(v)]));
  if (svc.health) out.healthcheck = healthcheck(svc.health);
  const deps = Object.entries(svc.depends_on);
  if (deps.length)
    out.depends_on = Object.fromEntries(deps.map(([name, d]) => [name, { condition: d.condition }]));
  if (svc.volumes.length) out.volumes = svc.volumes.map(lit);
  const binds = renderBinds(svc, input.stagedBinds ?? {}, lit);
  if (binds.length) out.volumes = [...((out.volumes as unknown[]) ?? []), ...binds];
  // '[published:]target[/proto]' is compose's own short form; without a published part Docker picks a host port.
  if (input.egress === 'allow' && svc.ports.length) out.ports = [...svc.ports];
  out.mem_limit = `${res.memory_mb}m`;
  out.pids_limit = res.pids;
  out.cpus = cpus;
  out.labels = { [ENV_LABEL]: input.envId };
  if (svc.layer_mb && input.layerQuota) out.storage_opt = { size: `${svc.layer_mb}M` };
  if (input.runtime === 'gvisor') out.runtime = GVISOR_DOCKER_RUNTIME;
  if (input.network === 'none') out.network_mode = 'none';
  out.security_opt = ['no-new-privileges:true'];
  out.init = true;
  out.logging = {
    driver: 'json-file',
    options: { 'max-size': LOG_MAX_SIZE, 'max-file': String(LOG_MAX_FILES) },
  };
  return out;
}

/** Network mode `none` fits one service with egress `deny` and no ports; anything else is refused. */
export function checkNetworkMode(spec: {
  network?: NetworkMode;
  egress: Egress;
  services: ServiceRecord[];
}): void {
  if (spec.network === undefined) return;
  if (spec.network !== 'none')
    throw new DockerError(`network must be 'none' when given, got '${String(spec.network)}'`);
  if (spec.egress !== 'deny' || spec.services.length !== 1 || spec.services[0].ports.length)
    throw new DockerError(
      "network 'none' is for one service with egress 'deny' and no ports: anything else needs its network",
    );
}

function check(input: RenderInput): void {
  if (input.egress !== 'deny' && input.egress !== 'allow')
    throw new DockerError(`egress must be 'deny' or 'allow', got '${String(input.egress)}'`);
  if (input.services.length === 0) throw new DockerError('the spec has no services; nothing to run');
  checkNetworkMode(input);
  for (const vol of input.volumes) {
    const path = input.volumePaths[vol];
    if (!path?.startsWith('/'))
      throw new DockerError(`volume '${vol}' has no dataset directory (absolute host path) to bind`);
  }
  for (const svc of input.services) {
    for (const mount of svc.volumes) {
      if (!input.volumes.includes(volumeName(mount)))
        throw new DockerError(
          `service '${svc.name}' mounts volume '${volumeName(mount)}', which the spec does not declare`,
        );
    }
  }
}

/** The compose document as a plain object (what `renderCompose` serialises). */
export function composeDocument(input: RenderInput): Record<string, unknown> {
  projectName(input.envId);
  check(input);
  const labels = { [ENV_LABEL]: input.envId };
  const doc: Record<string, unknown> = {
    services: Object.fromEntries(input.services.map((s) => [s.name, service(s, input)])),
  };
  if (input.network !== 'none') {
    doc.networks = {
      default: {
        driver: 'bridge',
        internal: input.egress === 'deny',
        driver_opts: { 'com.docker.network.bridge.name': bridgeName(input.envId) },
        labels,
        ...(input.subnet ? { ipam: { config: [{ subnet: input.subnet }] } } : {}),
      },
    };
  }
  if (input.volumes.length) {
    doc.volumes = Object.fromEntries(
      input.volumes.map((v) => [
        v,
        {
          driver: 'local',
          driver_opts: { type: 'none', o: 'bind', device: lit(input.volumePaths[v]) },
          labels,
        },
      ]),
    );
  }
  return doc;
}

/** The compose file text of an env. */
export function renderCompose(input: RenderInput): string {
  return composeText(input.envId, composeDocument(input));
}

/** The compose file text of a document `composeDocument` made. */
export function composeText(envId: string, doc: Record<string, unknown>): string {
  return `# Rendered by svcd for ${envId}; rewritten on every start.\n${stringify(doc)}`;
}
