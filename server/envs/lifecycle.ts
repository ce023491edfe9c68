// Environment operations that start deployments: deploy, fork, snapshot, rollback, verify and
// destroy. Each checks what the spec requires of the request, records what the 202 response must
// already show (a fork's new environment, a snapshot's version), and submits to the engine.
import type { DeployRequestBody, ForkRequestBody } from '../../protocol/api/bodies.ts';
import type { EnvSpec } from '../../protocol/spec.ts';
import { ComposeError, parseCompose } from '../compose/index.ts';
import type { Db } from '../db/types.ts';
import type { DeploymentEngine } from '../deployments/engine.ts';
import type { DeployParams } from '../deployments/kinds/deploy.ts';
import type { FanoutTag, ForkParams } from '../deployments/kinds/fork.ts';
import type { RollbackParams } from '../deployments/kinds/rollback.ts';
import type { VerifyParams } from '../deployments/kinds/verify.ts';
import type { Deployment, Phase } from '../deployments/store.ts';
import { BadRequest, Conflict, NotFound } from '../errors.ts';
import { getHostRow } from '../hosts/store.ts';
import type { Caller } from '../identity/auth.ts';
import { findProject, type Project } from '../projects/store.ts';
import { parseWithContext } from '../uploads/parse.ts';
import { checkForkUnderPolicy, specUnderPolicy } from './runtime-policy.ts';
import {
  countEnvsNamed,
  type Environment,
  findEnvByName,
  getEnv,
  getVersion,
  insertEnv,
  insertVersion,
  type Version,
} from './store.ts';

export type Started = { deployment: Deployment; phases: Phase[] };
export const ENV_NAME_RE = /^[a-z0-9][a-z0-9._-]{0,62}$/;

export function checkEnvName(name: string): void {
  if (!ENV_NAME_RE.test(name)) {
    throw new BadRequest(`environment name '${name.slice(0, 80)}' must match ${ENV_NAME_RE.source}`);
  }
}

export async function envOf(db: Db, caller: Caller, id: string): Promise<Environment> {
  const env = await getEnv(db, caller.teamId, id);
  if (!env) throw new NotFound(`environment ${id} not found`);
  return env;
}

/** The one status check for operations on a live environment. */
export function assertLive(env: Environment): void {
  if (env.Status === 'destroyed' || env.Status === 'destroying') {
    throw new Conflict(`environment ${env.ID} is ${env.Status}`);
  }
}

async function projectOf(db: Db, caller: Caller, nameOrId: string): Promise<Project> {
  const p = await findProject(db, caller.teamId, nameOrId);
  if (!p) throw new NotFound(`project ${nameOrId} not found`);
  return p;
}

/** `<prefix><n>` with the first n that is free in the project. */
export async function freeName(db: Db, projectId: string, prefix: string): Promise<string> {
  let n = (await countEnvsNamed(db, projectId, prefix)) + 1;
  while (await findEnvByName(db, projectId, `${prefix}${n}`)) n++;
  return `${prefix}${n}`;
}

export function parseSpec(compose: string): EnvSpec {
  try {
    return parseCompose(compose).spec;
  } catch (err) {
    if (err instanceof ComposeError) throw new BadRequest(err.message);
    throw err;
  }
}

export interface DeployRequest {
  env?: string;
  warm?: string[];
  target?: string | null;
}

/** Deploys a spec into a project's environment (created when it does not exist yet). */
export async function deploySpec(
  db: Db,
  engine: DeploymentEngine,
  caller: Caller,
  project: Project,
  spec: EnvSpec,
  req: DeployRequest,
): Promise<Started & { environment: Environment }> {
  const name = req.env ?? 'alpha';
  checkEnvName(name);
  spec = await specUnderPolicy(engine.deps.requiredRuntime, caller.teamId, spec);
  let env = await findEnvByName(db, project.ID, name);
  if (env) assertLive(env);
  else
    env = await insertEnv(db, {
      projectId: project.ID,
      teamId: caller.teamId,
      name,
      stage: name === 'alpha' ? 'alpha' : 'branch',
    });
  const started = await engine.submit(
    {
      teamId: caller.teamId,
      projectId: project.ID,
      envId: env.ID,
      kind: 'deploy',
      params: { env: name, warm: req.warm ?? null, target: req.target ?? null } satisfies DeployParams,
    },
    { spec },
  );
  return { ...started, environment: env };
}

export async function deploy(
  db: Db,
  engine: DeploymentEngine,
  caller: Caller,
  projectRef: string,
  body: DeployRequestBody,
  uploadsDir = '',
): Promise<Started> {
  const project = await projectOf(db, caller, projectRef);
  if (body.compose_path && !body.context)
    throw new BadRequest('compose_path names a place inside a context: send it with context (an upload id)');
  const spec = body.context
    ? await parseWithContext(db, uploadsDir, caller.teamId, body.compose, body.context, body.compose_path)
    : parseSpec(body.compose);
  const { deployment, phases } = await deploySpec(db, engine, caller, project, spec, body);
  return { deployment, phases };
}

/**
 * A version is forked or rolled back to only as a healthy snapshot. A healthy version without one
 * lives on a provider that refused the snapshot: that is said in the spec's refusal wording.
 */
export async function assertSnapshot(db: Db, caller: Caller, v: Version, kind: 'env.fork' | 'env.rollback') {
  if (v.Healthy && v.Snapshot) return;
  const owner = v.Healthy ? await getEnv(db, caller.teamId, v.EnvID) : undefined;
  const host = owner?.HostID ? await getHostRow(db, owner.HostID) : undefined;
  if (host && host.kind !== 'sidecar') {
    const provider = host.kind.replace(/^driver:/, '');
    throw new BadRequest(`${provider}: ${kind}: not supported on ${provider} yet`);
  }
  throw new BadRequest(`version ${v.ID} is not a healthy snapshot`);
}

/** A version this environment may fork: its own, or the one it was forked from. */
export async function forkableVersion(
  db: Db,
  caller: Caller,
  env: Environment,
  versionId: string | undefined,
): Promise<Version> {
  const id = versionId || env.CurrentVersionID;
  if (!id) throw new Conflict(`environment ${env.ID} has no version to fork yet`);
  const v = await getVersion(db, caller.teamId, id);
  const related = v && (v.EnvID === env.ID || v.ID === env.CurrentVersionID || v.ID === env.ParentVersionID);
  if (!v || !related) throw new BadRequest(`version ${id} is not a version of environment ${env.ID}`);
  await assertSnapshot(db, caller, v, 'env.fork');
  return v;
}

export async function forkVersion(
  db: Db,
  engine: DeploymentEngine,
  caller: Caller,
  v: Version,
  name: string,
  fanout?: FanoutTag,
): Promise<Started & { environment: Environment }> {
  checkEnvName(name);
  await checkForkUnderPolicy(engine.deps.requiredRuntime, caller.teamId, v.Spec);
  if (await findEnvByName(db, v.ProjectID, name))
    throw new Conflict(`environment ${name} already exists in this project`);
  const owner = await getEnv(db, caller.teamId, v.EnvID);
  const env = await insertEnv(db, {
    projectId: v.ProjectID,
    teamId: caller.teamId,
    name,
    stage: 'fork',
    hostId: owner?.HostID ?? '',
    parentVersionId: v.ID,
    currentVersionId: v.ID,
    status: 'deploying',
  });
  const started = await engine.submit(
    {
      teamId: caller.teamId,
      projectId: v.ProjectID,
      envId: env.ID,
      kind: 'fork',
      versionId: v.ID,
      params: { from_env: v.EnvID, version: v.ID, ...(fanout && { fanout }) } satisfies ForkParams,
    },
    null,
  );
  return { ...started, environment: env };
}

export async function fork(
  db: Db,
  engine: DeploymentEngine,
  caller: Caller,
  envId: string,
  body: Omit<ForkRequestBody, 'count'>,
): Promise<Started> {
  const env = await envOf(db, caller, envId);
  assertLive(env);
  const v = await forkableVersion(db, caller, env, body.version);
  const name = body.name ?? (await freeName(db, env.ProjectID, `${env.Name}-fork-`));
  const { deployment, phases } = await forkVersion(db, engine, caller, v, name);
  return { deployment, phases };
}

async function currentVersion(db: Db, caller: Caller, env: Environment): Promise<Version> {
  const v = env.CurrentVersionID ? await getVersion(db, caller.teamId, env.CurrentVersionID) : undefined;
  if (!v) throw new Conflict(`environment ${env.ID} has no deployed version yet`);
  return v;
}

export async function snapshot(
  db: Db,
  engine: DeploymentEngine,
  caller: Caller,
  envId: string,
): Promise<Started> {
  const env = await envOf(db, caller, envId);
  assertLive(env);
  const current = await currentVersion(db, caller, env);
  const v = await insertVersion(db, { projectId: env.ProjectID, envId: env.ID, spec: current.Spec });
  return engine.submit(
    {
      teamId: caller.teamId,
      projectId: env.ProjectID,
      envId: env.ID,
      kind: 'snapshot',
      versionId: v.ID,
      params: {},
    },
    null,
  );
}

export async function rollback(
  db: Db,
  engine: DeploymentEngine,
  caller: Caller,
  envId: string,
  versionId: string,
): Promise<Started> {
  const env = await envOf(db, caller, envId);
  assertLive(env);
  const v = await getVersion(db, caller.teamId, versionId);
  if (!v || v.EnvID !== env.ID)
    throw new BadRequest(`version ${versionId} is not a snapshot of environment ${env.ID}`);
  await assertSnapshot(db, caller, v, 'env.rollback');
  return engine.submit(
    {
      teamId: caller.teamId,
      projectId: env.ProjectID,
      envId: env.ID,
      kind: 'rollback',
      versionId: v.ID,
      params: { version: v.ID } satisfies RollbackParams,
    },
    null,
  );
}

/** A multi-step task is graded one named step at a time; a task without steps has none to name. */
function checkStep(envId: string, steps: { name: string }[], step: string | undefined): void {
  const names = steps.map((s) => s.name).join(', ');
  if (step === undefined) {
    if (steps.length)
      throw new BadRequest(
        `environment ${envId}: its verifier has steps (${names}); name the one to grade with step`,
      );
    return;
  }
  if (!steps.some((s) => s.name === step)) {
    throw new BadRequest(
      steps.length
        ? `environment ${envId}: unknown step '${step}'; its verifier's steps are ${names}`
        : `environment ${envId}: unknown step '${step}'; its verifier has no steps`,
    );
  }
}

export async function verify(
  db: Db,
  engine: DeploymentEngine,
  caller: Caller,
  envId: string,
  resume: boolean,
  step?: string,
): Promise<Started> {
  const env = await envOf(db, caller, envId);
  assertLive(env);
  const current = env.CurrentVersionID
    ? await getVersion(db, caller.teamId, env.CurrentVersionID)
    : undefined;
  if (!current?.Spec.agent || !current.Spec.verifier) {
    throw new BadRequest(
      `environment ${env.ID}: its version does not declare x-svc.agent.service and x-svc.verifier`,
    );
  }
  checkStep(env.ID, current.Spec.verifier.steps ?? [], step);
  const capture = await insertVersion(db, { projectId: env.ProjectID, envId: env.ID, spec: current.Spec });
  return engine.submit(
    {
      teamId: caller.teamId,
      projectId: env.ProjectID,
      envId: env.ID,
      kind: 'verify',
      versionId: capture.ID,
      params: {
        resume,
        agent_service: current.Spec.agent.service,
        ...(step === undefined ? {} : { step }),
      } satisfies VerifyParams,
    },
    null,
  );
}

export async function destroy(
  db: Db,
  engine: DeploymentEngine,
  caller: Caller,
  envId: string,
): Promise<Started> {
  const env = await envOf(db, caller, envId);
  if (env.Status === 'destroyed') throw new Conflict(`environment ${env.ID} is already destroyed`);
  return engine.submit(
    { teamId: caller.teamId, projectId: env.ProjectID, envId: env.ID, kind: 'destroy', params: {} },
    null,
  );
}
