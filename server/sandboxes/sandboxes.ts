// Sandboxes (spec "POST /v1/sandboxes"): one environment for one episode, returned once healthy.
// Either a fork of a healthy version (whole stack, data included) or one container from an image.

import { findCloudByRef } from '../clouds/store.ts';
import { ComposeError, imageSandboxSpec } from '../compose/index.ts';
import type { AppContext } from '../context.ts';
import type { Queryable } from '../db/types.ts';
import { getDeployment } from '../deployments/store.ts';
import { assertSnapshot, deploySpec, forkVersion, freeName, type Started } from '../envs/lifecycle.ts';
import * as envStore from '../envs/store.ts';
import { BadRequest, NotFound, Timeout, Upstream } from '../errors.ts';
import type { Caller } from '../identity/auth.ts';
import { poolClaim } from '../metrics/channels.ts';
import { poolOf } from '../pool/pool.ts';
import { findProject, insertProject, type Project } from '../projects/store.ts';

export const DEFAULT_SANDBOX_PROJECT = 'sandboxes';
export const DEFAULT_SANDBOX_TIMEOUT_SEC = 600;

export interface SandboxRequest {
  from_version?: string;
  image?: string;
  cmd?: string[];
  env?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  egress?: 'deny' | 'allow';
  project?: string;
  name?: string;
  timeout_sec?: number;
}

/** The sandbox project, created on demand with its alpha environment like any project. */
async function sandboxProject(q: Queryable, teamId: string, name: string): Promise<Project> {
  const found = await findProject(q, teamId, name);
  if (found) return found;
  if (name !== DEFAULT_SANDBOX_PROJECT) throw new NotFound(`project ${name} not found`);
  try {
    const p = await insertProject(q, teamId, name, 'rl-environment', '');
    await envStore.insertEnv(q, { projectId: p.ID, teamId, name: 'alpha', stage: 'alpha' });
    return p;
  } catch (err) {
    // Two first sandboxes at once: the other request created it.
    const again = await findProject(q, teamId, name);
    if (again) return again;
    throw err;
  }
}

function imageSpec(req: SandboxRequest) {
  try {
    return imageSandboxSpec({
      image: req.image as string,
      cmd: req.cmd,
      env: req.env,
      ports: req.ports,
      volumes: req.volumes,
      egress: req.egress,
    });
  } catch (err) {
    if (err instanceof ComposeError) throw new BadRequest(err.message);
    throw err;
  }
}

async function start(
  ctx: AppContext,
  caller: Caller,
  req: SandboxRequest,
  pin: string | null,
): Promise<Started> {
  const hasVersion = req.from_version !== undefined;
  const hasImage = req.image !== undefined;
  if (hasVersion === hasImage) throw new BadRequest('give either from_version or image');
  if (hasVersion) {
    if (pin) throw new BadRequest('a target sandbox takes the image form only (image, cmd, env, ...)');
    const v = await envStore.getVersion(ctx.db, caller.teamId, req.from_version as string);
    if (!v) throw new NotFound(`version ${req.from_version} not found`);
    await assertSnapshot(ctx.db, caller, v, 'env.fork');
    const name = req.name ?? (await freeName(ctx.db, v.ProjectID, 'sbx-'));
    return forkVersion(ctx.db, ctx.engine, caller, v, name);
  }
  const spec = imageSpec(req);
  const project = await sandboxProject(ctx.db, caller.teamId, req.project ?? DEFAULT_SANDBOX_PROJECT);
  const name = req.name ?? (await freeName(ctx.db, project.ID, 'sbx-'));
  if (await envStore.findEnvByName(ctx.db, project.ID, name))
    throw new BadRequest(`environment ${name} already exists in project ${project.Name}`);
  return deploySpec(ctx.db, ctx.engine, caller, project, spec, { env: name, target: pin });
}

/** A ready warm-pool member of `from_version` (issue 15), or null: it is healthy already. */
async function claimWarm(ctx: AppContext, caller: Caller, req: SandboxRequest, pin: string | null) {
  if (req.from_version === undefined || req.image !== undefined || pin) return null;
  const v = await envStore.getVersion(ctx.db, caller.teamId, req.from_version);
  if (!v?.Healthy || !v.Snapshot) return null; // start() says why
  const warm = (await poolOf(ctx)?.claim(caller, v, req.name)) ?? null;
  poolClaim.publish({ warm: warm !== null });
  return warm;
}

/** Starts the sandbox and waits for it: 201 when healthy, 502 when it failed, 504 at the timeout. */
export async function createSandbox(
  ctx: AppContext,
  caller: Caller,
  req: SandboxRequest,
  pin: string | null = null,
) {
  if (pin) {
    const cloud = await findCloudByRef(ctx.db, caller.teamId, pin);
    if (!cloud) throw new NotFound(`no cloud named ${pin}`);
  }
  const warm = await claimWarm(ctx, caller, req, pin);
  if (warm) return warm;
  const started = await start(ctx, caller, req, pin);
  const dep = started.deployment;
  const timeoutSec = req.timeout_sec ?? DEFAULT_SANDBOX_TIMEOUT_SEC;
  const status = await ctx.engine.waitFinished(dep.ID, timeoutSec * 1000);
  const deployment = (await getDeployment(ctx.db, caller.teamId, dep.ID)) ?? dep;
  if (status === null) {
    throw new Timeout(
      `sandbox environment ${dep.EnvID} did not become healthy within ${timeoutSec} s (deployment ${dep.ID} continues)`,
    );
  }
  if (status !== 'succeeded') {
    throw new Upstream(`sandbox deployment ${dep.ID} ${status}: ${deployment.Error || 'no reason recorded'}`);
  }
  const environment = await envStore.getEnv(ctx.db, caller.teamId, dep.EnvID);
  return { environment, deployment };
}
