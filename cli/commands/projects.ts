// `project create|list|envs`: the project endpoints (a project is addressed by name or id).
import type { ApiBody } from '../api-types.ts';
import { type Command, givenFlags } from '../command.ts';
import { simple } from './simple.ts';

type Kind = NonNullable<ApiBody<'post', '/v1/projects'>['kind']>;

export const projectCreate: Command = {
  words: ['project', 'create'],
  summary: 'Create a project and its alpha environment (POST /v1/projects)',
  flags: [
    { name: 'kind', type: 'string', value: 'K', help: 'rl-environment (server default) or agent' },
    { name: 'source', type: 'string', value: 'S', help: 'Source repository, e.g. github:owner/repo' },
  ],
  positionals: [{ name: 'name' }],
  async run(ctx) {
    const { kind, source } = givenFlags(ctx.flags, { kind: 'kind', source: 'source' });
    // The kind is passed as given: the server's refusal names the kinds it takes.
    const body: ApiBody<'post', '/v1/projects'> = {
      name: ctx.args[0],
      kind: kind as Kind | undefined,
      source,
    };
    ctx.io.json(await ctx.client().call('post', '/v1/projects', { json: body }));
    return 0;
  },
};

export const projectList = simple({
  words: ['project', 'list'],
  summary: "List the team's projects (GET /v1/projects)",
  method: 'get',
  route: '/v1/projects',
  options: () => ({}),
});

export const projectEnvs = simple({
  words: ['project', 'envs'],
  summary: "List a project's environments (GET /v1/projects/{project}/envs)",
  positionals: [{ name: 'project' }],
  method: 'get',
  route: '/v1/projects/{project}/envs',
  options: ([project]) => ({ path: { project } }),
});
