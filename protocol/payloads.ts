// Command payloads as TypeBox schemas: the one definition of each payload's shape. `Payloads` and
// `BlobRef` in commands.ts are their `Static<>` types. The sidecar checks every payload on receipt
// against these (sidecar/payload.ts), after filling in each missing field that has a `default`.
import { type Static, Type } from '@sinclair/typebox';
import { BlobRefSchema } from './blob.ts';
import { FS_PAYLOADS } from './fs.ts';
import { PROCESS_PAYLOADS } from './processes.ts';
import {
  DEFAULT_DISK_MB,
  EgressSchema,
  MAX_DISK_MB,
  MAX_TIMEOUT_SEC,
  NetworkModeSchema,
  RuntimeSchema,
  ServiceRecordSchema,
  VerifierSpecSchema,
} from './spec.ts';

const Str = Type.String();
const StrList = Type.Array(Type.String());
const Empty = Type.Object({});
/** Fields a receiver treats as absent-means-empty. */
const OptStr = Type.String({ default: '' });
const OptStrList = Type.Array(Type.String(), { default: [] });
const Services = Type.Array(ServiceRecordSchema, { minItems: 1 });
const DiskMb = Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_DISK_MB, default: DEFAULT_DISK_MB }));
/** env.exec without a timeout_sec (spec: default 120 s). */
export const DEFAULT_EXEC_TIMEOUT_SEC = 120;

export { BlobRefSchema };

export const PAYLOAD_SCHEMAS = {
  'host.report': Empty,
  'env.create': Type.Object({
    version: OptStr,
    services: Services,
    volumes: OptStrList,
    from_snapshot: OptStr,
    warm: Type.Union([StrList, Type.Null()], { default: null }),
    egress: EgressSchema,
    /** The project context, fetched once from `blob` into the context dataset unless already there. */
    context: Type.Optional(Type.Object({ sha256: Str, blob: BlobRefSchema })),
    /** The agent service (`x-svc.agent.service`): the sidecar refuses to run it as uid 0. */
    agent: Type.Optional(Str),
    /** Disk limit across the volumes in MiB (`x-svc.disk_mb`). */
    disk_mb: DiskMb,
    /** The container runtime (`x-svc.runtime`); absent = the host's default (SVC_RUNTIME). */
    runtime: Type.Optional(RuntimeSchema),
    /** `none`: no network of its own (spec.ts NetworkModeSchema); absent = the stack's network. */
    network: Type.Optional(NetworkModeSchema),
  }),
  'env.snapshot': Type.Object({ name: Str, keep_paused: Type.Optional(StrList) }),
  'env.fork': Type.Object({
    from_env: Str,
    from_snapshot: Str,
    services: Services,
    volumes: OptStrList,
    egress: EgressSchema,
    agent: Type.Optional(Str),
    disk_mb: DiskMb,
    runtime: Type.Optional(RuntimeSchema),
    network: Type.Optional(NetworkModeSchema),
  }),
  'env.rollback': Type.Object({ snapshot: Str }),
  'env.exec': Type.Object({
    service: Str,
    cmd: Type.Array(Str, { minItems: 1 }),
    timeout_sec: Type.Optional(
      Type.Integer({ minimum: 1, maximum: MAX_TIMEOUT_SEC, default: DEFAULT_EXEC_TIMEOUT_SEC }),
    ),
  }),
  /**
   * Archives that do not fit in a frame come by `blob` (tar_b64 is then empty): the sidecar
   * GETs `url` with `Authorization: Bearer <token>` (one time, 10 minutes).
   */
  'env.put': Type.Object({ service: Str, path: Str, tar_b64: Str, blob: Type.Optional(BlobRefSchema) }),
  /** With `upload`, an archive too large for a frame is PUT there instead of returned inline. */
  'env.get': Type.Object({ service: Str, path: Str, upload: Type.Optional(BlobRefSchema) }),
  /** `resume`: unpause the agent again when the submission is refused (no snapshot follows). */
  'verify.collect': Type.Object({
    id: Str,
    agent_service: Str,
    collect: StrList,
    resume: Type.Optional(Type.Boolean()),
  }),
  'verify.run': Type.Object({
    id: Str,
    verifier: VerifierSpecSchema,
    refused: Type.Boolean({ default: false }),
  }),
  'env.destroy': Empty,
  'env.pause': Empty,
  'env.unpause': Empty,
  ...FS_PAYLOADS,
  ...PROCESS_PAYLOADS,
};

export type PayloadSchemas = typeof PAYLOAD_SCHEMAS;
export type PayloadTypes = { [K in keyof PayloadSchemas]: Static<PayloadSchemas[K]> };
export type { BlobRefType } from './blob.ts';
