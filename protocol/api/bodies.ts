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
