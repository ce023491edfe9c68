// Environments and their versions: rows ↔ the spec's records. Every read is scoped to a team so
// another team's objects are simply "not found".

import type { Static } from '@sinclair/typebox';
import type {
  Environment as EnvironmentSchema,
  EnvStatus,
  Version as VersionSchema,
} from '../../protocol/api/records.ts';
import { newId, PREFIX } from '../../protocol/ids.ts';
import type { EnvSpec } from '../../protocol/spec.ts';
import { bool, type Db, isTrue, json, now, parseJson, type Queryable, updateColumns } from '../db/types.ts';

/** Environment `Status`: the API's union (protocol/api/records.ts). */
export type { EnvStatus };
export type Stage = 'alpha' | 'fork' | 'verify' | string;

/** An environment as the API answers it (protocol/api/records.ts). */
export type Environment = Static<typeof EnvironmentSchema>;

/** A version as the API answers it, its spec typed (the API shows it as a JSON object). */
export type Version = Omit<Static<typeof VersionSchema>, 'Spec'> & { Spec: EnvSpec };

interface EnvRow {
  id: string;
  project_id: string;
  team_id: string;
  name: string;
  stage: string;
  host_id: string;
  parent_version_id: string;
  current_version_id: string;
  status: string;
  endpoints: string;
  created_at: string;
}

interface VersionRow {
  id: string;
  project_id: string;
  env_id: string;
  number: number | string;
  spec: string;
  snapshot: string;
  healthy: number;
  created_at: string;
}

export const envOf = (r: EnvRow): Environment => ({
  ID: r.id,
  ProjectID: r.project_id,
  Name: r.name,
  Stage: r.stage,
  HostID: r.host_id,
  ParentVersionID: r.parent_version_id,
  CurrentVersionID: r.current_version_id,
  Status: r.status as EnvStatus,
  CreatedAt: r.created_at,
  Endpoints: parseJson(r.endpoints, {}),
});

const versionOf = (r: VersionRow): Version => ({
  ID: r.id,
  ProjectID: r.project_id,
  EnvID: r.env_id,
  Number: Number(r.number),
  Spec: parseJson(r.spec, {} as EnvSpec),
  Snapshot: r.snapshot,
  Healthy: isTrue(r.healthy),
  CreatedAt: r.created_at,
});

/**
 * service → image digest (the image id for images built on the host) of the deploy that made a
 * version. Kept beside the version (the wire record's fields are the spec's), shown in evidence.
 */
export async function versionDigests(q: Queryable, id: string): Promise<Record<string, string>> {
  const row = await q.get<{ digests: string }>('SELECT digests FROM versions WHERE id = ?', [id]);
  return parseJson(row?.digests ?? '{}', {});
}

export async function setVersionDigests(
  q: Queryable,
  id: string,
  digests: Record<string, string>,
): Promise<void> {
  await q.run('UPDATE versions SET digests = ? WHERE id = ?', [json(digests), id]);
}

export interface NewEnv {
  projectId: string;
  teamId: string;
  name: string;
  stage: Stage;
  hostId?: string;
  parentVersionId?: string;
  currentVersionId?: string;
  status?: EnvStatus;
}

export async function insertEnv(q: Queryable, e: NewEnv): Promise<Environment> {
  const row: EnvRow = {
    id: newId(PREFIX.env),
    project_id: e.projectId,
    team_id: e.teamId,
    name: e.name,
    stage: e.stage,
    host_id: e.hostId ?? '',
    parent_version_id: e.parentVersionId ?? '',
    current_version_id: e.currentVersionId ?? '',
    status: e.status ?? 'empty',
    endpoints: '{}',
    created_at: now(),
  };
  await q.run(
    `INSERT INTO environments (id, project_id, team_id, name, stage, host_id, parent_version_id, current_version_id,
      status, endpoints, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      row.id,
      row.project_id,
      row.team_id,
      row.name,
      row.stage,
      row.host_id,
      row.parent_version_id,
      row.current_version_id,
      row.status,
      row.endpoints,
      row.created_at,
    ],
  );
  return envOf(row);
}

const hotKey = (id: string) => `environments/${id}`;

/** Runs a write of environment `id`, forgetting its kept row (where rows are kept) around it. */
const changing = <T>(q: Queryable, id: string, write: () => Promise<T>): Promise<T> =>
  q.rows ? q.rows.changing(hotKey(id), write) : write();

/**
 * `getEnv` for the exec hot path, through the database's kept rows where it keeps them (a
 * `soleWriter` engine, SQLite: every write to this table goes through this file, which forgets
 * the row around it). Never inside a transaction: it takes the Db itself.
 */
export async function getEnvHot(db: Db, teamId: string, id: string): Promise<Environment | undefined> {
  if (!db.rows) return getEnv(db, teamId, id);
  const row = await db.rows.read(hotKey(id), () =>
    db.get<EnvRow>('SELECT * FROM environments WHERE id = ?', [id]),
  );
  return row && row.team_id === teamId ? envOf(row) : undefined;
}

export async function getEnv(q: Queryable, teamId: string, id: string): Promise<Environment | undefined> {
  const r = await q.get<EnvRow>('SELECT * FROM environments WHERE id = ? AND team_id = ?', [id, teamId]);
  return r && envOf(r);
}

/** An environment placed on `hostId`, whatever its team (the host's results name it). */
export async function getEnvOnHost(
  q: Queryable,
  id: string,
  hostId: string,
): Promise<(Environment & { TeamID: string }) | undefined> {
  const r = await q.get<EnvRow>('SELECT * FROM environments WHERE id = ? AND host_id = ?', [id, hostId]);
  return r && { ...envOf(r), TeamID: r.team_id };
}

export async function findEnvByName(
  q: Queryable,
  projectId: string,
  name: string,
): Promise<Environment | undefined> {
  const r = await q.get<EnvRow>('SELECT * FROM environments WHERE project_id = ? AND name = ?', [
    projectId,
    name,
  ]);
  return r && envOf(r);
}

export async function listEnvs(q: Queryable, teamId: string, projectId: string): Promise<Environment[]> {
  // Warm-pool members (server/pool) are not listed until claimed.
  const rows = await q.all<EnvRow>(
    `SELECT * FROM environments WHERE team_id = ? AND project_id = ?
       AND id NOT IN (SELECT env_id FROM pool_members) ORDER BY created_at, id`,
    [teamId, projectId],
  );
  return rows.map(envOf);
}

export interface EnvPatch {
  status?: EnvStatus;
  hostId?: string;
  currentVersionId?: string;
  endpoints?: Record<string, string>;
}

/** Renames an environment (a claimed warm-pool member takes the sandbox's name). */
export async function renameEnv(q: Queryable, id: string, name: string): Promise<void> {
  await changing(q, id, () => q.run('UPDATE environments SET name = ? WHERE id = ?', [name, id]));
}

export async function updateEnv(q: Queryable, id: string, p: EnvPatch): Promise<void> {
  const cols = {
    status: p.status,
    host_id: p.hostId,
    current_version_id: p.currentVersionId,
    endpoints: p.endpoints === undefined ? undefined : json(p.endpoints),
  };
  await changing(q, id, () => updateColumns(q, 'environments', cols, 'id = ?', [id]));
}

/** Counts environments of a project whose name starts with `prefix` (for `<name>-fork-<n>`, `sbx-<n>`). */
export async function countEnvsNamed(q: Queryable, projectId: string, prefix: string): Promise<number> {
  const r = await q.get<{ n: number | string }>(
    'SELECT COUNT(*) AS n FROM environments WHERE project_id = ? AND substr(name, 1, ?) = ?',
    [projectId, prefix.length, prefix],
  );
  return Number(r?.n ?? 0);
}

/**
 * Whether a version of an environment that is not destroyed was deployed with this upload (its
 * spec names it): a destroyed environment's versions cannot run again (their snapshots are gone).
 */
export async function uploadInUse(q: Queryable, uploadId: string): Promise<boolean> {
  const r = await q.get<{ n: number }>(
    `SELECT COUNT(*) AS n FROM versions v JOIN environments e ON e.id = v.env_id
      WHERE e.status <> 'destroyed' AND v.spec LIKE ?`,
    [`%"upload":"${uploadId}"%`],
  );
  return Number(r?.n ?? 0) > 0;
}

export async function insertVersion(
  q: Queryable,
  v: { projectId: string; envId: string; spec: EnvSpec; snapshot?: string; healthy?: boolean },
): Promise<Version> {
  const id = newId(PREFIX.version);
  const last = await q.get<{ n: number | string | null }>(
    'SELECT MAX(number) AS n FROM versions WHERE env_id = ?',
    [v.envId],
  );
  const row: VersionRow = {
    id,
    project_id: v.projectId,
    env_id: v.envId,
    number: Number(last?.n ?? 0) + 1,
    spec: json(v.spec),
    snapshot: v.snapshot ?? '',
    healthy: bool(v.healthy ?? false),
    created_at: now(),
  };
  await q.run(
    'INSERT INTO versions (id, project_id, env_id, number, spec, snapshot, healthy, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    [row.id, row.project_id, row.env_id, row.number, row.spec, row.snapshot, row.healthy, row.created_at],
  );
  return versionOf(row);
}

/** A version of the team (versions carry no team column: join through their environment). */
export async function getVersion(q: Queryable, teamId: string, id: string): Promise<Version | undefined> {
  const r = await q.get<VersionRow>(
    'SELECT v.* FROM versions v JOIN environments e ON e.id = v.env_id WHERE v.id = ? AND e.team_id = ?',
    [id, teamId],
  );
  return r && versionOf(r);
}

export async function listVersions(q: Queryable, envId: string): Promise<Version[]> {
  return (await q.all<VersionRow>('SELECT * FROM versions WHERE env_id = ? ORDER BY number', [envId])).map(
    versionOf,
  );
}

export async function markVersionHealthy(q: Queryable, id: string, snapshot: string): Promise<void> {
  await q.run('UPDATE versions SET healthy = 1, snapshot = ? WHERE id = ?', [snapshot, id]);
}
