// Deployments and their phases. Each status change is one UPDATE and every start/finish also
// appends an event, so the history of a deployment can be read back in order.

import type { Static } from '@sinclair/typebox';
import type {
  DeploymentKind,
  Deployment as DeploymentSchema,
  DeploymentStatus,
  Phase as PhaseSchema,
  PhaseStatus,
} from '../../protocol/api/records.ts';
import { newId, PREFIX } from '../../protocol/ids.ts';
import { json, now, parseJson, type Queryable, updateColumns } from '../db/types.ts';

// The statuses and kinds are the API's (protocol/api/records.ts): one definition.
export { DEPLOYMENT_KINDS } from '../../protocol/api/records.ts';
export type { DeploymentKind, DeploymentStatus, PhaseStatus };

/** A deployment as the API answers it (protocol/api/records.ts). */
export type Deployment = Static<typeof DeploymentSchema>;

export type Phase = Static<typeof PhaseSchema>;

interface DepRow {
  id: string;
  team_id: string;
  project_id: string;
  env_id: string;
  kind: string;
  status: string;
  version_id: string;
  target_env_id: string;
  params: string;
  error: string;
  created_at: string;
  finished_at: string | null;
}

interface PhaseRow {
  deployment_id: string;
  seq: number | string;
  name: string;
  status: string;
  evidence: string | null;
  error: string;
  started_at: string | null;
  finished_at: string | null;
}

const depOf = (r: DepRow): Deployment => ({
  ID: r.id,
  ProjectID: r.project_id,
  EnvID: r.env_id,
  Kind: r.kind as DeploymentKind,
  Status: r.status as DeploymentStatus,
  VersionID: r.version_id,
  TargetEnvID: r.target_env_id,
  Params: parseJson(r.params, {}),
  Error: r.error,
  CreatedAt: r.created_at,
  FinishedAt: r.finished_at,
});

const phaseOf = (r: PhaseRow): Phase => ({
  DeploymentID: r.deployment_id,
  Seq: Number(r.seq),
  Name: r.name,
  Status: r.status as PhaseStatus,
  Evidence: r.evidence === null ? null : parseJson(r.evidence, null),
  Error: r.error,
  StartedAt: r.started_at,
  FinishedAt: r.finished_at,
});

export interface NewDeployment {
  teamId: string;
  projectId: string;
  envId: string;
  kind: DeploymentKind;
  versionId?: string;
  targetEnvId?: string;
  params?: Record<string, unknown>;
  phases: readonly string[];
  /** The replica that runs it and until when its lease holds (lease-store.ts). */
  owner?: string;
  leaseUntil?: string | null;
}

/** Inserts the deployment (pending) and its phases (pending) in one go. */
export async function insertDeployment(
  q: Queryable,
  d: NewDeployment,
): Promise<{ deployment: Deployment; phases: Phase[] }> {
  const row: DepRow = {
    id: newId(PREFIX.deployment),
    team_id: d.teamId,
    project_id: d.projectId,
    env_id: d.envId,
    kind: d.kind,
    status: 'pending',
    version_id: d.versionId ?? '',
    target_env_id: d.targetEnvId ?? '',
    params: json(d.params ?? {}),
    error: '',
    created_at: now(),
    finished_at: null,
  };
  await q.run(
    `INSERT INTO deployments (id, team_id, project_id, env_id, kind, status, version_id, target_env_id, params, error,
      created_at, owner, lease_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      row.id,
      row.team_id,
      row.project_id,
      row.env_id,
      row.kind,
      row.status,
      row.version_id,
      row.target_env_id,
      row.params,
      row.error,
      row.created_at,
      d.owner ?? '',
      d.leaseUntil ?? null,
    ],
  );
  const phases: Phase[] = [];
  for (const [i, name] of d.phases.entries()) {
    await q.run("INSERT INTO phases (deployment_id, seq, name, status) VALUES (?, ?, ?, 'pending')", [
      row.id,
      i + 1,
      name,
    ]);
    phases.push({
      DeploymentID: row.id,
      Seq: i + 1,
      Name: name,
      Status: 'pending',
      Evidence: null,
      Error: '',
      StartedAt: null,
      FinishedAt: null,
    });
  }
  return { deployment: depOf(row), phases };
}

export async function getDeployment(
  q: Queryable,
  teamId: string,
  id: string,
): Promise<Deployment | undefined> {
  const r = await q.get<DepRow>('SELECT * FROM deployments WHERE id = ? AND team_id = ?', [id, teamId]);
  return r && depOf(r);
}

export async function getDeploymentAnyTeam(
  q: Queryable,
  id: string,
): Promise<(Deployment & { TeamID: string }) | undefined> {
  const r = await q.get<DepRow>('SELECT * FROM deployments WHERE id = ?', [id]);
  return r && { ...depOf(r), TeamID: r.team_id };
}

export async function listPhases(q: Queryable, deploymentId: string): Promise<Phase[]> {
  return (
    await q.all<PhaseRow>('SELECT * FROM phases WHERE deployment_id = ? ORDER BY seq', [deploymentId])
  ).map(phaseOf);
}

/** Deployments that touched an environment, as subject or as created target, newest first. */
export async function listDeploymentsOfEnv(q: Queryable, envId: string): Promise<Deployment[]> {
  const rows = await q.all<DepRow>(
    'SELECT * FROM deployments WHERE env_id = ? OR target_env_id = ? ORDER BY created_at DESC, id DESC',
    [envId, envId],
  );
  return rows.map(depOf);
}

export interface DeploymentPatch {
  status?: DeploymentStatus;
  error?: string;
  versionId?: string;
  targetEnvId?: string;
  finishedAt?: string;
  /** The kind's phase params, persisted after every phase. */
  params?: Record<string, unknown>;
}

export async function updateDeployment(q: Queryable, id: string, p: DeploymentPatch): Promise<void> {
  await updateColumns(
    q,
    'deployments',
    {
      status: p.status,
      error: p.error,
      version_id: p.versionId,
      target_env_id: p.targetEnvId,
      finished_at: p.finishedAt,
      params: p.params === undefined ? undefined : json(p.params),
    },
    'id = ?',
    [id],
  );
}

export interface PhasePatch {
  status: PhaseStatus;
  evidence?: unknown;
  error?: string;
  startedAt?: string;
  finishedAt?: string;
}

export async function updatePhase(
  q: Queryable,
  deploymentId: string,
  seq: number,
  p: PhasePatch,
): Promise<void> {
  await updateColumns(
    q,
    'phases',
    {
      status: p.status,
      evidence: p.evidence === undefined ? undefined : json(p.evidence),
      error: p.error,
      started_at: p.startedAt,
      finished_at: p.finishedAt,
    },
    'deployment_id = ? AND seq = ?',
    [deploymentId, seq],
  );
}
