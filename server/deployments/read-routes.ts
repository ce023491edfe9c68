// GET /v1/deployments/{dep}: a deployment of the caller's team with its phases in order.
import type { AppContext } from '../context.ts';
import type { Db } from '../db/types.ts';
import { NotFound } from '../errors.ts';
import type { App } from '../http/app.ts';
import { IdParam, SECURED } from '../http/schema.ts';
import { type Deployment, getDeployment, listPhases, type Phase } from './store.ts';

export async function deploymentView(
  db: Db,
  teamId: string,
  id: string,
): Promise<{ deployment: Deployment; phases: Phase[] }> {
  const deployment = await getDeployment(db, teamId, id);
  if (!deployment) throw new NotFound(`deployment ${id} not found`);
  return { deployment, phases: await listPhases(db, id) };
}

export function deploymentReadRoutes(app: App, ctx: AppContext): void {
  app.get(
    '/v1/deployments/:dep',
    {
      schema: {
        tags: ['deployments'],
        summary: 'A deployment and its phases with evidence',
        security: SECURED,
        params: IdParam('dep', 'Deployment id (dep_…)'),
      },
    },
    async (req) => deploymentView(ctx.db, req.caller.teamId, req.params.dep),
  );
}
