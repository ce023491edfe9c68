// Join token rows (spec "Join token rules"): stored only as the token's hash.
import type { Queryable } from '../db/types.ts';

export interface JoinTokenRow {
  team_id: string;
  cloud_id: string;
  used_at: string | null;
  host_id: string;
}

export async function insertJoinToken(
  q: Queryable,
  t: { hash: string; teamId: string; cloudId: string; createdAt: string; expiresAt: string },
): Promise<void> {
  await q.run(
    'INSERT INTO join_tokens (token_hash, team_id, cloud_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?)',
    [t.hash, t.teamId, t.cloudId, t.createdAt, t.expiresAt],
  );
}

/** Marks an unused, unexpired token used at `at` by `hostId`, atomically; false when it was not. */
export async function claimJoinToken(
  q: Queryable,
  hash: string,
  at: string,
  hostId: string,
): Promise<boolean> {
  const r = await q.run(
    'UPDATE join_tokens SET used_at = ?, host_id = ? WHERE token_hash = ? AND used_at IS NULL AND expires_at > ?',
    [at, hostId, hash, at],
  );
  return r.changes > 0;
}

export async function getJoinToken(q: Queryable, hash: string): Promise<JoinTokenRow | undefined> {
  return q.get<JoinTokenRow>(
    'SELECT team_id, cloud_id, used_at, host_id FROM join_tokens WHERE token_hash = ?',
    [hash],
  );
}

export async function setJoinTokenHost(q: Queryable, hash: string, hostId: string): Promise<void> {
  await q.run('UPDATE join_tokens SET host_id = ? WHERE token_hash = ?', [hostId, hash]);
}

/** Gives a claimed token back (its host was never recorded): unused again. */
export async function unclaimJoinToken(q: Queryable, hash: string): Promise<void> {
  await q.run("UPDATE join_tokens SET used_at = NULL, host_id = '' WHERE token_hash = ? AND host_id = ''", [
    hash,
  ]);
}
