// Request bodies of the API, one definition each: the route validates with it, the OpenAPI
// document (and so the generated clients) shows it, and domain code takes its Static<> type.
import { type Static, Type } from '@sinclair/typebox';
import { ForkCount } from '../api.ts';
import { RuntimeSchema } from '../spec.ts';
import { Body, StringEnum } from './kit.ts';

/** POST /v1/sandboxes: a fork of a version (from_version) or an image sandbox (image). */
export const SandboxBody = Body({
  from_version: Type.Optional(Type.String({ minLength: 1 })),
  image: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
  cmd: Type.Optional(Type.Array(Type.String(), { maxItems: 4096 })),
  env: Type.Optional(Type.Record(Type.String({ maxLength: 256 }), Type.String())),
  ports: Type.Optional(Type.Array(Type.String(), { maxItems: 256 })),
  volumes: Type.Optional(Type.Array(Type.String(), { maxItems: 64 })),
  egress: Type.Optional(Type.Union([Type.Literal('deny'), Type.Literal('allow')])),
  /** The container runtime of an image sandbox; a fork runs under its version's. */
  runtime: Type.Optional(RuntimeSchema),
  project: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  name: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 63,
      description: 'Environment name; with count, the sandboxes are <name>-1 … <name>-<count>',
    }),
  ),
  count: Type.Optional(ForkCount),
  timeout_sec: Type.Optional(Type.Integer({ minimum: 1, maximum: 86400 })),
});

export type SandboxRequest = Static<typeof SandboxBody>;

/** The longest an exec may be given to run (`timeout_sec`). */
export const MAX_EXEC_TIMEOUT_SEC = 24 * 3600;
const Argv = Type.Array(Type.String({ maxLength: 65536 }), { minItems: 1, maxItems: 4096 });

/** POST /v1/projects/{project}/deploy. */
export const DeployBody = Body({
  env: Type.Optional(Type.String({ minLength: 1, maxLength: 63 })),
  compose: Type.String({ minLength: 1 }),
  warm: Type.Optional(Type.Array(Type.String({ maxLength: 65536 }), { maxItems: 4096 })),
  context: Type.Optional(
    Type.String({ maxLength: 100, description: 'An upload id (upl_…) from PUT /v1/uploads' }),
  ),
  compose_path: Type.Optional(
    Type.String({
      maxLength: 4096,
      description:
        "Where the compose file sits inside the context (e.g. docker/compose.yaml); its relative paths start at that file's directory. Only with context.",
    }),
  ),
});
/** POST /v1/envs/{env}/fork (no body at all is `{}`). */
export const ForkBody = Body({
  name: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 63,
      description: 'Name of the new environment; with count, the forks are <name>-1 … <name>-<count>',
    }),
  ),
  version: Type.Optional(Type.String({ maxLength: 128 })),
  count: Type.Optional(ForkCount),
});
/** POST /v1/envs/{env}/rollback. */
export const RollbackBody = Body({ version: Type.String({ minLength: 1, maxLength: 128 }) });
/** POST /v1/envs/{env}/verify (no body at all is `{}`). */
export const VerifyBody = Body({
  resume: Type.Optional(Type.Boolean()),
  step: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 63,
      description: 'A step of a multi-step task (x-svc.verifier.steps) to grade',
    }),
  ),
});
/** POST /v1/envs/{env}/exec. */
export const ExecBody = Body({
  service: Type.String({ minLength: 1, maxLength: 200 }),
  cmd: Argv,
  timeout_sec: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_EXEC_TIMEOUT_SEC })),
});

export type DeployRequestBody = Static<typeof DeployBody>;
export type ForkRequestBody = Static<typeof ForkBody>;
export type ExecRequestBody = Static<typeof ExecBody>;

// The rest of the API's request bodies, by route.

/** What a project may be (POST /v1/projects `kind`). */
export const PROJECT_KINDS = ['rl-environment', 'agent'] as const;
/** A project's free-text source, at most this long. */
export const MAX_SOURCE_CHARS = 500;
/** The kinds of cloud a team connects (POST /v1/clouds `provider`). */
export const PROVIDERS = ['manual', 'cloudvm', 'sandbox-a', 'sandbox-b'] as const;
/** The most forks one version's warm pool may keep. */
export const MAX_POOL_SIZE = 500;

/** POST /auth/dev-login (only with SVC_DEV_LOGIN=1). */
export const DevLoginBody = Body({
  email: Type.String({ format: 'email', maxLength: 254 }),
  name: Type.Optional(Type.String({ maxLength: 100 })),
});
/** POST /v1/teams. */
export const TeamCreateBody = Body({
  name: Type.String({ minLength: 1, maxLength: 100, description: 'Team name' }),
});
/** POST /v1/keys. */
export const KeyCreateBody = Body({
  name: Type.Optional(Type.String({ maxLength: 100, description: 'Default key' })),
});
/** POST /v1/device/code. */
export const DeviceCodeBody = Body({});
/** POST /v1/device/approve. */
export const DeviceApproveBody = Body({
  user_code: Type.String({
    minLength: 1,
    maxLength: 32,
    description: 'XXXX-XXXX, as the CLI printed',
  }),
  team_id: Type.String({ minLength: 1, maxLength: 128 }),
  name: Type.Optional(Type.String({ maxLength: 100, description: 'Key name, default cli' })),
});
/** POST /v1/device/token. */
export const DeviceTokenRequestBody = Body({ device_code: Type.String({ minLength: 1, maxLength: 256 }) });
/** POST /v1/projects. */
export const ProjectCreateBody = Body({
  name: Type.String({
    maxLength: 63,
    description: "1-63 of a-z 0-9 '-' '_' '.', starting with a letter or digit",
  }),
  kind: Type.Optional(StringEnum(PROJECT_KINDS, { description: 'Default rl-environment' })),
  source: Type.Optional(
    Type.String({
      maxLength: MAX_SOURCE_CHARS,
      description: 'Free text, conventionally github:<owner>/<repo>',
    }),
  ),
});
/** PUT /v1/projects/{project}/source. */
export const ProjectSourceBody = Body({
  default_branch: Type.Optional(Type.String({ maxLength: 255 })),
  compose_path: Type.Optional(Type.String({ maxLength: 255, description: 'Default docker-compose.yaml' })),
  installation_id: Type.Optional(
    Type.Integer({ minimum: 0, description: 'An installation linked to the team' }),
  ),
  deploy_branches: Type.Optional(
    Type.Union([Type.Boolean(), Type.Null()], {
      description: 'Whether branches other than the default deploy to their own environment',
    }),
  ),
});
/** POST /v1/targets/connect. */
export const TargetConnectBody = Body({
  provider: StringEnum(['sandbox-a', 'sandbox-b'] as const),
  token: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
  name: Type.Optional(Type.String({ maxLength: 63, description: 'Default: the provider' })),
  config: Type.Optional(
    Type.Record(Type.String(), Type.Unknown(), {
      description: 'sandbox-a: api_url, envd_url. sandbox-b: api_url. token may be given here instead.',
    }),
  ),
});
/** POST /v1/join-tokens. */
export const JoinTokenBody = Body({
  cloud_id: Type.Optional(
    Type.String({ maxLength: 128, description: 'A manual or cloudvm cloud of the team' }),
  ),
});
/** POST /v1/clouds. */
export const CloudCreateBody = Body({
  provider: StringEnum(PROVIDERS),
  name: Type.Optional(Type.String({ maxLength: 63, description: 'Default: the provider' })),
  config: Type.Optional(
    Type.Record(Type.String(), Type.Unknown(), {
      description:
        'manual: none. cloudvm: token (required), server_type (cpx31), location (nbg1), image (ubuntu-24.04). sandbox-a: token, api_url, envd_url. sandbox-b: token, api_url. cloudvm also takes api_url.',
    }),
  ),
});
/** POST /v1/projects/{project}/deploy-from-source. */
export const DeployFromSourceBody = Body({
  branch: Type.Optional(Type.String({ maxLength: 255 })),
  env: Type.Optional(Type.String({ maxLength: 63 })),
});
/** POST /v1/versions/{ver}/pool. */
export const PoolSizeBody = Type.Object(
  { size: Type.Integer({ minimum: 0, maximum: MAX_POOL_SIZE }) },
  { additionalProperties: false },
);
