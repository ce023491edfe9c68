// verify.run on the grader's fork: the verifier runs as uid 0 with the collected copy read-only
// at /submission and its log directory at /logs/verifier, bounded by timeout_sec. Either in its
// own image on the grader's network, or "inside" a named service: a container from that service's
// image sharing its network namespace and volumes. The reward is read from reward.txt (Harbor's
// reward.json as a fallback), or, for Terminal-Bench tasks, from the output by the task's parser.
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type Docker from 'dockerode';
import type { Results } from '../../protocol/commands.ts';
import { DEFAULT_RESOURCES } from '../../protocol/spec.ts';
import { settledWithin } from '../../shared/concurrency.ts';
import { engineOf, requireSpec, type SidecarContext } from '../context.ts';
import { dockerMessage, statusCode } from '../docker/errors.ts';
import { demuxAll } from '../docker/mux.ts';
import { GVISOR_DOCKER_RUNTIME, networkName } from '../docker/render.ts';
import type { CommandContext } from '../runner.ts';
import { verifyDir } from './collect.ts';
import { parseOutput } from './parsers.ts';
import { graderExtras } from './tests.ts';

export const TAIL_BYTES = 4096;
const tail = (s: string) => (s.length > TAIL_BYTES ? s.slice(-TAIL_BYTES) : s);

/** A string command runs in a shell; a list is the exact argv (the image's entrypoint is replaced). */
function argvOf(command: string | string[]): { Entrypoint: string[]; Cmd: string[] } {
  return typeof command === 'string'
    ? { Entrypoint: ['/bin/sh', '-c'], Cmd: [command] }
    : { Entrypoint: [command[0]], Cmd: command.slice(1) };
}

export async function readReward(logs: string): Promise<{ reward: number | null; source: string }> {
  const txt = await readFile(join(logs, 'reward.txt'), 'utf8').catch(() => null);
  if (txt !== null) {
    const n = Number(txt.trim());
    return { reward: txt.trim() !== '' && Number.isFinite(n) ? n : null, source: 'reward.txt' };
  }
  const json = await readFile(join(logs, 'reward.json'), 'utf8').catch(() => null);
  if (json !== null) {
    try {
      const values = Object.values(JSON.parse(json) as Record<string, unknown>).filter(
        (v): v is number => typeof v === 'number',
      );
      return {
        reward: values.length ? values.reduce((a, b) => a + b, 0) / values.length : null,
        source: 'reward.json',
      };
    } catch {
      return { reward: null, source: 'reward.json' };
    }
  }
  return { reward: null, source: 'none' };
}

async function create(
  docker: Docker,
  opts: Docker.ContainerCreateOptions,
  cmd: CommandContext,
): Promise<Docker.Container> {
  try {
    return await docker.createContainer(opts);
  } catch (err) {
    if (statusCode(err) !== 404) throw new Error(`creating the verifier container: ${dockerMessage(err)}`);
    cmd.progress(`pulling ${opts.Image}`);
    try {
      const stream = await docker.pull(opts.Image as string);
      await new Promise((res, rej) => docker.modem.followProgress(stream, (e) => (e ? rej(e) : res(null))));
    } catch (pullErr) {
      throw new Error(
        `verifier image ${opts.Image} is not on this host and could not be pulled: ${dockerMessage(pullErr)}`,
      );
    }
    return docker.createContainer(opts);
  }
}

export async function verifyRun(
  ctx: SidecarContext,
  cmd: CommandContext<'verify.run'>,
): Promise<Results['verify.run']> {
  // A refused submission grades 0 whatever its verifier says: nothing is run.
  if (cmd.payload.refused)
    return { reward: 0, exit_code: null, stdout: '', stderr: '', source: 'refused', ran_for: 0 };
  const { id, verifier } = cmd.payload;
  const spec = await requireSpec(ctx, cmd.envId);
  const base = verifyDir(ctx, id);
  const submission = join(base, 'submission');
  const logs = join(base, 'logs');
  await mkdir(submission, { recursive: true, mode: 0o755 });
  await rm(logs, { recursive: true, force: true });
  await mkdir(logs, { recursive: true, mode: 0o755 });

  const extras = await graderExtras(ctx, cmd.envId, verifier, base);
  const binds = [`${submission}:/submission:ro`, `${logs}:/logs/verifier`, ...extras.binds];
  // The grader runs under the stack's runtime: a gVisor stack's verifier is behind gVisor too.
  const limits = {
    Memory: DEFAULT_RESOURCES.memory_mb * 1024 * 1024,
    PidsLimit: DEFAULT_RESOURCES.pids,
    NanoCpus: DEFAULT_RESOURCES.cpus * 1e9,
    ...(spec.runtime === 'gvisor' ? { Runtime: GVISOR_DOCKER_RUNTIME } : {}),
  };
  let opts: Docker.ContainerCreateOptions;
  if (verifier.image) {
    cmd.progress(`grading in ${verifier.image}`);
    opts = {
      Image: verifier.image,
      User: '0',
      Env: extras.env,
      ...argvOf(verifier.command),
      HostConfig: {
        Binds: binds,
        // A stack without a network (an image sandbox's, which declares no verifier) gives none.
        NetworkMode: spec.network === 'none' ? 'none' : networkName(cmd.envId),
        ...limits,
      },
    };
  } else {
    cmd.progress(`grading inside service ${verifier.service}`);
    const info = await engineOf(ctx, cmd.envId).inspect(verifier.service as string);
    opts = {
      Image: info.Image,
      User: '0',
      WorkingDir: info.Config.WorkingDir || undefined,
      Env: [...(info.Config.Env ?? []), ...extras.env],
      ...argvOf(verifier.command),
      HostConfig: { Binds: binds, NetworkMode: `container:${info.Id}`, VolumesFrom: [info.Id], ...limits },
    };
  }
  opts.Labels = { 'svc.env': cmd.envId, 'svc.verify': id };
  const container = await create(ctx.docker, opts, cmd);
  const started = Date.now();
  try {
    await container.start();
    const waiting = container.wait() as Promise<{ StatusCode: number }>;
    if (!(await settledWithin(waiting, verifier.timeout_sec * 1000))) {
      await container.kill().catch(() => {});
      throw new Error(`verifier timed out after ${verifier.timeout_sec} s`);
    }
    const outcome = await waiting;
    const ranFor = Date.now() - started;
    const raw = (await container.logs({ stdout: true, stderr: true, follow: false })) as unknown as Buffer;
    const out = demuxAll(raw);
    // A parser grades the output; a reward file in /logs/verifier then counts for nothing.
    const { reward, source } = verifier.parser
      ? {
          reward: parseOutput(verifier.parser, `${out.stdout}\n${out.stderr}`).reward,
          source: verifier.parser,
        }
      : await readReward(logs);
    const image = await ctx.docker
      .getImage(opts.Image as string)
      .inspect()
      .then((i) => i.Id)
      .catch(() => '');
    return {
      verifier_image: image,
      tests_digest: extras.testsDigest,
      reward,
      exit_code: outcome.StatusCode,
      stdout: tail(out.stdout),
      stderr: tail(out.stderr),
      source,
      ran_for: ranFor,
    };
  } finally {
    await container.remove({ force: true, v: true }).catch(() => {});
  }
}
