// `POST /webhooks/codehost` (spec "Code-hosting integration"): the raw body is verified against
// X-Hub-Signature-256 (HMAC-SHA256 with the webhook secret, compared in constant time) before it is
// parsed; deliveries are idempotent by X-GitHub-Delivery (a redelivery answers what the first did
// and deploys nothing). Handled: ping, installation (created, unsuspend, new_permissions_accepted,
// deleted) and push, which deploys every project whose source is the pushed repository.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { findEnvByName } from '../envs/store.ts';
import { BadRequest, NotConfigured, Unauthorized } from '../errors.ts';
import { projectsWithRepo } from '../projects/source-store.ts';
import { requireApp, WEBHOOK_OFF } from './codehost.ts';
import { branchEnv, type CodehostDeps, deployCommit, PROVIDER } from './push.ts';
import {
  deleteInstallation,
  deliveryAnswer,
  getInstallation,
  recordDelivery,
  saveDeliveryAnswer,
  upsertInstallation,
} from './store.ts';

export interface Delivery {
  event: string;
  id: string;
  signature: string;
  body: Buffer;
}

/** 503 without the app or the secret, 401 unless the signature is the body's. */
export function verifySignature(d: CodehostDeps, signature: string | undefined, body: Buffer): void {
  requireApp(d.config);
  const secret = d.config.codehost.webhookSecret;
  if (!secret) throw new NotConfigured(WEBHOOK_OFF);
  const want = Buffer.from(`sha256=${createHmac('sha256', secret).update(body).digest('hex')}`);
  const got = Buffer.from(signature ?? '');
  if (got.length !== want.length || !timingSafeEqual(got, want))
    throw new Unauthorized(signature ? 'webhook signature mismatch' : 'webhook without X-Hub-Signature-256');
}

const obj = (v: unknown): Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const num = (v: unknown): number => (typeof v === 'number' && Number.isSafeInteger(v) ? v : 0);

function parse(body: Buffer): Record<string, unknown> {
  try {
    return obj(JSON.parse(body.toString('utf8')));
  } catch (err) {
    throw new BadRequest(`malformed webhook body: ${(err as Error).message}`);
  }
}

export async function handleDelivery(d: CodehostDeps, w: Delivery): Promise<unknown> {
  verifySignature(d, w.signature, w.body);
  if (!w.id || w.id.length > 128) throw new BadRequest('webhook without X-GitHub-Delivery');
  if (!w.event || w.event.length > 64) throw new BadRequest('webhook without X-GitHub-Event');
  const payload = parse(w.body);
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
      return { ok: true, event, zen: str(p.zen) };
    case 'installation':
      return onInstallation(d, p);
    case 'push':
      return onPush(d, p);
    default:
      return { ok: true, event, ignored: true };
  }
}

async function onInstallation(d: CodehostDeps, p: Record<string, unknown>): Promise<unknown> {
  const action = str(p.action);
  const inst = obj(p.installation);
  const id = num(inst.id);
  if (!id) throw new BadRequest('installation event without installation.id');
  const login = str(obj(inst.account).login);
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

async function onPush(d: CodehostDeps, p: Record<string, unknown>): Promise<unknown> {
  const ref = str(p.ref);
  const sha = str(p.after);
  const repository = obj(p.repository);
  const repo = str(repository.full_name);
  if (!ref.startsWith('refs/heads/') || p.deleted === true)
    return { ok: true, sha, branch: '', projects: [], skipped: `not a branch update: ${ref}` };
  const branch = ref.slice('refs/heads/'.length);
  const projects: ProjectOutcome[] = [];
  for (const proj of await projectsWithRepo(d.db, PROVIDER, repo)) {
    const out: ProjectOutcome = { project: proj.name };
    projects.push(out);
    const installationId = proj.source.InstallationID || num(obj(p.installation).id);
    const inst = installationId ? await getInstallation(d.db, installationId) : undefined;
    if (!inst || inst.TeamID !== proj.teamId) {
      out.skipped = `no installation of ${repo} is linked to this project's team`;
      continue;
    }
    const defaultBranch = proj.source.DefaultBranch || str(repository.default_branch);
    const env = branchEnv(branch, defaultBranch);
    out.env = env;
    if (env !== 'alpha' && !proj.source.DeployBranches && !(await findEnvByName(d.db, proj.projectId, env))) {
      out.skipped = `branch ${branch}: environment '${env}' does not exist and deploy_branches is off`;
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
    }
  }
  return { ok: true, sha, branch, projects };
}
