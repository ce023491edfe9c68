// The uploads context's rows: one per uploaded project context, owned by a team.
import { now, type Queryable } from '../db/types.ts';

export interface UploadRow {
  id: string;
  sha256: string;
  bytes: number;
}

export async function insertUpload(q: Queryable, id: string, teamId: string, sha256: string, bytes: number) {
  await q.run('INSERT INTO uploads (id, team_id, sha256, bytes, created_at) VALUES (?, ?, ?, ?, ?)', [
    id,
    teamId,
    sha256,
    bytes,
    now(),
  ]);
}

/** The team's upload, marked used now (a deploy names it), or undefined. */
export async function useUpload(q: Queryable, teamId: string, id: string): Promise<UploadRow | undefined> {
  const { changes } = await q.run('UPDATE uploads SET used_at = ? WHERE id = ? AND team_id = ?', [
    now(),
    id,
    teamId,
  ]);
  return changes > 0 ? getUpload(q, teamId, id) : undefined;
}

/** The team's upload of these bytes, marked used now; undefined when there is none (or it just went). */
export async function reuseUpload(q: Queryable, teamId: string, sha256: string): Promise<string | undefined> {
  const row = await q.get<{ id: string }>(
    'SELECT id FROM uploads WHERE team_id = ? AND sha256 = ? ORDER BY created_at DESC LIMIT 1',
    [teamId, sha256],
  );
  if (!row) return undefined;
  const { changes } = await q.run('UPDATE uploads SET used_at = ? WHERE id = ?', [now(), row.id]);
  return changes > 0 ? row.id : undefined;
}

/** What a team keeps: uploads, their bytes, and the largest (the same bytes again cost nothing). */
export interface TeamUploads {
  count: number;
  bytes: number;
  largest: number;
}

export async function teamUploads(q: Queryable, teamId: string): Promise<TeamUploads> {
  const row = await q.get<{ n: number | string; bytes: number | string; largest: number | string }>(
    'SELECT COUNT(*) AS n, COALESCE(SUM(bytes), 0) AS bytes, COALESCE(MAX(bytes), 0) AS largest FROM uploads WHERE team_id = ?',
    [teamId],
  );
  return { count: Number(row?.n ?? 0), bytes: Number(row?.bytes ?? 0), largest: Number(row?.largest ?? 0) };
}

/**
 * Holds the team's row until the transaction ends (Postgres: a row lock; SQLite: the write
 * lock), so two uploads of one team are checked against the quota one after the other.
 */
export async function lockTeamUploads(q: Queryable, teamId: string): Promise<void> {
  await q.run('UPDATE teams SET name = name WHERE id = ?', [teamId]);
}

/** Uploads neither created nor named by a deploy since `before`, oldest first. */
export async function staleUploads(q: Queryable, before: string, limit: number): Promise<string[]> {
  const rows = await q.all<{ id: string }>(
    'SELECT id FROM uploads WHERE created_at < ? AND used_at < ? ORDER BY created_at LIMIT ?',
    [before, before, limit],
  );
  return rows.map((r) => r.id);
}

/** Deletes the row if it is still stale (a deploy naming it meanwhile keeps it); true when gone. */
export async function deleteStaleUpload(q: Queryable, id: string, before: string): Promise<boolean> {
  const r = await q.run('DELETE FROM uploads WHERE id = ? AND created_at < ? AND used_at < ?', [
    id,
    before,
    before,
  ]);
  return r.changes > 0;
}

/** Which of `ids` still have a row. */
export async function knownUploads(q: Queryable, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await q.all<{ id: string }>(
    `SELECT id FROM uploads WHERE id IN (${ids.map(() => '?').join(', ')})`,
    ids,
  );
  return new Set(rows.map((r) => r.id));
}

export async function getUpload(q: Queryable, teamId: string, id: string): Promise<UploadRow | undefined> {
  const row = await q.get<{ id: string; sha256: string; bytes: number | string }>(
    'SELECT id, sha256, bytes FROM uploads WHERE id = ? AND team_id = ?',
    [id, teamId],
  );
  return row && { id: row.id, sha256: row.sha256, bytes: Number(row.bytes) };
}
