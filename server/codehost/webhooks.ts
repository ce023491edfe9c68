// `POST /webhooks/codehost` (spec "Code-hosting integration"): the body arrives verified against
// X-Hub-Signature-256 (webhook-intake.ts); the fields read are checked (protocol/codehost.ts) before
// anything is recorded. Deliveries are idempotent by X-GitHub-Delivery (a redelivery answers what
// the first did and deploys nothing), and since that id is not signed, a push deploys a commit to a
// project's branch once whatever its delivery id. Handled: ping, installation (created, unsuspend,
// new_permissions_accepted, deleted) and push, which deploys every project whose source is the
// pushed repository.
import type { TSchema } from '@sinclair/typebox';
import { type TypeCheck, TypeCompiler } from '@sinclair/typebox/compiler';
import { InstallationEvent, PushEvent } from '../../protocol/codehost.ts';
import { findEnvByName } from '../envs/store.ts';
import { BadRequest } from '../errors.ts';
import { projectsWithRepo } from '../projects/source-store.ts';
import { branchEnv, type CodehostDeps, deployCommit, PROVIDER } from './push.ts';
import {
  claimPushedCommit,
  deleteInstallation,
  deliveryAnswer,
  getInstallation,
  recordDelivery,
  releasePushedCommit,
  saveDeliveryAnswer,
  upsertInstallation,
} from './store.ts';

export interface Delivery {
  event: string;
  id: string;
  /** Already checked against X-Hub-Signature-256 (webhook-intake.ts). */
  body: Buffer;
}

const CHECKS: Record<string, TypeCheck<TSchema>> = {
  installation: TypeCompiler.Compile(InstallationEvent),
  push: TypeCompiler.Compile(PushEvent),
};

const obj = (v: unknown): Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** The payload, its read fields checked for the events handled: 400 naming the first bad one. */
function parse(event: string, body: Buffer): Record<string, unknown> {
  let p: unknown;
  try {
    p = JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new BadRequest(`malformed webhook body: ${(err as Error).message}`);
  }
  if (obj(p) !== p) throw new BadRequest('malformed webhook body: not a JSON object');
  const check = CHECKS[event];
  const bad = check && !check.Check(p) ? check.Errors(p).First() : undefined;
  if (bad) {
    const field = bad.path.slice(1).replaceAll('/', '.') || 'the payload';
    throw new BadRequest(`malformed ${event} webhook: ${field}: ${bad.message}`);
  }
  return p as Record<string, unknown>;
}

export async function handleDelivery(d: CodehostDeps, w: Delivery): Promise<unknown> {
  const payload = parse(w.event, w.body);
  if (!(await recordDelivery(d.db, w.id, w.event))) {
    return (await deliveryAnswer(d.db, w.id)) ?? { ok: true, duplicate: true };
  }
  const answer = await dispatch(d, w.event, payload);
  await saveDeliveryAnswer(d.db, w.id, answer);
  return answer;
}

async function dispatch(d: CodehostDeps, event: string, p: Record<string, unknown>): Promise<unknown> {
  switch (event) {
    case 'ping':
      return { ok: true, event, zen: str(p.zen).slice(0, 200) };
    case 'installation':
      return onInstallation(d, p as InstallationEvent);
    case 'push':
      return onPush(d, p as PushEvent);
    default:
      return { ok: true, event, ignored: true };
  }
}

async function onInstallation(d: CodehostDeps, p: InstallationEvent): Promise<unknown> {
  const { action } = p;
  const id = p.installation.id;
  const login = p.installation.account?.login ?? '';
  if (action === 'created' || action === 'unsuspend' || action === 'new_permissions_accepted')
    await upsertInstallation(d.db, id, login);
  else if (action === 'deleted') await deleteInstallation(d.db, id);
  else return { ok: true, event: 'installation', action, ignored: true };
  return { ok: true, event: 'installation', action, installation: id };
}

interface ProjectOutcome {
  project: string;
  deployment?: string;
  env?: string;
  skipped?: string;
  error?: string;
}

async function onPush(d: CodehostDeps, p: PushEvent): Promise<unknown> {
  const { ref, after: sha } = p;
  const repo = p.repository.full_name;
  if (!ref.startsWith('refs/heads/') || p.deleted === true)
    return { ok: true, sha, branch: '', projects: [], skipped: `not a branch update: ${ref}` };
  const branch = ref.slice('refs/heads/'.length);
  const projects: ProjectOutcome[] = [];
  for (const proj of await projectsWithRepo(d.db, PROVIDER, repo)) {
    const out: ProjectOutcome = { project: proj.name };
    projects.push(out);
    const installationId = proj.source.InstallationID || (p.installation?.id ?? 0);
    const inst = installationId ? await getInstallation(d.db, installationId) : undefined;
    if (!inst || inst.TeamID !== proj.teamId) {
      out.skipped = `no installation of ${repo} is linked to this project's team`;
      continue;
    }
    const defaultBranch = proj.source.DefaultBranch || (p.repository.default_branch ?? '');
    const env = branchEnv(branch, defaultBranch);
    out.env = env;
    if (env !== 'alpha' && !proj.source.DeployBranches && !(await findEnvByName(d.db, proj.projectId, env))) {
      out.skipped = `branch ${branch}: environment '${env}' does not exist and deploy_branches is off`;
      continue;
    }
    // The delivery id is not signed: a replayed push with a new one must not deploy again.
    if (!(await claimPushedCommit(d.db, proj.projectId, branch, sha))) {
      out.skipped = `commit ${sha} was already deployed to branch ${branch} by a push`;
      continue;
    }
    try {
      const started = await deployCommit(d, {
        project: { id: proj.projectId, teamId: proj.teamId, name: proj.name },
        source: proj.source,
        installationId,
        repo,
        branch,
        sha,
        env,
      });
      out.deployment = started.deployment.ID;
    } catch (err) {
      out.error = (err as Error).message;
      // Nothing was deployed: a redelivery of this push may try again.
      await releasePushedCommit(d.db, proj.projectId, branch, sha);
    }
  }
  return { ok: true, sha, branch, projects };
}
