// The stored records the API answers with (spec "Resources and their fields"), and their states
// as literal unions: the one definition that stores, routes, the OpenAPI document and the
// generated clients share. Field names are the spec's capitalised ones; objects allow further
// fields so a new field never breaks an old client.
import { type Static, Type } from '@sinclair/typebox';
import { Json, NullableTime, Str, StringEnum, Time } from './kit.ts';

/** Deployment statuses (spec "Deployment statuses"). */
export const DEPLOYMENT_STATUSES = ['pending', 'running', 'succeeded', 'failed', 'rolled_back'] as const;
/** Phase statuses (spec "Phase statuses"). */
export const PHASE_STATUSES = ['pending', 'running', 'ok', 'failed', 'skipped'] as const;
/**
 * Environment `Status`. The spec names `failed` and `destroyed`; the rest is ours: `empty`
 * (created, never deployed), `deploying`, `running`, `destroying`.
 */
export const ENV_STATUSES = ['empty', 'deploying', 'running', 'failed', 'destroying', 'destroyed'] as const;
/** `connected` for driver hosts; `unreachable` once a sidecar's stream drops. Ours: `new` before the first hello completes. */
export const HOST_STATUSES = ['connected', 'unreachable', 'new'] as const;
export const DEPLOYMENT_KINDS = [
  'deploy',
  'fork',
  'snapshot',
  'rollback',
  'verify',
  'destroy',
  'promote',
] as const;

export type DeploymentStatus = (typeof DEPLOYMENT_STATUSES)[number];
export type PhaseStatus = (typeof PHASE_STATUSES)[number];
export type EnvStatus = (typeof ENV_STATUSES)[number];
export type HostStatus = (typeof HOST_STATUSES)[number];
export type DeploymentKind = (typeof DEPLOYMENT_KINDS)[number];

const DeploymentStatusSchema = StringEnum(DEPLOYMENT_STATUSES);
const PhaseStatusSchema = StringEnum(PHASE_STATUSES);
const EnvStatusSchema = StringEnum(ENV_STATUSES);
const HostStatusSchema = StringEnum(HOST_STATUSES);
const DeploymentKindSchema = StringEnum(DEPLOYMENT_KINDS);

export const ErrorBody = Type.Object({ error: Type.String() }, { $id: 'Error' });

export const Team = Type.Object({ ID: Str, Name: Str, CreatedAt: Time });
export const TeamWithRole = Type.Object({ ID: Str, Name: Str, CreatedAt: Time, Role: Str });
export const User = Type.Object({ ID: Str, Email: Str, Login: Str, Name: Str, CreatedAt: Time });
export const ApiKey = Type.Object({
  ID: Str,
  TeamID: Str,
  Name: Str,
  CreatedBy: Str,
  CreatedAt: Time,
  LastUsedAt: NullableTime,
  RevokedAt: NullableTime,
});
export const Project = Type.Object({
  ID: Str,
  TeamID: Str,
  Name: Str,
  Kind: Str,
  Source: Str,
  CreatedAt: Time,
});
export const ProjectSource = Type.Object({
  ProjectID: Str,
  Repo: Str,
  DefaultBranch: Str,
  ComposePath: Str,
  InstallationID: Type.Number(),
  DeployBranches: Type.Union([Type.Boolean(), Type.Null()]),
  LastDeployedSHA: Str,
});
export const Environment = Type.Object({
  ID: Str,
  ProjectID: Str,
  Name: Str,
  Stage: Str,
  HostID: Str,
  ParentVersionID: Str,
  CurrentVersionID: Str,
  Status: EnvStatusSchema,
  CreatedAt: Time,
  Endpoints: Type.Record(Type.String(), Type.String()),
});
export const Version = Type.Object({
  ID: Str,
  ProjectID: Str,
  EnvID: Str,
  Number: Type.Number(),
  Spec: Json,
  Snapshot: Str,
  Healthy: Type.Boolean(),
  CreatedAt: Time,
});
/** One step up a fork's lineage: the environment it was forked from, and the version it forked. */
export const LineageStep = Type.Object({ environment: Environment, version: Version });
/** A fork's ancestors, nearest first, at most LINEAGE_MAX_DEPTH; empty for an environment that is no fork. */
export const Lineage = Type.Object({ ancestors: Type.Array(LineageStep) });
/** How many ancestors GET /v1/envs/{env}/lineage answers with at most. */
export const LINEAGE_MAX_DEPTH = 8;
export const Deployment = Type.Object({
  ID: Str,
  ProjectID: Str,
  EnvID: Str,
  Kind: DeploymentKindSchema,
  Status: DeploymentStatusSchema,
  VersionID: Str,
  TargetEnvID: Str,
  Params: Json,
  Error: Str,
  CreatedAt: Time,
  FinishedAt: NullableTime,
});
export const Phase = Type.Object({
  DeploymentID: Str,
  Seq: Type.Number(),
  Name: Str,
  Status: PhaseStatusSchema,
  Evidence: Type.Union([Json, Type.Null()]),
  Error: Str,
  StartedAt: NullableTime,
  FinishedAt: NullableTime,
});
export const Cloud = Type.Object({
  ID: Str,
  TeamID: Str,
  Provider: Str,
  Name: Str,
  Config: Json,
  CreatedAt: Time,
});
export const Host = Type.Object({
  ID: Str,
  TeamID: Str,
  CloudID: Str,
  Name: Str,
  Status: HostStatusSchema,
  ProviderRef: Str,
  LastSeenAt: NullableTime,
  CreatedAt: Time,
  Capabilities: Json,
  connected: Type.Boolean(),
});
export const Target = Type.Intersect([
  Host,
  Type.Object({
    kind: Str,
    provider: Type.Optional(Str),
    capabilities: Json,
    table: Type.Optional(Json),
  }),
]);
export const Event = Type.Object({
  ID: Str,
  TeamID: Str,
  Subject: Str,
  Kind: Str,
  Body: Type.Unknown(),
  At: Time,
});
export const Template = Type.Object({
  name: Str,
  kind: Str,
  description: Str,
  requires: Type.Optional(Type.Unknown()),
  compose: Str,
  warm: Type.Optional(Type.Array(Str)),
});
export const Installation = Type.Object({
  InstallationID: Type.Number(),
  TeamID: Str,
  AccountLogin: Str,
  CreatedAt: Time,
});

export const PoolStatus = Type.Object({
  version: Str,
  size: Type.Number(),
  ready: Type.Number(),
  starting: Type.Number(),
});

export type EnvironmentRecord = Static<typeof Environment>;
export type HostRecord = Static<typeof Host>;
