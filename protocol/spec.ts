// The environment spec: what the control plane renders from a compose file and sends to a host.
// It is stored as a version's `Spec` and carried in env.create / env.fork payloads, so both sides
// (server/compose renders it, sidecar/ renders it back into a compose file) share these shapes,
// defined once as TypeBox schemas (the types are their `Static<>`), so payload checks can use them.
// A `default` marks a field a receiver fills in when it is missing (the sidecar applies them with
// Value.Default before checking a payload); the control plane always sends every field.
import { type Static, Type } from '@sinclair/typebox';

const Str = Type.String();
const Num = Type.Number();
const StrList = Type.Array(Type.String());
const StrMap = Type.Record(Type.String(), Type.String());

export const DEFAULT_RESOURCES = { memory_mb: 4096, pids: 2048, cpus: 2.0 } as const;

/** Disk an environment may use across its volumes (`x-svc.disk_mb`), when the compose file does not say. */
export const DEFAULT_DISK_MB = 10_240;
export const MAX_DISK_MB = 16 * 1024 * 1024;
/** The longest a command (exec, verifier) may be given, in seconds. */
export const MAX_TIMEOUT_SEC = 86_400;
export const DEFAULT_VERIFIER_TIMEOUT_SEC = 600;

/** Zero in any field means "the sidecar default" (DEFAULT_RESOURCES). */
export const ResourcesSchema = Type.Object(
  { memory_mb: Num, pids: Num, cpus: Num },
  { default: { memory_mb: 0, pids: 0, cpus: 0 } },
);
export type Resources = Static<typeof ResourcesSchema>;

export const HealthCheckSchema = Type.Object({
  /** Normalised compose form: ['CMD', ...argv] or ['CMD-SHELL', 'shell text'] or ['NONE']. */
  test: StrList,
  /** Compose duration strings ('10s', '1m30s', '500ms'); empty when unset. */
  interval: Str,
  retries: Num,
  timeout: Type.Optional(Str),
  start_period: Type.Optional(Str),
});
export type HealthCheck = Static<typeof HealthCheckSchema>;

export const DependsConditionSchema = Type.Union([
  Type.Literal('service_started'),
  Type.Literal('service_healthy'),
  Type.Literal('service_completed_successfully'),
]);
export type DependsCondition = Static<typeof DependsConditionSchema>;

/** The volume (dataset) that holds an environment's project context on the host. */
export const CONTEXT_VOLUME = 'svc.context';
/** Images the sidecar builds are tagged `svc-build:<sha256 of context digest and build options>`. */
export const BUILD_REPO = 'svc-build';

export const BindMountSchema = Type.Object({
  /** Path inside the project context, normalised ('' is the context itself, never '..'). */
  source: Str,
  target: Str,
  read_only: Type.Boolean({ default: false }),
});
export type BindMount = Static<typeof BindMountSchema>;

export const BuildSpecSchema = Type.Object({
  /** Build context directory inside the project context ('' for the root). */
  context: Str,
  /** Dockerfile path relative to the build context. */
  dockerfile: Str,
  args: StrMap,
  target: Str,
});
export type BuildSpec = Static<typeof BuildSpecSchema>;

const Argv = Type.Union([Str, StrList, Type.Null()], { default: null });
export const ServiceRecordSchema = Type.Object({
  name: Str,
  /** Image reference as written in the compose file. Digests are read back after start. */
  image: Str,
  env: StrMap,
  /** Short syntax, normalised: '[published:]target[/protocol]'. The host IP part is dropped: the sidecar decides binding. */
  ports: StrList,
  /** '<volume>:<path>' or '<volume>:<path>:ro'; only named volumes exist in a spec. */
  volumes: StrList,
  health: Type.Union([HealthCheckSchema, Type.Null()], { default: null }),
  depends_on: Type.Record(Type.String(), Type.Object({ condition: DependsConditionSchema }), { default: {} }),
  /** As in the compose file: a string (split by compose, not a shell) or an argv list; null when unset. */
  command: Argv,
  entrypoint: Argv,
  /** '' when unset. */
  user: Type.String({ default: '' }),
  working_dir: Type.String({ default: '' }),
  resources: ResourcesSchema,
  /** Files of the project context mounted into the service (relative binds, file secrets). */
  binds: Type.Optional(Type.Array(BindMountSchema)),
  /** Built by the sidecar from the project context; `image` is then its content tag. */
  build: Type.Optional(BuildSpecSchema),
  /** compose `storage_opt.size` in MiB: the writable layer's bound where the engine supports one. */
  layer_mb: Type.Optional(Type.Integer({ minimum: 1 })),
});
export type ServiceRecord = Static<typeof ServiceRecordSchema>;

/** The uploaded project context a version was deployed with (spec: PUT /v1/uploads). */
export const ContextRefSchema = Type.Object({
  upload: Str,
  sha256: Str,
  bytes: Num,
  /** Where the compose file sits inside the context when the context is wider than its directory. */
  compose_path: Type.Optional(Str),
});
export type ContextRef = Static<typeof ContextRefSchema>;

/** Terminal-Bench's test-output parsers: the reward is 1 when every test they find passed, else 0. */
export const VERIFIER_PARSERS = ['pytest', 'swebench'] as const;
export type VerifierParser = (typeof VERIFIER_PARSERS)[number];

/**
 * A directory (or file) of the project context, or several layered in order into one /tests (a
 * later entry's files replace same-named ones: Harbor merges a step's tests over the task's).
 */
const TestsSchema = Type.Union([Str, StrList]);

/** One step of a multi-step (Harbor schema 1.1) task: graded with its own tests, env and timeout. */
export const VerifierStepSchema = Type.Object({
  name: Str,
  /** The step's own tests, layered over the verifier's `tests`. */
  tests: Type.Optional(Str),
  env: Type.Optional(StrMap),
  timeout_sec: Type.Optional(Num),
  /** Harbor's early stop: the remaining steps are skipped when this step's reward is below it. */
  min_reward: Type.Optional(Num),
  /** Files of the context placed in the agent's working directory before the step (svc step). */
  workdir: Type.Optional(Str),
  instruction: Type.Optional(Str),
});
export type VerifierStep = Static<typeof VerifierStepSchema>;

export const VerifierSpecSchema = Type.Object({
  image: Type.Optional(Str),
  service: Type.Optional(Str),
  command: Type.Union([Str, StrList]),
  /** Absolute paths collected from the agent service. */
  collect: Type.Array(Str, { default: [] }),
  timeout_sec: Type.Integer({ minimum: 1, maximum: MAX_TIMEOUT_SEC, default: DEFAULT_VERIFIER_TIMEOUT_SEC }),
  /** Directories of the project context mounted read-only at /tests in the grader's fork only (later ones win). */
  tests: Type.Optional(TestsSchema),
  /** Variables set for the verifier run only (Harbor's [verifier].env). */
  env: Type.Optional(StrMap),
  /** The reward comes from the verifier's output through this parser instead of a reward file. */
  parser: Type.Optional(Type.Union(VERIFIER_PARSERS.map((p) => Type.Literal(p)))),
  steps: Type.Optional(Type.Array(VerifierStepSchema)),
});
export type VerifierSpec = Static<typeof VerifierSpecSchema>;

/** The tests entries of a verifier, in layering order. */
export const testsList = (tests: VerifierSpec['tests']): string[] =>
  tests === undefined ? [] : typeof tests === 'string' ? [tests] : tests;

/**
 * The verifier a step grades with: the step's tests over the task's, the step's variables over the
 * task's, the step's timeout when it has one. Without a step, the verifier itself (steps left out).
 */
export function verifierForStep(v: VerifierSpec, step?: string): VerifierSpec {
  const { steps, ...base } = v;
  if (step === undefined) return base;
  const s = steps?.find((x) => x.name === step);
  if (!s) throw new Error(`unknown step '${step}'`);
  const tests = [...testsList(base.tests), ...(s.tests === undefined ? [] : [s.tests])];
  const env = { ...base.env, ...s.env };
  return {
    ...base,
    ...(tests.length ? { tests: tests.length === 1 ? tests[0] : tests } : {}),
    ...(Object.keys(env).length ? { env } : {}),
    timeout_sec: s.timeout_sec ?? base.timeout_sec,
  };
}

export const EgressSchema = Type.Union([Type.Literal('deny'), Type.Literal('allow')], { default: 'deny' });
export type Egress = Static<typeof EgressSchema>;

/**
 * The container runtime of an environment (`x-svc.runtime`): `runc` (Docker's default) or `gvisor`
 * (gVisor's `runsc`, a user-space kernel between the services and the host's). Absent in a spec:
 * the host's default (svcd's SVC_RUNTIME, `runc` unless set).
 */
export const RUNTIMES = ['runc', 'gvisor'] as const;
export const RuntimeSchema = Type.Union(RUNTIMES.map((r) => Type.Literal(r)));
export type Runtime = (typeof RUNTIMES)[number];
export const isRuntime = (v: unknown): v is Runtime => (RUNTIMES as readonly unknown[]).includes(v);

/**
 * `none`: the stack has no network of its own; its one service sees only loopback (Docker's
 * `none` network). Only for one service with `egress: deny` and nothing published, where a network
 * would carry nothing but what deny forbids: no peer to reach, no port to publish. The image form
 * of `POST /v1/sandboxes` with deny asks for it; compose projects keep their internal network.
 * Absent: the stack's network (render.ts).
 */
export const NetworkModeSchema = Type.Literal('none');
export type NetworkMode = Static<typeof NetworkModeSchema>;

/**
 * The payload fields a spec passes to the host as they are, each absent when the spec leaves it
 * out: its runtime (absent: the host's default) and its network mode.
 */
export const hostFields = (spec: {
  runtime?: Runtime;
  network?: NetworkMode;
}): { runtime?: Runtime; network?: NetworkMode } => ({
  ...(spec.runtime ? { runtime: spec.runtime } : {}),
  ...(spec.network ? { network: spec.network } : {}),
});

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
  /** `x-svc.runtime`; absent = the host's default runtime. */
  runtime?: Runtime;
  /** `none` for a deny image sandbox (NetworkModeSchema); absent = the stack's own network. */
  network?: NetworkMode;
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
