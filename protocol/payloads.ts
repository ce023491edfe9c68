// Command payloads as TypeBox schemas: the one definition of each payload's shape. `Payloads` and
// `BlobRef` in commands.ts are their `Static<>` types.
import { type Static, Type } from '@sinclair/typebox';
import { EgressSchema, ServiceRecordSchema, VerifierSpecSchema } from './spec.ts';

const Str = Type.String();
const StrList = Type.Array(Type.String());
const Empty = Type.Object({});

/** A one-time HTTP location on the control plane for archive bytes. */
export const BlobRefSchema = Type.Object({ url: Str, token: Str });

export const PAYLOAD_SCHEMAS = {
  'host.report': Empty,
  'env.create': Type.Object({
    version: Str,
    services: Type.Array(ServiceRecordSchema),
    volumes: StrList,
    from_snapshot: Str,
    warm: Type.Union([StrList, Type.Null()]),
    egress: EgressSchema,
    /** The project context, fetched once from `blob` into the context dataset unless already there. */
    context: Type.Optional(Type.Object({ sha256: Str, blob: BlobRefSchema })),
    /** The agent service (`x-svc.agent.service`): the sidecar refuses to run it as uid 0. */
    agent: Type.Optional(Str),
    /** Disk limit across the volumes in MiB (`x-svc.disk_mb`). */
    disk_mb: Type.Optional(Type.Number()),
  }),
  'env.snapshot': Type.Object({ name: Str, keep_paused: Type.Optional(StrList) }),
  'env.fork': Type.Object({
    from_env: Str,
    from_snapshot: Str,
    services: Type.Array(ServiceRecordSchema),
    volumes: StrList,
    egress: EgressSchema,
    agent: Type.Optional(Str),
    disk_mb: Type.Optional(Type.Number()),
  }),
  'env.rollback': Type.Object({ snapshot: Str }),
  'env.exec': Type.Object({ service: Str, cmd: StrList, timeout_sec: Type.Optional(Type.Number()) }),
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
  'verify.run': Type.Object({ id: Str, verifier: VerifierSpecSchema, refused: Type.Boolean() }),
  'env.destroy': Empty,
  'env.pause': Empty,
  'env.unpause': Empty,
};

export type PayloadSchemas = typeof PAYLOAD_SCHEMAS;
export type PayloadTypes = { [K in keyof PayloadSchemas]: Static<PayloadSchemas[K]> };
export type BlobRefType = Static<typeof BlobRefSchema>;
