// Push-to-deploy and deploy-from-source (spec "POST /webhooks/codehost", "deploy-from-source"): the
// compose file at the pushed commit (the project's compose_path) is deployed to the branch's
// environment: `alpha` for the default branch, else the branch name with every character outside
// [a-z0-9] replaced by `-`. The repository at that commit is the deployment's project context
// (repo-archive.ts), with the compose file's place in it honoured, so build:, relative binds, .env
// and env_file work as with `svc deploy`. A check run on the commit follows the deployment to its
// end (a 403 on checks is tolerated: the app may lack Checks: write).
import type { Config } from '../config/config.ts';
import type { Db } from '../db/types.ts';
import type { DeploymentEngine } from '../deployments/engine.ts';
import { deploySpec, type Started } from '../envs/lifecycle.ts';
import { Conflict, NotFound } from '../errors.ts';
import { appendEvent, type LiveEvents } from '../events/store.ts';
import { requireProject } from '../projects/projects.ts';
import { getSource, type ProjectSource, setLastDeployedSha } from '../projects/source-store.ts';
import { parseWithContext } from '../uploads/parse.ts';
import { consoleUrl, requireApp } from './codehost.ts';
import { type GitHub, HttpFailure } from './github.ts';
import { repositoryContext } from './repo-archive.ts';
import { concludeCheckRun, getInstallation, saveCheckRun } from './store.ts';

export const PROVIDER = 'github';
export const CHECK_NAME = 'svc deploy';
/** A deployment is bounded by its phases (15 min each); the check run waits at most this long. */
const CHECK_WAIT_MS = 3 * 60 * 60 * 1000;

export interface CodehostDeps {
  db: Db;
  engine: DeploymentEngine;
  events: LiveEvents;
  config: Config;
  github: GitHub;
  log: { warn(obj: object, msg: string): void };
}

/** The spec's environment for a branch. */
export function branchEnv(branch: string, defaultBranch: string): string {
  if (branch === defaultBranch) return 'alpha';
  return branch.replace(/[^a-z0-9]/g, '-').slice(0, 63);
}

export interface Commit {
  project: { id: string; teamId: string; name: string };
  source: ProjectSource;
  installationId: number;
  repo: string;
  branch: string;
  sha: string;
  env: string;
}

/** Deploys the compose file of `c.sha` to `c.env`; the check run is posted in the background. */
export async function deployCommit(d: CodehostDeps, c: Commit): Promise<Started> {
  const compose = await d.github.fileAt(c.installationId, c.repo, c.source.ComposePath, c.sha);
  const project = await requireProject(d.db, c.project.teamId, c.project.id);
  const dir = d.config.uploadsDir;
  const up = await repositoryContext(
    d.db,
    dir,
    d.github,
    { ...c, teamId: c.project.teamId },
    d.config.uploads,
  );
  const spec = await parseWithContext(d.db, dir, c.project.teamId, compose, up.upload, c.source.ComposePath);
  const caller = { teamId: c.project.teamId, role: 'codehost' };
  const { deployment, phases } = await deploySpec(d.db, d.engine, caller, project, spec, { env: c.env });
  await appendEvent(
    d.db,
    c.project.teamId,
    `dep:${deployment.ID}`,
    'deployment.source',
    {
      sha: c.sha,
      branch: c.branch,
      repo: c.repo,
      context: up.sha256,
    },
    d.events,
  );
  await setLastDeployedSha(d.db, c.project.id, c.sha);
  void followWithCheckRun(d, c, deployment.ID).catch((err) =>
    d.log.warn({ deployment: deployment.ID, err: (err as Error).message }, 'check run not completed'),
  );
  return { deployment, phases };
}

async function followWithCheckRun(d: CodehostDeps, c: Commit, deploymentId: string): Promise<void> {
  let id: number;
  try {
    const made = await d.github.asInstallation<{ id: number }>(
      c.installationId,
      'POST',
      `/repos/${c.repo}/check-runs`,
      {
        name: CHECK_NAME,
        head_sha: c.sha,
        status: 'in_progress',
        details_url: `${consoleUrl(d.config)}/app/deployment/?id=${deploymentId}`,
      },
    );
    id = made.id;
  } catch (err) {
    if (err instanceof HttpFailure && err.upstreamStatus === 403) return; // no Checks: write
    throw err;
  }
  await saveCheckRun(d.db, { deploymentId, installationId: c.installationId, repo: c.repo, checkRunId: id });
  const status = await d.engine.waitFinished(deploymentId, CHECK_WAIT_MS);
  const conclusion = status === 'succeeded' ? 'success' : status === null ? 'timed_out' : 'failure';
  await d.github.asInstallation(c.installationId, 'PATCH', `/repos/${c.repo}/check-runs/${id}`, {
    status: 'completed',
    conclusion,
  });
  await concludeCheckRun(d.db, deploymentId, conclusion);
}

/** `POST /v1/projects/{p}/deploy-from-source`: 503 without the app, 409 without an installation that sees the repo. */
export async function deployFromSource(
  d: CodehostDeps,
  teamId: string,
  projectRef: string,
  body: { branch?: string; env?: string },
): Promise<Started & { branch: string; env: string }> {
  const project = await requireProject(d.db, teamId, projectRef);
  requireApp(d.config);
  const source = await getSource(d.db, project.ID);
  if (!source) throw new NotFound(`project '${project.Name}' has no source repository`);
  const inst = source.InstallationID ? await getInstallation(d.db, source.InstallationID) : undefined;
  if (!inst || inst.TeamID !== teamId)
    throw new Conflict(
      `project '${project.Name}' has no installation linked to this team: link one and set it with POST /v1/projects/${project.Name}/source {installation_id}`,
    );
  const repos = await d.github.repositories(inst.InstallationID);
  const repo = repos.find((r) => r.full_name.toLowerCase() === source.Repo.toLowerCase());
  if (!repo) throw new Conflict(`installation ${inst.InstallationID} cannot see ${source.Repo}`);
  const defaultBranch = source.DefaultBranch || repo.default_branch;
  const branch = body.branch || defaultBranch;
  const env = body.env || branchEnv(branch, defaultBranch);
  const sha = await d.github.branchHead(inst.InstallationID, repo.full_name, branch);
  const started = await deployCommit(d, {
    project: { id: project.ID, teamId, name: project.Name },
    source,
    installationId: inst.InstallationID,
    repo: repo.full_name,
    branch,
    sha,
    env,
  });
  return { ...started, branch, env };
}
