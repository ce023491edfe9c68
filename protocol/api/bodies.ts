// Request bodies of the API, one definition each: the route validates with it, the OpenAPI
// document (and so the generated clients) shows it, and domain code takes its Static<> type.
import { type Static, Type } from '@sinclair/typebox';
import { ForkCount } from '../api.ts';
import { RuntimeSchema } from '../spec.ts';
import { Body } from './kit.ts';

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
