// GET/POST /v1/clouds.

import { CloudCreateBody } from '../../protocol/api/bodies.ts';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { SECURED } from '../http/schema.ts';
import { cloudsOf, connectCloud } from './clouds.ts';

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
        body: CloudCreateBody,
      },
    },
    async (req, reply) => {
      const cloud = await connectCloud(ctx.db, ctx.secrets, req.caller.teamId, req.body);
      reply.code(201);
      return { cloud };
    },
  );
}
