// `step`: readies one step of a Harbor multi-step task for the agent, as Harbor does before the
// agent's turn: the step's workdir/ files go into the agent's working directory (PUT files), its
// reserved setup.sh runs there as the agent (exec), its [steps.healthcheck] is polled with
// Docker's semantics, and its instruction is printed on stdout for the agent. Grade the step
// afterwards with `svc verify --step <step> <env>`; the verdict's early_stop is Harbor's min_reward.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { sleep } from '../../shared/concurrency.ts';
import type { Command, RunContext } from '../command.ts';
import { CliError } from '../errors.ts';
import { localStep, type StepHealthcheck } from '../harbor-steps.ts';
import { packPath } from '../tarball.ts';

const run = (ctx: RunContext, env: string, service: string, cmd: string[], timeout_sec?: number) =>
  ctx.client().call('post', '/v1/envs/{env}/exec', {
    path: { env },
    json: { service, cmd, ...(timeout_sec ? { timeout_sec } : {}) },
  });

async function healthy(ctx: RunContext, env: string, service: string, hc: StepHealthcheck): Promise<void> {
  let last = '';
  for (let i = 0; i < hc.retries; i++) {
    if (i > 0) await sleep(hc.interval_sec * 1000);
    const r = await run(ctx, env, service, ['sh', '-c', hc.command], Math.max(1, Math.ceil(hc.timeout_sec)));
    if (r.exit_code === 0) return;
    last = `exit ${r.exit_code}${r.stderr ? `: ${r.stderr.trim().slice(-300)}` : ''}`;
  }
  throw new CliError(`the step's healthcheck '${hc.command}' failed ${hc.retries} times (${last})`);
}

export const step: Command = {
  words: ['step'],
  summary:
    'Ready a step of a Harbor multi-step task: upload its workdir, run setup.sh and its healthcheck, print its instruction',
  details:
    'Reads the step from the task folder (--harbor DIR, the folder deployed with svc deploy --harbor).\n' +
    'The instruction is the only output on stdout. Grade the step with svc verify --step STEP <env>.',
  flags: [
    {
      name: 'harbor',
      type: 'string',
      value: 'DIR',
      required: true,
      help: 'The Harbor task folder (required)',
    },
    { name: 'service', type: 'string', value: 'S', default: 'main', help: 'The agent service' },
  ],
  positionals: [{ name: 'env' }, { name: 'step' }],
  async run(ctx) {
    const [env, name] = ctx.args;
    const s = localStep(String(ctx.flags.harbor), name);
    const service = String(ctx.flags.service);
    if (s.workdir) {
      for (const entry of readdirSync(s.workdir).sort()) {
        const packed = await packPath(join(s.workdir, entry));
        await ctx.client().call('put', '/v1/envs/{env}/files', {
          path: { env },
          query: { service, path: s.target },
          raw: { data: packed.data, type: 'application/x-tar' },
        });
      }
      ctx.io.err(`step ${name}: workdir/ uploaded to ${s.target}\n`);
      if (existsSync(join(s.workdir, 'setup.sh'))) {
        const r = await run(ctx, env, service, ['sh', '-c', 'cd "$1" && sh ./setup.sh', 'setup', s.target]);
        if (r.exit_code !== 0)
          throw new CliError(`step ${name}: setup.sh exited ${r.exit_code}: ${r.stderr.trim().slice(-300)}`);
      }
    }
    if (s.healthcheck) await healthy(ctx, env, service, s.healthcheck);
    ctx.io.out(s.instruction.endsWith('\n') ? s.instruction : `${s.instruction}\n`);
    return 0;
  },
};
