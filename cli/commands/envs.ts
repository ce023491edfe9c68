// `env get|versions|deployments|destroy`, `deployment get|watch` and `events`: reading state.
// `<env>` is always an environment id. Destroy starts a deployment and does not wait for it.
import type { Command } from '../command.ts';
import { watchDeployment } from '../wait.ts';
import { simple } from './simple.ts';

const ENV = [{ name: 'env' }];

export const envGet = simple({
  words: ['env', 'get'],
  summary: 'Show an environment and whether its host is connected (GET /v1/envs/{env})',
  positionals: ENV,
  method: 'get',
  route: '/v1/envs/{env}',
  options: ([env]) => ({ path: { env } }),
});

export const envVersions = simple({
  words: ['env', 'versions'],
  summary: "List an environment's versions, oldest first",
  positionals: ENV,
  method: 'get',
  route: '/v1/envs/{env}/versions',
  options: ([env]) => ({ path: { env } }),
});

export const envDeployments = simple({
  words: ['env', 'deployments'],
  summary: "List an environment's deployments, newest first",
  positionals: ENV,
  method: 'get',
  route: '/v1/envs/{env}/deployments',
  options: ([env]) => ({ path: { env } }),
});

export const envDestroy = simple({
  words: ['env', 'destroy'],
  summary: 'Start a destroy deployment and print it (DELETE /v1/envs/{env}); does not wait',
  positionals: ENV,
  method: 'delete',
  route: '/v1/envs/{env}',
  options: ([env]) => ({ path: { env } }),
});

export const deploymentGet = simple({
  words: ['deployment', 'get'],
  summary: 'Show a deployment and its phases with evidence (GET /v1/deployments/{id})',
  positionals: [{ name: 'id' }],
  method: 'get',
  route: '/v1/deployments/{dep}',
  options: ([dep]) => ({ path: { dep } }),
});

export const deploymentWatch: Command = {
  words: ['deployment', 'watch'],
  summary: 'Follow a deployment phase by phase until it ends (polls every 700 ms)',
  details: 'Exits 1 when the deployment failed or was rolled back.',
  flags: [],
  positionals: [{ name: 'id' }],
  async run(ctx) {
    return watchDeployment(ctx.client(), ctx.io, ctx.args[0]);
  },
};

export const events = simple({
  words: ['events'],
  summary: 'Show up to 200 events of a subject, newest first (GET /v1/events)',
  details: 'The subject is env:<id>, dep:<id>, host:<id> or cmd:<id>.',
  positionals: [{ name: 'subject' }],
  method: 'get',
  route: '/v1/events',
  options: ([subject]) => ({ query: { subject } }),
});
