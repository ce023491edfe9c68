// Sandboxes (spec "POST /v1/sandboxes"): one environment for one episode, returned once healthy.
// Either a fork of a healthy version (whole stack, data included) or one container from an image;
// with `count`, that many forks of one version, each healthy or with its own error.

import type { SandboxRequest } from '../../protocol/api/bodies.ts';
import { findCloudByRef } from '../clouds/store.ts';
import { ComposeError, imageSandboxSpec } from '../compose/index.ts';
import type { AppContext } from '../context.ts';
import type { Queryable } from '../db/types.ts';
import { type Deployment, getDeployment } from '../deployments/store.ts';
import { checkCount, fanOutNames, fanOutVersion } from '../envs/fan-out.ts';
import { assertSnapshot, deploySpec, forkVersion, freeName, type Started } from '../envs/lifecycle.ts';
import { checkForkUnderPolicy } from '../envs/runtime-policy.ts';
import * as envStore from '../envs/store.ts';
import { BadRequest, NotFound, SvcError, Timeout, Upstream } from '../errors.ts';
import type { Caller } from '../identity/auth.ts';
import { poolClaim } from '../metrics/channels.ts';
import { findProject, insertProject, type Project } from '../projects/store.ts';

export const DEFAULT_SANDBOX_PROJECT = 'sandboxes';
export const DEFAULT_SANDBOX_TIMEOUT_SEC = 600;

/** What POST /v1/sandboxes (and the E2B surface) asks for: the API's one definition. */
export type { SandboxRequest };

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
      runtime: req.runtime,
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
    if (req.runtime !== undefined && req.runtime !== v.Spec.runtime)
      throw new BadRequest(
        `a fork runs under its version's runtime (${v.Spec.runtime ?? "the host's default"}); deploy the version with x-svc.runtime: ${req.runtime}`,
      );
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

/** A ready warm-pool member of `from_version`, or null: it is healthy already. */
async function claimWarm(ctx: AppContext, caller: Caller, req: SandboxRequest, pin: string | null) {
  // A sandbox that names a runtime is checked against its version by start().
  if (req.from_version === undefined || req.image !== undefined || req.runtime || pin) return null;
  const v = await envStore.getVersion(ctx.db, caller.teamId, req.from_version);
  if (!v?.Healthy || !v.Snapshot) return null; // start() says why
  // A member forked before the team's policy changed is handed out only if a fork would be made.
  await checkForkUnderPolicy(ctx.engine.deps.requiredRuntime, caller.teamId, v.Spec);
  const warm = await ctx.pool.claim(caller, v, req.name);
  poolClaim.publish({ warm: warm !== null });
  return warm;
}

/**
 * Waits for a sandbox's deployment: the environment and deployment once it succeeded; Upstream
 * (502) when it failed, Timeout (504) when it is not done within `timeoutSec`.
 */
async function healthy(ctx: AppContext, caller: Caller, dep: Deployment, timeoutSec: number) {
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

/** Starts the sandbox and waits for it: 201 when healthy, 502 when it failed, 504 at the timeout. */
export async function createSandbox(
  ctx: AppContext,
  caller: Caller,
  req: SandboxRequest,
  pin: string | null = null,
) {
  if (req.count !== undefined)
    throw new BadRequest('count forks one version: a target sandbox takes the image form only');
  if (pin) {
    const cloud = await findCloudByRef(ctx.db, caller.teamId, pin);
    if (!cloud) throw new NotFound(`no cloud named ${pin}`);
  }
  const warm = await claimWarm(ctx, caller, req, pin);
  if (warm) return warm;
  const started = await start(ctx, caller, req, pin);
  return healthy(ctx, caller, started.deployment, req.timeout_sec ?? DEFAULT_SANDBOX_TIMEOUT_SEC);
}

/** A sandbox of a fan-out that is not healthy: its name, why, and the status one alone would get. */
export interface SandboxFailed {
  name: string;
  error: string;
  status: number;
  environment?: envStore.Environment;
  deployment?: Deployment;
}

/**
 * `count` sandboxes of one healthy version (POST /v1/sandboxes with `count`): ready warm-pool
 * members first, then one fan-out of forks for the rest, all waited for at once. Each sandbox is
 * healthy or carries its own error; one that fails does not fail the others.
 */
export async function createSandboxes(
  ctx: AppContext,
  caller: Caller,
  req: SandboxRequest & { count: number },
  pin: string | null = null,
) {
  checkCount(req.count);
  if (req.from_version === undefined || req.image !== undefined)
    throw new BadRequest('count forks one version: give from_version (not image) with count');
  if (pin) throw new BadRequest('a target sandbox takes the image form only (image, cmd, env, ...)');
  const v = await envStore.getVersion(ctx.db, caller.teamId, req.from_version);
  if (!v) throw new NotFound(`version ${req.from_version} not found`);
  await assertSnapshot(ctx.db, caller, v, 'env.fork');
  const names = await fanOutNames(ctx.db, v.ProjectID, req.count, req.name, 'sbx-');
  const sandboxes: Array<{ environment?: envStore.Environment; deployment: Deployment } | SandboxFailed> = [];
  while (sandboxes.length < names.length) {
    const warm = await claimWarm(ctx, caller, { ...req, name: names[sandboxes.length] }, null);
    if (!warm) break;
    sandboxes.push(warm);
  }
  const fan = await fanOutVersion(ctx.db, ctx.engine, caller, v, names.slice(sandboxes.length));
  const timeoutSec = req.timeout_sec ?? DEFAULT_SANDBOX_TIMEOUT_SEC;
  const waited = await Promise.all(
    fan.forks.map(async (f): Promise<(typeof sandboxes)[number]> => {
      if ('error' in f) return f;
      try {
        return await healthy(ctx, caller, f.deployment, timeoutSec);
      } catch (err) {
        if (!(err instanceof SvcError)) throw err;
        const deployment = (await getDeployment(ctx.db, caller.teamId, f.deployment.ID)) ?? f.deployment;
        const environment = await envStore.getEnv(ctx.db, caller.teamId, f.deployment.EnvID);
        return { name: f.environment.Name, error: err.message, status: err.status, environment, deployment };
      }
    }),
  );
  return { fanout: fan.fanout, version: v.ID, snapshot: v.Snapshot, sandboxes: [...sandboxes, ...waited] };
}
