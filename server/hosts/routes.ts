// POST /v1/join-tokens, GET /v1/hosts, GET /v1/targets. The host stream (/v1/hosts/stream) is
// the hub's (server/hosts/hub*.ts).

import { JoinTokenBody } from '../../protocol/api/bodies.ts';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { emptyBodyIsObject, SECURED } from '../http/schema.ts';
import { createJoinToken } from './join-tokens.ts';
import { hostsOf, targetsOf } from './targets.ts';

const tags = ['clouds, hosts and targets'];

export function hostRoutes(app: App, ctx: AppContext): void {
  const { db, config } = ctx;

  app.post(
    '/v1/join-tokens',
    {
      preValidation: emptyBodyIsObject,
      schema: {
        tags,
        summary: 'Mint a one-hour, single-use token for a new sidecar host, with its install line',
        security: SECURED,
        body: JoinTokenBody,
      },
    },
    async (req, reply) => {
      const created = await createJoinToken(db, config.publicUrl, req.caller.teamId, req.body.cloud_id);
      reply.code(201);
      return created;
    },
  );

  app.get(
    '/v1/hosts',
    { schema: { tags, summary: "The team's hosts and whether each is connected", security: SECURED } },
    async (req) => ({ hosts: await hostsOf(db, ctx.hub, req.caller.teamId) }),
  );

  app.get(
    '/v1/targets',
    {
      schema: {
        tags,
        summary: 'Hosts as listed for placement: sidecars first, then driver hosts',
        security: SECURED,
      },
    },
    async (req) => ({ targets: await targetsOf(db, ctx.hub, req.caller.teamId) }),
  );
}
