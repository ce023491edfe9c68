// The warm pool's rows: one `pools` row per version with a pool, one `pool_members`
// row per fork kept for it. A member row exists from the fork's start until it is claimed (the
// row is deleted in the same statement that hands it out) or destroyed.
import type { Queryable } from '../db/types.ts';

export interface PoolRow {
  version_id: string;
  team_id: string;
  size: number;
  created_at: string;
}

export interface MemberRow {
  env_id: string;
  version_id: string;
  team_id: string;
  /** The fork deployment that made the member; a claim returns it. */
  deployment_id: string;
  ready: number;
  created_at: string;
}

const now = () => new Date().toISOString();

export async function upsertPool(
  q: Queryable,
  teamId: string,
  versionId: string,
  size: number,
): Promise<void> {
  const changed = await q.run('UPDATE pools SET size = ? WHERE version_id = ? AND team_id = ?', [
    size,
    versionId,
    teamId,
  ]);
  if (changed.changes === 0)
    await q.run('INSERT INTO pools (version_id, team_id, size, created_at) VALUES (?, ?, ?, ?)', [
      versionId,
      teamId,
      size,
      now(),
    ]);
}

export async function getPool(q: Queryable, teamId: string, versionId: string): Promise<PoolRow | undefined> {
  const r = await q.get<PoolRow>('SELECT * FROM pools WHERE version_id = ? AND team_id = ?', [
    versionId,
    teamId,
  ]);
  return r && { ...r, size: Number(r.size) };
}

export async function listPools(q: Queryable): Promise<PoolRow[]> {
  return (await q.all<PoolRow>('SELECT * FROM pools ORDER BY created_at')).map((r) => ({
    ...r,
    size: Number(r.size),
  }));
}

export async function deletePool(q: Queryable, versionId: string): Promise<void> {
  await q.run('DELETE FROM pools WHERE version_id = ?', [versionId]);
}

export async function insertMember(
  q: Queryable,
  m: { envId: string; versionId: string; teamId: string; deploymentId: string },
) {
  await q.run(
    'INSERT INTO pool_members (env_id, version_id, team_id, deployment_id, ready, created_at) VALUES (?, ?, ?, ?, 0, ?)',
    [m.envId, m.versionId, m.teamId, m.deploymentId, now()],
  );
}

export async function listMembers(q: Queryable, versionId: string): Promise<MemberRow[]> {
  return (
    await q.all<MemberRow>('SELECT * FROM pool_members WHERE version_id = ? ORDER BY created_at, env_id', [
      versionId,
    ])
  ).map((r) => ({ ...r, ready: Number(r.ready) }));
}

export async function markReady(q: Queryable, envId: string): Promise<void> {
  await q.run('UPDATE pool_members SET ready = 1 WHERE env_id = ?', [envId]);
}

export async function deleteMember(q: Queryable, envId: string): Promise<boolean> {
  return (await q.run('DELETE FROM pool_members WHERE env_id = ?', [envId])).changes > 0;
}

/**
 * Takes the oldest ready member of the version: the delete is the claim, so two claimers can
 * never get the same member (the loser of a race deletes nothing and tries the next one).
 */
export async function claimMember(
  q: Queryable,
  teamId: string,
  versionId: string,
): Promise<MemberRow | null> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const next = await q.get<MemberRow>(
      'SELECT * FROM pool_members WHERE version_id = ? AND team_id = ? AND ready = 1 ORDER BY created_at, env_id LIMIT 1',
      [versionId, teamId],
    );
    if (!next) return null;
    if (await deleteMember(q, next.env_id)) return next;
  }
  return null;
}
