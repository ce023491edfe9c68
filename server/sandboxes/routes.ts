import { Type } from '@sinclair/typebox';
import { SandboxBody } from '../../protocol/api/bodies.ts';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { SECURED } from '../http/schema.ts';
import { createSandbox, createSandboxes } from './sandboxes.ts';

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
