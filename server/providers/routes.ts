// POST /v1/targets/connect. (POST /v1/targets/{name}/sandboxes is the sandboxes context's.)

import { TargetConnectBody } from '../../protocol/api/bodies.ts';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { SECURED } from '../http/schema.ts';
import { connectTarget } from './connect.ts';

export function providerRoutes(app: App, ctx: AppContext): void {
  app.post(
    '/v1/targets/connect',
    {
      schema: {
        tags: ['clouds, hosts and targets'],
        summary: 'Connect a hosted sandbox provider: check the token, record the cloud and its driver host',
        security: SECURED,
        body: TargetConnectBody,
      },
    },
    async (req, reply) => {
      const out = await connectTarget(ctx, req.caller.teamId, req.body);
      reply.code(201);
      return out;
    },
  );
}
