// The HTTP API's answers as TypeBox schemas (spec "Resources and their fields", "Endpoints"): one
// definition per record, used for the OpenAPI document (and so the generated clients), checked
// against every JSON answer in tests, and read by the CLI. Field names of stored objects are the
// spec's capitalised ones; objects allow further fields so a new field never breaks an old client.
import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { Json, Str } from './api/kit.ts';
import {
  ApiKey,
  Cloud,
  Deployment,
  Environment,
  Event,
  Host,
  Installation,
  Lineage,
  Phase,
  PoolStatus,
  Project,
  ProjectSource,
  Target,
  Team,
  TeamWithRole,
  Template,
  User,
  Version,
} from './api/records.ts';
import { FS_LIMITS, FsEntrySchema, FsEventSchema } from './fs.ts';
import { MAX_STDIN_CHUNK, MAX_TTY, ProcessInfoSchema, SIGNALS } from './processes.ts';

export * from './api/records.ts';

/** A started deployment: `{deployment, phases}` (202). */
export const Started = Type.Object({ deployment: Deployment, phases: Type.Array(Phase) });
export const DeploymentDetail = Started;
export const ExecResult = Type.Object({ exit_code: Type.Number(), stdout: Str, stderr: Str });
export const DeviceCode = Type.Object({
  device_code: Str,
  user_code: Str,
  verification_uri: Str,
  verification_uri_complete: Str,
  expires_in: Type.Number(),
  interval: Type.Number(),
});
export const DeviceToken = Type.Object({ api_key: Str, team: Team });
export const Me = Type.Object({ team: Team, teams: Type.Array(TeamWithRole), user: Type.Optional(User) });
export const JoinToken = Type.Object({ token: Str, expires_in_sec: Type.Number(), command: Str });
export const SandboxCreated = Type.Object({ environment: Environment, deployment: Deployment });

/** `count` on POST /v1/envs/{env}/fork and POST /v1/sandboxes: that many forks of one version. */
export const ForkCount = Type.Integer({
  minimum: 1,
  maximum: 100,
  description:
    'Fork this many new environments (1-100) from the one snapshot of the version; the answer lists each fork or its own error. Without it the answer is the single-fork one.',
});
/** A fork of a fan-out that did not start or is not healthy: its name, why, and the status one alone would get. */
export const ForkFailed = Type.Object({
  name: Str,
  error: Str,
  status: Type.Number(),
  environment: Type.Optional(Environment),
  deployment: Type.Optional(Deployment),
});
const FanOutHead = {
  fanout: Type.String({
    description: 'The id every fork of this fan-out carries (clone evidence `fanout.id`)',
  }),
  version: Str,
  snapshot: Type.String({ description: 'The one snapshot every fork clones' }),
};
/** POST /v1/envs/{env}/fork with `count` (202): each fork started, or its own error. */
export const ForksStarted = Type.Object({
  ...FanOutHead,
  forks: Type.Array(
    Type.Union([
      Type.Object({ environment: Environment, deployment: Deployment, phases: Type.Array(Phase) }),
      ForkFailed,
    ]),
  ),
});
/** POST /v1/sandboxes with `count` (201): each sandbox healthy, or its own error. */
export const SandboxesCreated = Type.Object({
  ...FanOutHead,
  sandboxes: Type.Array(Type.Union([SandboxCreated, ForkFailed])),
});
// The file API (GET/PUT/DELETE /v1/envs/{env}/fs and fs/*): entries, answers, request bodies and queries.
const Service = Type.String({ minLength: 1, maxLength: 200, description: 'A service of the environment' });
const ContainerPath = Type.String({
  minLength: 1,
  maxLength: 4096,
  description: "An absolute path inside the service's container, without '..'",
});
export const FsEntry = FsEntrySchema;
export const FsList = Type.Object({
  entries: Type.Array(FsEntrySchema),
  truncated: Type.Boolean({
    description: `More entries than the limit (at most ${FS_LIMITS.maxListEntries})`,
  }),
});
export const FsWritten = Type.Object({ path: Str, size: Type.Integer() });
export const FsMade = Type.Object({
  path: Str,
  created: Type.Boolean({ description: 'false: it already existed' }),
});
export const FsEvent = FsEventSchema;
export const FsQuery = Type.Object({ service: Service, path: ContainerPath });
export const FsListQuery = Type.Object({
  service: Service,
  path: ContainerPath,
  depth: Type.Optional(
    Type.String({
      pattern: '^([1-9]|1[0-6])$',
      description: `Levels below path, 1 to ${FS_LIMITS.maxDepth} (default 1)`,
    }),
  ),
});
export const FsWriteQuery = Type.Object({
  service: Service,
  path: ContainerPath,
  mode: Type.Optional(
    Type.String({
      pattern: '^[0-7]{3,4}$',
      description: 'Octal permission bits (default 644); no setuid/setgid/sticky',
    }),
  ),
});
export const FsMoveBody = Type.Object(
  { service: Service, from: ContainerPath, to: ContainerPath },
  { additionalProperties: false },
);
export const FsMkdirBody = Type.Object(
  { service: Service, path: ContainerPath },
  { additionalProperties: false },
);
export type FsEntryRecord = Static<typeof FsEntry>;
export type FsListBody = Static<typeof FsList>;
export type FsEventRecord = Static<typeof FsEvent>;
// ---- Live processes (spec "Live processes") ----

/** A live process: GET /v1/envs/{env}/processes lists them, GET …/processes/{pid} answers one. */
export const Process = ProcessInfoSchema;
const Dim = Type.Integer({ minimum: 1, maximum: MAX_TTY });
const Signal = Type.Union(
  SIGNALS.map((s) => Type.Literal(s)),
  { description: 'A signal name without SIG' },
);
/** Base64 of at most MAX_STDIN_CHUNK bytes. */
const Stdin = Type.String({
  maxLength: Math.ceil(MAX_STDIN_CHUNK / 3) * 4,
  description: `Base64 of at most ${MAX_STDIN_CHUNK} bytes`,
});
export const ProcessStartRequest = Type.Object(
  {
    service: Type.String({ minLength: 1, maxLength: 200 }),
    cmd: Type.Array(Type.String({ maxLength: 65536 }), { minItems: 1, maxItems: 4096 }),
    env: Type.Optional(Type.Record(Type.String({ maxLength: 1024 }), Type.String({ maxLength: 65536 }))),
    cwd: Type.Optional(Type.String({ maxLength: 4096, description: 'Absolute working directory' })),
    user: Type.Optional(
      Type.String({ maxLength: 200, description: "user, uid or uid:gid; default the container's" }),
    ),
    stdin: Type.Optional(Type.Boolean({ description: 'Keep stdin open for input (default false)' })),
    tty: Type.Optional(Type.Object({ rows: Dim, cols: Dim }, { additionalProperties: false })),
  },
  { additionalProperties: false },
);
export const ProcessStarted = Type.Object({ pid: Str });
export const ProcessInputRequest = Type.Object(
  {
    data: Type.Optional(Stdin),
    close: Type.Optional(
      Type.Boolean({
        description:
          "Close stdin (after data, when both); not a terminal's (409): send Ctrl-D (0x04) instead",
      }),
    ),
  },
  { additionalProperties: false },
);
export const ProcessSignalRequest = Type.Object({ signal: Signal }, { additionalProperties: false });
export const ProcessStreamQuery = Type.Object({
  since: Type.Optional(
    Type.String({
      pattern: '^[0-9]{1,15}$',
      description: 'A seq: replay what the buffer still holds after it (default 0: all of it)',
    }),
  ),
});
/** What the stream sends, one JSON object per SSE `data:` or WebSocket text frame. */
export const ProcessStreamEvent = Type.Union([
  Type.Object({
    type: Type.Union([Type.Literal('stdout'), Type.Literal('stderr')]),
    seq: Type.Integer(),
    data: Type.String({ description: 'base64' }),
  }),
  Type.Object({ type: Type.Literal('gap'), from: Type.Integer(), to: Type.Integer() }),
  Type.Object({
    type: Type.Literal('end'),
    exit_code: Type.Union([Type.Integer(), Type.Null()]),
    signal: Type.Optional(Str),
    reason: Type.Optional(Str),
  }),
  Type.Object(
    { type: Type.Literal('error'), error: Str },
    { description: 'WebSocket only: a client message the host refused (the stream goes on)' },
  ),
]);
/** What a WebSocket client may send. */
export const ProcessClientMessage = Type.Union([
  Type.Object({ type: Type.Literal('input'), data: Stdin }),
  Type.Object({ type: Type.Literal('close_stdin') }),
  Type.Object({ type: Type.Literal('resize'), rows: Dim, cols: Dim }),
  Type.Object({ type: Type.Literal('signal'), signal: Signal }),
]);
export type ProcessRecord = Static<typeof Process>;
export type ProcessStartBody = Static<typeof ProcessStartRequest>;
export type ProcessInputBody = Static<typeof ProcessInputRequest>;
export type ProcessSignalBody = Static<typeof ProcessSignalRequest>;
export type ProcessStreamEventBody = Static<typeof ProcessStreamEvent>;
export type ProcessClientMessageBody = Static<typeof ProcessClientMessage>;

export type DeploymentRecord = Static<typeof Deployment>;
export type PhaseRecord = Static<typeof Phase>;
export type StartedBody = Static<typeof Started>;
export type ForksStartedBody = Static<typeof ForksStarted>;
export type MeBody = Static<typeof Me>;
export type DeviceCodeBody = Static<typeof DeviceCode>;
export type DeviceTokenBody = Static<typeof DeviceToken>;
export type ExecBody = Static<typeof ExecResult>;
export type TemplateRecord = Static<typeof Template>;

const list = <K extends string>(key: K, item: TSchema) => Type.Object({ [key]: Type.Array(item) });

/** The success answers of every route that answers JSON, by `METHOD /route`. */
export const RESPONSES: Record<string, Record<number, TSchema>> = {
  'GET /health': { 200: Type.Object({ status: Type.Literal('ok') }) },
  'POST /auth/dev-login': { 200: Type.Object({ token: Str }) },
  'POST /v1/device/code': { 200: DeviceCode },
  'POST /v1/device/approve': {
    200: Type.Object({ approved: Type.Literal(true), key_id: Str, team_id: Str }),
  },
  'POST /v1/device/token': { 200: DeviceToken },
  'GET /v1/me': { 200: Me },
  'GET /v1/teams': { 200: list('teams', TeamWithRole) },
  'POST /v1/teams': { 201: Type.Object({ team: Team }) },
  'GET /v1/keys': { 200: list('keys', ApiKey) },
  'POST /v1/keys': { 201: Type.Object({ key: ApiKey, api_key: Str }) },
  'DELETE /v1/keys/:id': { 200: Type.Object({ revoked: Type.Literal(true) }) },
  'GET /v1/templates': { 200: Type.Object({ kinds: Type.Array(Str), templates: Type.Array(Template) }) },
  'GET /v1/projects': { 200: list('projects', Project) },
  'POST /v1/projects': { 201: Type.Object({ project: Project, environments: Type.Array(Environment) }) },
  'GET /v1/projects/:project/envs': { 200: list('environments', Environment) },
  'POST /v1/projects/:project/deploy': { 202: Started },
  'GET /v1/projects/:project/source': {
    200: Type.Object({ source: Type.Union([ProjectSource, Type.Null()]) }),
  },
  'POST /v1/projects/:project/source': {
    200: Type.Object({ source: Type.Union([ProjectSource, Type.Null()]) }),
  },
  'POST /v1/projects/:project/deploy-from-source': {
    202: Type.Intersect([Started, Type.Object({ branch: Str, env: Str })]),
  },
  'GET /v1/envs/:env': { 200: Type.Object({ environment: Environment, connected: Type.Boolean() }) },
  'GET /v1/envs/:env/versions': { 200: list('versions', Version) },
  'GET /v1/envs/:env/deployments': { 200: list('deployments', Deployment) },
  'GET /v1/envs/:env/lineage': { 200: Lineage },
  'POST /v1/envs/:env/fork': { 202: Type.Union([Started, ForksStarted]) },
  'POST /v1/envs/:env/snapshot': { 202: Started },
  'POST /v1/envs/:env/rollback': { 202: Started },
  'POST /v1/envs/:env/verify': { 202: Started },
  'POST /v1/envs/:env/exec': { 200: ExecResult },
  'POST /v1/envs/:env/processes': { 202: ProcessStarted },
  'GET /v1/envs/:env/processes': { 200: list('processes', Process) },
  'GET /v1/envs/:env/processes/:pid': { 200: Process },
  'PUT /v1/envs/:env/files': { 200: Type.Object({ ok: Type.Literal(true), bytes: Type.Number() }) },
  'GET /v1/envs/:env/fs/stat': { 200: FsEntry },
  'GET /v1/envs/:env/fs/list': { 200: FsList },
  'PUT /v1/envs/:env/fs': { 201: FsWritten },
  'POST /v1/envs/:env/fs/mkdir': { 201: FsMade },
  'DELETE /v1/envs/:env': { 202: Type.Object({ deployment: Deployment }) },
  'GET /v1/deployments/:dep': { 200: DeploymentDetail },
  'POST /v1/sandboxes': { 201: Type.Union([SandboxCreated, SandboxesCreated]) },
  'POST /v1/targets/:name/sandboxes': { 201: Type.Intersect([SandboxCreated, Type.Object({ target: Str })]) },
  'GET /v1/clouds': { 200: list('clouds', Cloud) },
  'POST /v1/clouds': { 201: Type.Object({ cloud: Cloud }) },
  'POST /v1/join-tokens': { 201: JoinToken },
  'POST /v1/versions/:ver/pool': { 200: Type.Object({ pool: PoolStatus }) },
  'GET /v1/versions/:ver/pool': { 200: Type.Object({ pool: PoolStatus }) },
  'DELETE /v1/versions/:ver/pool': { 200: Type.Object({ pool: PoolStatus }) },
  'POST /v1/targets/connect': {
    201: Type.Object({ cloud: Cloud, host: Host, info: Json, capabilities: Json }),
  },
  'GET /v1/hosts': { 200: list('hosts', Host) },
  'GET /v1/targets': { 200: list('targets', Target) },
  'GET /v1/events': { 200: list('events', Event) },
  'GET /v1/codehost/installations': {
    200: Type.Object({ installations: Type.Array(Installation), configured: Type.Boolean() }),
  },
  'POST /v1/codehost/installations/:id/link': { 200: Type.Object({ installation: Installation }) },
  'GET /v1/codehost/repos': {
    200: list('repos', Type.Object({ full_name: Str, default_branch: Str, private: Type.Boolean() })),
  },
};
