import { Type } from '@sinclair/typebox';
import { ForkCount } from '../../protocol/api.ts';
import { RuntimeSchema } from '../../protocol/spec.ts';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { Body, SECURED } from '../http/schema.ts';
import { createSandbox, createSandboxes } from './sandboxes.ts';

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

const tags = ['sandboxes'];

export function sandboxRoutes(app: App, ctx: AppContext): void {
  app.post(
    '/v1/sandboxes',
    {
      schema: {
        tags,
        summary: 'Start a sandbox (a fork of a version, or an image) and wait until it is healthy',
        security: SECURED,
        body: SandboxBody,
      },
    },
    async (req, reply) => {
      const { count } = req.body;
      return reply
        .code(201)
        .send(
          count === undefined
            ? await createSandbox(ctx, req.caller, req.body)
            : await createSandboxes(ctx, req.caller, { ...req.body, count }),
        );
    },
  );
  app.post(
    '/v1/targets/:name/sandboxes',
    {
      schema: {
        tags,
        summary: 'Start a sandbox on the named target (cloud) and wait until it is healthy',
        security: SECURED,
        params: Type.Object({ name: Type.String({ minLength: 1, maxLength: 200 }) }),
        body: SandboxBody,
      },
    },
    async (req, reply) => {
      const out = await createSandbox(ctx, req.caller, req.body, req.params.name);
      return reply.code(201).send({ ...out, target: req.params.name });
    },
  );
}
