// GET /v1/envs/{env}, /v1/envs/{env}/versions, /v1/envs/{env}/deployments, /v1/envs/{env}/lineage. The operations on an
// environment (deploy, fork, snapshot, ...) are registered by server/envs/routes.ts.

import { LINEAGE_MAX_DEPTH } from '../../protocol/api.ts';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { IdParam, SECURED } from '../http/schema.ts';
import { envDeployments, envLineage, envVersions, envView } from './read.ts';

const tags = ['environments'];
const params = IdParam('env', 'Environment id (env_…)');

export function envReadRoutes(app: App, ctx: AppContext): void {
  const { db } = ctx;
  app.get(
    '/v1/envs/:env',
    {
      schema: {
        tags,
        summary: 'An environment and whether its host is connected',
        security: SECURED,
        params,
      },
    },
    async (req) => envView(db, ctx.hub, req.caller.teamId, req.params.env),
  );
  app.get(
    '/v1/envs/:env/versions',
    { schema: { tags, summary: "The environment's versions, oldest first", security: SECURED, params } },
    async (req) => ({ versions: await envVersions(db, req.caller.teamId, req.params.env) }),
  );
  app.get(
    '/v1/envs/:env/deployments',
    { schema: { tags, summary: "The environment's deployments, newest first", security: SECURED, params } },
    async (req) => ({ deployments: await envDeployments(db, req.caller.teamId, req.params.env) }),
  );
  app.get(
    '/v1/envs/:env/lineage',
    {
      schema: {
        tags,
        summary: `What the environment was forked from, up the chain, nearest first (at most ${LINEAGE_MAX_DEPTH})`,
        security: SECURED,
        params,
      },
    },
    async (req) => envLineage(db, req.caller.teamId, req.params.env),
  );
}
