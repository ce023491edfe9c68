// The E2B-compatible surface's wire records (E2B's API, `spec/openapi.yml`, as the `e2b` SDK reads
// it): request bodies and answers as TypeBox schemas. Field names are E2B's, not svc's.
import { type Static, Type } from '@sinclair/typebox';

const Str = Type.String();
const Time = Type.String({ description: 'RFC 3339' });
const Metadata = Type.Record(Type.String({ maxLength: 256 }), Type.String({ maxLength: 4096 }), {
  maxProperties: 64,
});

/** Every refusal: the HTTP status again as `code` (the SDK reads `code === 404` as NotFound). */
export const E2bError = Type.Object({ code: Type.Integer(), message: Str }, { $id: 'E2bError' });

const Timeout = Type.Integer({ minimum: 0, maximum: 86_400, description: 'seconds' });

/** `POST /sandboxes`, `POST /v2/sandboxes` (E2B's NewSandbox; fields svc has no use for are accepted). */
export const E2bNewSandbox = Type.Object(
  {
    templateID: Type.String({ minLength: 1, maxLength: 512 }),
    timeout: Type.Optional(Timeout),
    metadata: Type.Optional(Metadata),
    envVars: Type.Optional(
      Type.Record(Type.String({ maxLength: 256 }), Type.String({ maxLength: 65_536 }), {
        maxProperties: 256,
      }),
    ),
    allow_internet_access: Type.Optional(Type.Boolean()),
    autoPause: Type.Optional(Type.Boolean()),
    autoPauseMemory: Type.Optional(Type.Boolean()),
    autoResume: Type.Optional(Type.Unknown()),
    secure: Type.Optional(Type.Boolean()),
    network: Type.Optional(Type.Unknown()),
    mcp: Type.Optional(Type.Unknown()),
    iam: Type.Optional(Type.Unknown()),
    volumeMounts: Type.Optional(Type.Array(Type.Unknown(), { maxItems: 0 })),
  },
  { additionalProperties: false },
);
export type E2bNewSandboxT = Static<typeof E2bNewSandbox>;

/** `POST /sandboxes/{id}/timeout`, `…/connect` (E2B's SandboxTimeoutRequest, ConnectSandbox). */
export const E2bTimeoutBody = Type.Object({ timeout: Timeout }, { additionalProperties: false });
export const E2bConnectBody = Type.Object(
  { timeout: Type.Optional(Timeout), memory: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
export const E2bPauseBody = Type.Object(
  { memory: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
export const E2bForkBody = Type.Object(
  { timeout: Type.Optional(Timeout), count: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })) },
  { additionalProperties: false },
);

/** The create and connect answer (E2B's Sandbox). */
export const E2bSandbox = Type.Object({
  templateID: Str,
  sandboxID: Str,
  clientID: Str,
  envdVersion: Str,
  envdAccessToken: Str,
  domain: Type.Null(),
});
export type E2bSandboxT = Static<typeof E2bSandbox>;

const Listed = {
  templateID: Str,
  sandboxID: Str,
  clientID: Str,
  startedAt: Time,
  endAt: Time,
  cpuCount: Type.Integer(),
  memoryMB: Type.Integer(),
  diskSizeMB: Type.Integer(),
  metadata: Type.Record(Str, Str),
  state: Type.Union([Type.Literal('running'), Type.Literal('paused')]),
  envdVersion: Str,
};
/** `GET /v2/sandboxes`, `GET /sandboxes` (E2B's ListedSandbox). */
export const E2bListedSandbox = Type.Object(Listed);
export type E2bListedSandboxT = Static<typeof E2bListedSandbox>;
/** `GET /sandboxes/{id}` (E2B's SandboxDetail): the listed fields and the access token. */
export const E2bSandboxDetail = Type.Object({ ...Listed, envdAccessToken: Str, domain: Type.Null() });

/** One entry of a fork's answer: the new sandbox, or why it could not start. */
export const E2bForkResult = Type.Object({
  sandbox: Type.Optional(E2bSandbox),
  error: Type.Optional(E2bError),
});

/** `GET /sandboxes/{id}/metrics` (E2B's SandboxMetric). */
export const E2bMetric = Type.Object({
  timestamp: Time,
  timestampUnix: Type.Integer(),
  cpuCount: Type.Integer(),
  cpuUsedPct: Type.Number(),
  memUsed: Type.Integer(),
  memTotal: Type.Integer(),
  memCache: Type.Integer(),
  diskUsed: Type.Integer(),
  diskTotal: Type.Integer(),
});

/** envd's `POST /files` answer: one entry per file written (E2B's EntryInfo). */
export const EnvdEntry = Type.Object({ name: Str, type: Type.Literal('file'), path: Str });
