// What the Harbor and Terminal-Bench end-to-end tests share: a corpus task folder completed with
// stubs for the files the corpus leaves out, deploying it as the CLI does (the folder, or the
// Terminal-Bench task staged in Harbor's layout, is the uploaded context), grading it, and removing
// the images its builds made.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packContext } from '../../cli/context.ts';
import { harborCompose } from '../../cli/task-compose.ts';
import { BUSYBOX_IMAGE } from '../support/images.ts';
import { exec, finished, type Real, startReal } from './real.ts';

export const TASKS = '/work/shared/corpus/tasks';

/**
 * The work stays root-owned, as Harbor and Terminal-Bench images leave it (their agent is root): the
 * conversion hands it to the agent. The agent (uid 1000) may write where a cheating agent would try:
 * /logs and /tests.
 */
export const agentDockerfile = (workdir = '/app') =>
  `FROM ${BUSYBOX_IMAGE}\n` +
  `RUN mkdir -p ${workdir} /logs/verifier /tests && chown -R 1000:1000 /logs /tests\nWORKDIR ${workdir}\n`;

export interface Stub {
  task: string;
  files: Record<string, string>;
  /** A shell script, run as the agent, that solves the task, and one that answers it wrongly. */
  solve: string;
  wrong: string;
}

export const SIMPLE_TASK: Stub = {
  task: 'harbor-cookbook__simple-task',
  files: {
    'environment/Dockerfile': agentDockerfile(),
    'tests/test.sh':
      'if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, world!" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n',
    'solution/solve.sh': "printf 'Hello, world!\\n' > /app/hello.txt\n",
  },
  solve: "printf 'Hello, world!\\n' > /app/hello.txt",
  wrong: 'echo goodbye > /app/hello.txt',
};

/** A copy of a corpus task with `files` written over it; removed by `removeTasks`. */
export function completeTask(task: string, files: Record<string, string>): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'svc-harbor-')), task);
  cpSync(join(TASKS, task), dir, { recursive: true });
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

export function removeTasks(dirs: string[]): void {
  for (const d of dirs) rmSync(join(d, '..'), { recursive: true, force: true });
}

/** Deploys a task folder as `svc deploy --harbor` does; returns the environment and the context digest. */
export async function deployTask(r: Real, project: string, name: string, dir: string) {
  const { compose, root, done } = harborCompose(dir);
  const packed = await packContext(root);
  let upload: { status: number; body: any };
  try {
    upload = await r.t.req('PUT', '/v1/uploads', {
      raw: readFileSync(packed.file),
      headers: { 'content-type': 'application/gzip' },
    });
  } finally {
    packed.done();
    done();
  }
  assert.equal(upload.status, 201, JSON.stringify(upload.body));
  const d = await r.t.req('POST', `/v1/projects/${project}/deploy`, {
    body: { env: name, compose, context: upload.body.upload },
  });
  assert.equal(d.status, 202, JSON.stringify(d.body));
  const deployed = await finished(r.t, d.body.deployment.ID);
  assert.equal(
    deployed.deployment.Status,
    'succeeded',
    `${deployed.deployment.Error}\n${r.log().slice(-3000)}`,
  );
  return { env: deployed.deployment.EnvID as string, context: upload.body.sha256 as string };
}

/**
 * The verdict evidence of a verify (of one step when given), with the capture version and the
 * collect phase's evidence. `resume: false` is `svc verify` without `--resume`: the agent stays frozen.
 */
export async function verify(r: Real, env: string, step?: string, resume = true) {
  const v = await r.t.req('POST', `/v1/envs/${env}/verify`, {
    body: { resume, ...(step ? { step } : {}) },
  });
  assert.equal(v.status, 202, JSON.stringify(v.body));
  const out = await finished(r.t, v.body.deployment.ID);
  assert.equal(out.deployment.Status, 'succeeded', `${out.deployment.Error}\n${r.log().slice(-2000)}`);
  const grade = out.phases.find((p: any) => p.Name === 'grade')?.Evidence;
  return {
    ...out.phases.at(-1).Evidence,
    output: `${grade?.stdout}${grade?.stderr}`,
    capture: out.deployment.VersionID as string,
    collect: out.phases.find((p: any) => p.Name === 'collect')?.Evidence,
  };
}

/** Runs a shell script as the agent in `main`; it must succeed. */
export async function run(r: Real, env: string, script: string) {
  const out = await exec(r.t, env, 'main', ['sh', '-c', script]);
  assert.equal(out.exit_code, 0, out.stderr);
  return out;
}

/** The images the tasks' builds made (each run's context, and so each tag, is new). */
export async function builtImages(r: Real | undefined): Promise<string[]> {
  const specs = r ? await r.t.server.ctx.db.all<{ spec: string }>('SELECT spec FROM versions') : [];
  const built = new Set(
    specs.flatMap((v) =>
      (JSON.parse(v.spec).services ?? []).filter((s: any) => s.build).map((s: any) => s.image),
    ),
  );
  return [...built];
}

export function removeImages(images: string[]): void {
  for (const image of images) execFileSync('docker', ['image', 'rm', '-f', image], { stdio: 'ignore' });
}

/** A real control plane and svcd with the agent project `project` (the images built first by the caller). */
export async function startHarbor(project: string): Promise<Real> {
  const r = await startReal();
  await r.t.req('POST', '/v1/projects', { body: { name: project, kind: 'agent' } });
  return r;
}

/** Stops what `startHarbor` started and removes the task copies and the images their builds made. */
export async function stopHarbor(r: Real | undefined, dirs: string[]): Promise<void> {
  const images = await builtImages(r);
  await r?.close();
  removeTasks(dirs);
  removeImages(images);
}
