// GET/POST /v1/clouds.
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { Body, SECURED, StringEnum } from '../http/schema.ts';
import { cloudsOf, connectCloud } from './clouds.ts';
import { PROVIDERS } from './providers.ts';

const tags = ['clouds, hosts and targets'];

export function cloudRoutes(app: App, ctx: AppContext): void {
  app.get(
    '/v1/clouds',
    { schema: { tags, summary: "The team's clouds, secrets masked", security: SECURED } },
    async (req) => ({ clouds: await cloudsOf(ctx.db, req.caller.teamId) }),
  );

  app.post(
    '/v1/clouds',
    {
      schema: {
        tags,
        summary: 'Connect a cloud (provider credential and configuration)',
        security: SECURED,
        body: Body({
          provider: StringEnum(PROVIDERS),
          name: Type.Optional(Type.String({ maxLength: 63, description: 'Default: the provider' })),
          config: Type.Optional(
            Type.Record(Type.String(), Type.Unknown(), {
              description:
                'manual: none. cloudvm: token (required), server_type (cpx31), location (nbg1), image (ubuntu-24.04). sandbox-a: token, api_url, envd_url. sandbox-b: token, api_url. cloudvm also takes api_url.',
            }),
          ),
        }),
      },
    },
    async (req, reply) => {
      const cloud = await connectCloud(ctx.db, ctx.secrets, req.caller.teamId, req.body);
      reply.code(201);
      return { cloud };
    },
  );
}
