// The environment spec: what the control plane renders from a compose file and sends to a host.
// It is stored as a version's `Spec` and carried in env.create / env.fork payloads, so both sides
// (server/compose renders it, sidecar/ renders it back into a compose file) share these shapes.

export const DEFAULT_RESOURCES = { memory_mb: 4096, pids: 2048, cpus: 2.0 } as const;

/** Disk an environment may use across its volumes (`x-svc.disk_mb`), when the compose file does not say. */
export const DEFAULT_DISK_MB = 10_240;
export const MAX_DISK_MB = 16 * 1024 * 1024;

/** Zero in any field means "the sidecar default" (DEFAULT_RESOURCES). */
export interface Resources {
  memory_mb: number;
  pids: number;
  cpus: number;
}

export interface HealthCheck {
  /** Normalised compose form: ['CMD', ...argv] or ['CMD-SHELL', 'shell text'] or ['NONE']. */
  test: string[];
  /** Compose duration strings ('10s', '1m30s', '500ms'); empty when unset. */
  interval: string;
  retries: number;
  timeout?: string;
  start_period?: string;
}

export type DependsCondition = 'service_started' | 'service_healthy' | 'service_completed_successfully';

export interface ServiceRecord {
  name: string;
  /** Image reference as written in the compose file. Digests are read back after start. */
  image: string;
  env: Record<string, string>;
  /** Short syntax, normalised: '[published:]target[/protocol]'. The host IP part is dropped: the sidecar decides binding. */
  ports: string[];
  /** '<volume>:<path>' or '<volume>:<path>:ro'; only named volumes exist in a spec. */
  volumes: string[];
  health: HealthCheck | null;
  depends_on: Record<string, { condition: DependsCondition }>;
  /** As in the compose file: a string (split by compose, not a shell) or an argv list; null when unset. */
  command: string | string[] | null;
  entrypoint: string | string[] | null;
  /** '' when unset. */
  user: string;
  working_dir: string;
  resources: Resources;
  /** Files of the project context mounted into the service (relative binds, file secrets). */
  binds?: BindMount[];
  /** Built by the sidecar from the project context; `image` is then its content tag. */
  build?: BuildSpec;
  /** compose `storage_opt.size` in MiB: the writable layer's bound where the engine supports one. */
  layer_mb?: number;
}

/** The volume (dataset) that holds an environment's project context on the host. */
export const CONTEXT_VOLUME = 'svc.context';
/** Images the sidecar builds are tagged `svc-build:<sha256 of context digest and build options>`. */
export const BUILD_REPO = 'svc-build';

export interface BindMount {
  /** Path inside the project context, normalised ('' is the context itself, never '..'). */
  source: string;
  target: string;
  read_only: boolean;
}

export interface BuildSpec {
  /** Build context directory inside the project context ('' for the root). */
  context: string;
  /** Dockerfile path relative to the build context. */
  dockerfile: string;
  args: Record<string, string>;
  target: string;
}

/** The uploaded project context a version was deployed with (spec: PUT /v1/uploads). */
export interface ContextRef {
  upload: string;
  sha256: string;
  bytes: number;
}

export interface VerifierSpec {
  image?: string;
  service?: string;
  command: string | string[];
  /** Absolute paths collected from the agent service. */
  collect: string[];
  timeout_sec: number;
  /** A directory of the project context mounted read-only at /tests in the grader's fork only. */
  tests?: string;
  /** Variables set for the verifier run only (Harbor's [verifier].env). */
  env?: Record<string, string>;
}

export type Egress = 'deny' | 'allow';

export interface EnvSpec {
  services: ServiceRecord[];
  /** Named volumes declared by the stack; each becomes one dataset on the host. */
  volumes: string[];
  egress: Egress;
  agent: { service: string } | null;
  verifier: VerifierSpec | null;
  /** Present when the project was deployed with an uploaded context. */
  context?: ContextRef;
  /** Disk limit across the environment's volumes in MiB (`x-svc.disk_mb`); absent in older versions (the default). */
  disk_mb?: number;
}

/** The disk limit an environment gets: its spec's, else the default. */
export const diskLimitMb = (spec: { disk_mb?: number }) =>
  spec.disk_mb && spec.disk_mb > 0 ? spec.disk_mb : DEFAULT_DISK_MB;

export function effectiveResources(r: Resources): Resources {
  return {
    memory_mb: r.memory_mb > 0 ? r.memory_mb : DEFAULT_RESOURCES.memory_mb,
    pids: r.pids > 0 ? r.pids : DEFAULT_RESOURCES.pids,
    cpus: r.cpus > 0 ? r.cpus : DEFAULT_RESOURCES.cpus,
  };
}
