// POST /v1/targets/connect. (POST /v1/targets/{name}/sandboxes is the sandboxes context's.)
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { Body, SECURED, StringEnum } from '../http/schema.ts';
import { connectTarget } from './connect.ts';

export function providerRoutes(app: App, ctx: AppContext): void {
  app.post(
    '/v1/targets/connect',
    {
      schema: {
        tags: ['clouds, hosts and targets'],
        summary: 'Connect a hosted sandbox provider: check the token, record the cloud and its driver host',
        security: SECURED,
        body: Body({
          provider: StringEnum(['sandbox-a', 'sandbox-b'] as const),
          token: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
          name: Type.Optional(Type.String({ maxLength: 63, description: 'Default: the provider' })),
          config: Type.Optional(
            Type.Record(Type.String(), Type.Unknown(), {
              description:
                'sandbox-a: api_url, envd_url. sandbox-b: api_url. token may be given here instead.',
            }),
          ),
        }),
      },
    },
    async (req, reply) => {
      const out = await connectTarget(ctx, req.caller.teamId, req.body);
      reply.code(201);
      return out;
    },
  );
}
