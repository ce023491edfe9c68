// GET /v1/templates, GET/POST /v1/projects, GET /v1/projects/{project}/envs,
// GET/POST /v1/projects/{project}/source.

import { Type } from '@sinclair/typebox';
import { ProjectCreateBody, ProjectSourceBody } from '../../protocol/api/bodies.ts';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { SECURED } from '../http/schema.ts';
import { createProject, projectEnvs, projectSource, updateProjectSource } from './projects.ts';
import { listProjects } from './store.ts';
import { listTemplates } from './templates.ts';

const tags = ['projects'];
const ProjectParam = Type.Object({
  project: Type.String({ minLength: 1, maxLength: 128, description: 'Project name or id' }),
});

export function projectRoutes(app: App, ctx: AppContext): void {
  const { db } = ctx;

  app.get(
    '/v1/templates',
    {
      schema: {
        tags,
        summary: 'Starter compose files',
        security: SECURED,
        querystring: Type.Object({
          kind: Type.Optional(Type.String({ maxLength: 64, description: 'rl-environment or agent' })),
        }),
      },
    },
    async (req) => listTemplates(req.query.kind),
  );

  app.get(
    '/v1/projects',
    { schema: { tags, summary: "The team's projects", security: SECURED } },
    async (req) => ({ projects: await listProjects(db, req.caller.teamId) }),
  );

  app.post(
    '/v1/projects',
    {
      schema: {
        tags,
        summary: 'Create a project and its alpha environment',
        security: SECURED,
        body: ProjectCreateBody,
      },
    },
    async (req, reply) => {
      const created = await createProject(db, req.caller.teamId, req.body);
      reply.code(201);
      return created;
    },
  );

  app.get(
    '/v1/projects/:project/envs',
    { schema: { tags, summary: "The project's environments", security: SECURED, params: ProjectParam } },
    async (req) => ({ environments: await projectEnvs(db, req.caller.teamId, req.params.project) }),
  );

  app.get(
    '/v1/projects/:project/source',
    { schema: { tags, summary: "The project's source repository", security: SECURED, params: ProjectParam } },
    async (req) => ({ source: await projectSource(db, req.caller.teamId, req.params.project) }),
  );

  app.post(
    '/v1/projects/:project/source',
    {
      schema: {
        tags,
        summary: "Change the project's source settings (empty strings and 0 leave a field unchanged)",
        security: SECURED,
        params: ProjectParam,
        body: ProjectSourceBody,
      },
    },
    async (req) => ({
      source: await updateProjectSource(db, req.caller.teamId, req.params.project, req.body),
    }),
  );
}
