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

export async function getUpload(q: Queryable, teamId: string, id: string): Promise<UploadRow | undefined> {
  const row = await q.get<{ id: string; sha256: string; bytes: number | string }>(
    'SELECT id, sha256, bytes FROM uploads WHERE id = ? AND team_id = ?',
    [id, teamId],
  );
  return row && { id: row.id, sha256: row.sha256, bytes: Number(row.bytes) };
}
