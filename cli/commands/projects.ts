// `project create|list|envs`: the project endpoints (a project is addressed by name or id).
import { type Command, givenFlags } from '../command.ts';
import { seg } from '../http.ts';
import { simple } from './simple.ts';

export const projectCreate: Command = {
  words: ['project', 'create'],
  summary: 'Create a project and its alpha environment (POST /v1/projects)',
  flags: [
    { name: 'kind', type: 'string', value: 'K', help: 'rl-environment (server default) or agent' },
    { name: 'source', type: 'string', value: 'S', help: 'Source repository, e.g. github:owner/repo' },
  ],
  positionals: [{ name: 'name' }],
  async run(ctx) {
    const body = { name: ctx.args[0], ...givenFlags(ctx.flags, { kind: 'kind', source: 'source' }) };
    ctx.io.json(await ctx.client().json('POST', '/v1/projects', { json: body }));
    return 0;
  },
};

export const projectList = simple({
  words: ['project', 'list'],
  summary: "List the team's projects (GET /v1/projects)",
  path: () => '/v1/projects',
});

export const projectEnvs = simple({
  words: ['project', 'envs'],
  summary: "List a project's environments (GET /v1/projects/{project}/envs)",
  positionals: [{ name: 'project' }],
  path: ([project]) => `/v1/projects/${seg(project)}/envs`,
});
