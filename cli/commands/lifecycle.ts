// The verbs that start a deployment: deploy, fork, snapshot, rollback, verify. Each posts, then by
// default watches the deployment to its end (wait.ts); `--wait=false` prints the 202 answer.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { ApiBody } from '../api-types.ts';
import { type Command, type FlagSpec, givenFlags, type RunContext } from '../command.ts';
import { needsContext, uploadContext } from '../context.ts';
import { contextRoot } from '../context-root.ts';
import { CliError, UsageError } from '../errors.ts';
import { parseCount, watchForks } from '../fan-out.ts';
import { harborCompose } from '../task-compose.ts';
import { watchDeployment } from '../wait.ts';

export const WAIT: FlagSpec = {
  name: 'wait',
  type: 'boolean',
  default: true,
  help: 'Watch the deployment to its end (default); --wait=false prints the 202 answer and returns',
};

/** Prints the 202 answer (--wait=false) or watches its deployment to the end. */
async function follow(ctx: RunContext, r: { deployment: { ID: string } }): Promise<number> {
  if (ctx.flags.wait === false) {
    ctx.io.json(r);
    return 0;
  }
  return watchDeployment(ctx.client(), ctx.io, r.deployment.ID);
}

function readCompose(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file (svc init writes one)' : (code ?? (err as Error).message);
    throw new CliError(`cannot read compose file ${file}: ${why}`);
  }
}

export const deploy: Command = {
  words: ['deploy'],
  summary: 'Deploy a compose file to a project environment (POST /v1/projects/{project}/deploy)',
  details:
    'The warm command runs in the first service after health; it is split on whitespace.\n' +
    'When the compose file reads files next to it (build:, env_file:, file secrets, ./ binds, .env),\n' +
    'its directory is uploaded as the context (honouring .dockerignore; PUT /v1/uploads), widened to\n' +
    'the nearest directory holding every ../ path it names (never past the git work tree root);\n' +
    '--context DIR ships DIR instead (relative paths still start at the compose file).\n' +
    '--harbor DIR deploys a Harbor task folder (the folder is the context), or a Terminal-Bench v1\n' +
    "task folder (task.yaml), shipped in Harbor's layout.",
  flags: [
    { name: 'project', type: 'string', value: 'P', required: true, help: 'Project name or id (required)' },
    { name: 'env', type: 'string', value: 'alpha', default: 'alpha', help: 'Environment name' },
    {
      name: 'file',
      short: 'f',
      type: 'string',
      value: 'compose.yaml',
      default: 'compose.yaml',
      help: 'Compose file',
    },
    {
      name: 'warm',
      type: 'string',
      value: "'cmd args'",
      help: 'Command run after health, split on whitespace',
    },
    { name: 'harbor', type: 'string', value: 'DIR', help: 'Deploy a Harbor task folder instead of -f' },
    {
      name: 'context',
      type: 'string',
      value: 'DIR',
      help: "Directory shipped as the project context (default: the compose file's, widened for ../ paths)",
    },
    WAIT,
  ],
  positionals: [],
  async run(ctx) {
    const warm =
      ctx.flags.warm === undefined ? undefined : String(ctx.flags.warm).split(/\s+/).filter(Boolean);
    if (warm?.length === 0) throw new UsageError('--warm needs a command', deploy);
    const harbor = ctx.flags.harbor === undefined ? null : harborCompose(String(ctx.flags.harbor));
    const file = ctx.flags.file as string;
    const compose = harbor ? harbor.compose : readCompose(file);
    const named = ctx.flags.context === undefined ? undefined : String(ctx.flags.context);
    const where = harbor ? { root: harbor.root, composePath: '' } : contextRoot(file, compose, named);
    const body: ApiBody<'post', '/v1/projects/{project}/deploy'> = { env: String(ctx.flags.env), compose };
    if (warm) body.warm = warm;
    try {
      if (harbor || named !== undefined || needsContext(compose, dirname(resolve(file)))) {
        body.context = await uploadContext(ctx.client(), where.root);
        if (where.composePath) body.compose_path = where.composePath;
      }
    } finally {
      harbor?.done();
    }
    const r = await ctx.client().call('post', '/v1/projects/{project}/deploy', {
      path: { project: String(ctx.flags.project) },
      json: body,
    });
    return follow(ctx, r);
  },
};

export const fork: Command = {
  words: ['fork'],
  summary: 'Fork an environment from a healthy version into a new environment (POST /v1/envs/{env}/fork)',
  details:
    'Without --name the server names the fork <env name>-fork-<n>; without --version it forks the\n' +
    "environment's current version.\n" +
    '--count N (1-100) starts N forks of the one snapshot at once, named <name>-1 ... <name>-N (or\n' +
    '<env name>-fork-<n>); it waits for all of them, prints one line per fork as it ends, and exits 1\n' +
    'when any failed.',
  flags: [
    {
      name: 'name',
      type: 'string',
      value: 'N',
      help: 'Name of the new environment (default <env name>-fork-<n>)',
    },
    { name: 'version', type: 'string', value: 'V', help: 'Version id to fork (default: current)' },
    { name: 'count', type: 'string', value: 'N', help: 'Start N forks of the one snapshot (1-100)' },
    WAIT,
  ],
  positionals: [{ name: 'env' }],
  async run(ctx) {
    const { name, version } = givenFlags(ctx.flags, { name: 'name', version: 'version' });
    const body: ApiBody<'post', '/v1/envs/{env}/fork'> = { name, version };
    const path = { env: ctx.args[0] };
    const client = ctx.client();
    if (ctx.flags.count === undefined) {
      const one = await client.call('post', '/v1/envs/{env}/fork', { path, json: body });
      if (!('deployment' in one)) throw new CliError('the server answered a single fork with a fan-out');
      return follow(ctx, one);
    }
    const count = parseCount(String(ctx.flags.count));
    if (count === null) throw new UsageError('--count takes a whole number from 1 to 100', fork);
    const r = await client.call('post', '/v1/envs/{env}/fork', { path, json: { ...body, count } });
    if (!('forks' in r)) throw new CliError('the server answered a fan-out with a single fork');
    if (ctx.flags.wait === false) {
      ctx.io.json(r);
      return 0;
    }
    return watchForks(client, ctx.io, r);
  },
};

export const snapshot: Command = {
  words: ['snapshot'],
  summary: 'Capture live state as a new version (POST /v1/envs/{env}/snapshot)',
  flags: [WAIT],
  positionals: [{ name: 'env' }],
  async run(ctx) {
    return follow(
      ctx,
      await ctx.client().call('post', '/v1/envs/{env}/snapshot', { path: { env: ctx.args[0] } }),
    );
  },
};

export const rollback: Command = {
  words: ['rollback'],
  summary: 'Restore a healthy snapshot of the environment (POST /v1/envs/{env}/rollback)',
  flags: [WAIT],
  positionals: [{ name: 'env' }, { name: 'version' }],
  async run(ctx) {
    const r = await ctx.client().call('post', '/v1/envs/{env}/rollback', {
      path: { env: ctx.args[0] },
      json: { version: ctx.args[1] },
    });
    return follow(ctx, r);
  },
};

export const verify: Command = {
  words: ['verify'],
  summary: "Grade the agent's work on a frozen copy; prints the reward (POST /v1/envs/{env}/verify)",
  details:
    'A multi-step task (x-svc.verifier.steps) is graded one step at a time: --step names it, and the\n' +
    "verdict's early_stop says the step scored below its min_reward (skip the remaining steps).",
  flags: [
    { name: 'resume', type: 'boolean', help: 'Unpause the agent service afterwards' },
    { name: 'step', type: 'string', value: 'STEP', help: 'Grade this step of a multi-step task' },
    WAIT,
  ],
  positionals: [{ name: 'env' }],
  async run(ctx) {
    const body: ApiBody<'post', '/v1/envs/{env}/verify'> = ctx.flags.resume === true ? { resume: true } : {};
    if (ctx.flags.step !== undefined) body.step = String(ctx.flags.step);
    const r = await ctx
      .client()
      .call('post', '/v1/envs/{env}/verify', { path: { env: ctx.args[0] }, json: body });
    return follow(ctx, r);
  },
};
