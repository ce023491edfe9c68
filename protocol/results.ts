// Command results as TypeBox schemas: the one definition of each result's shape. The TypeScript types
// (`Results`, `Capabilities` in commands.ts) are derived from these by `Static<>`, and the control
// plane's receipt check (server/hosts/result-check.ts) is compiled from them.
import { type Static, Type } from '@sinclair/typebox';
import { FS_RESULTS } from './fs.ts';
import { PROCESS_RESULTS } from './processes.ts';

const Str = Type.String();
const Num = Type.Number();
const StrList = Type.Array(Type.String());
const StrMap = Type.Record(Type.String(), Type.String());

export const CapabilitiesSchema = Type.Object({
  hostname: Str,
  os: Str,
  arch: Str,
  cpus: Num,
  memory_mb: Num,
  disk_gb: Num,
  storage: Type.Union([Type.Literal('zfs'), Type.Literal('btrfs'), Type.Literal('dir')]),
  /** How clones share data: `xfs-loop` = dir storage on svcd's own XFS image. */
  cow: Type.Optional(
    Type.Union([
      Type.Literal('zfs'),
      Type.Literal('btrfs'),
      Type.Literal('reflink'),
      Type.Literal('xfs-loop'),
      Type.Literal('none'),
    ]),
  ),
  docker: Str,
  compose: Type.Boolean(),
  netns: Type.Boolean(),
  public_ip: Type.Optional(Str),
  denvd_version: Str,
  /** Container runtimes this host runs (`runc`, and `gvisor` where runsc is registered with Docker). */
  runtimes: Type.Optional(StrList),
  /** The host's default runtime (SVC_RUNTIME). */
  default_runtime: Type.Optional(Str),
  /** gVisor as found: runsc's version, its platform (ptrace, kvm, systrap) and network mode. */
  gvisor: Type.Optional(Type.Object({ version: Str, platform: Str, network: Str })),
});

export const RESULT_SCHEMAS = {
  'host.report': Type.Object({
    capabilities: CapabilitiesSchema,
    environments: Type.Optional(StrList),
    load_avg: Type.Optional(Type.Array(Num)),
  }),
  'env.create': Type.Object({
    endpoints: StrMap,
    /** Milliseconds from the start of `up` to every service healthy. */
    started_in: Num,
    digests: StrMap,
    storage: Str,
    /** `denied (provider)`: a hosted provider was asked to deny egress; svc did not probe it. */
    egress: Type.Union([
      Type.Literal('allowed'),
      Type.Literal('denied (verified)'),
      Type.Literal('denied (provider)'),
    ]),
    /** Driver hosts: what the provider enforces of the egress rule, in words. */
    enforcement: Type.Optional(Str),
    /** Driver hosts: what becomes of the spec's resource caps, in words. */
    caps: Type.Optional(Str),
    /** Driver hosts: the provider's sandbox id. */
    sandbox: Type.Optional(Str),
    /** How the disk limit is enforced on this host (e.g. 'xfs project quota'); older sidecars omit it. */
    disk_quota: Type.Optional(Str),
    /** The runtime the services run under, and gVisor's platform when it is gvisor. */
    runtime: Type.Optional(Str),
    runtime_platform: Type.Optional(Str),
    /** Milliseconds per step on the host (storage, render, firewall, create, start, probe...). */
    timings: Type.Optional(Type.Record(Str, Num)),
  }),
  'env.snapshot': Type.Object({
    snapshot: Str,
    datasets: StrList,
    frozen_for: Num,
    consistent: Type.Boolean(),
    /** Milliseconds per step on the host (checkpoints, pause, capture, thaw, health). */
    timings: Type.Optional(Type.Record(Str, Num)),
  }),
  'env.fork': Type.Object({ forked_in: Num, endpoints: StrMap }),
  'env.rollback': Type.Object({ snapshot: Str, endpoints: StrMap }),
  'env.exec': Type.Object({ exit_code: Num, stdout: Str, stderr: Str }),
  'env.put': Type.Object({ path: Str }),
  'env.get': Type.Object({
    tar_b64: Str,
    uploaded: Type.Optional(Type.Boolean()),
    bytes: Type.Optional(Num),
  }),
  'verify.collect': Type.Object({
    files: Num,
    bytes: Num,
    missing: StrList,
    refused: StrList,
    /** The agent's processes when it was frozen (`<pid> <user> <args>`). */
    processes: Type.Optional(StrList),
  }),
  'verify.run': Type.Object({
    reward: Type.Union([Num, Type.Null()]),
    exit_code: Type.Union([Num, Type.Null()]),
    stdout: Str,
    stderr: Str,
    source: Str,
    ran_for: Num,
    /** Image id the verifier ran from, and the digest of the tests it saw (null without tests). */
    verifier_image: Type.Optional(Str),
    tests_digest: Type.Optional(Type.Union([Str, Type.Null()])),
  }),
  'env.destroy': Type.Object({ destroyed: Str }),
  /** Services whose containers changed state. */
  'env.pause': Type.Object({ services: StrList }),
  'env.unpause': Type.Object({ services: StrList }),
  ...FS_RESULTS,
  ...PROCESS_RESULTS,
};

export type ResultSchemas = typeof RESULT_SCHEMAS;
export type ResultTypes = { [K in keyof ResultSchemas]: Static<ResultSchemas[K]> };
export type CapabilitiesType = Static<typeof CapabilitiesSchema>;

/**
 * The fields the orchestrator reads from each result, checked on receipt before anything trusts them.
 * The other fields are informational and older sidecars or providers may omit them.
 */
export const RESULT_READS: { [K in keyof ResultSchemas]?: (keyof ResultSchemas[K]['properties'])[] } = {
  'host.report': ['capabilities'],
  'env.create': ['endpoints', 'started_in'],
  'env.snapshot': ['snapshot', 'frozen_for'],
  'env.fork': ['forked_in', 'endpoints'],
  'env.rollback': ['snapshot'],
  'env.exec': ['exit_code', 'stdout', 'stderr'],
  'env.get': ['tar_b64'],
  'env.pause': ['services'],
  'env.unpause': ['services'],
  'verify.collect': ['files', 'bytes', 'missing', 'refused'],
  'verify.run': ['reward', 'source'],
  'fs.stat': ['refusal', 'entry'],
  'fs.list': ['refusal', 'entries', 'truncated'],
  'fs.mkdir': ['refusal'],
  'fs.move': ['refusal'],
  'fs.remove': ['refusal'],
  'fs.read': ['refusal', 'size'],
  'fs.write': ['refusal', 'size'],
  'fs.watch': ['refusal'],
  'proc.start': ['pid', 'started_at'],
  'proc.list': ['processes'],
  'proc.attach': ['process'],
};
