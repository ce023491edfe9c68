// Teams, memberships, API keys and sessions: rows ↔ the spec's resource records.

import type { Static } from '@sinclair/typebox';
import type {
  ApiKey as ApiKeySchema,
  Team as TeamSchema,
  TeamWithRole as TeamWithRoleSchema,
} from '../../protocol/api/records.ts';
import { newId, newSecret, PREFIX } from '../../protocol/ids.ts';
import { type Db, now, type Queryable } from '../db/types.ts';
import { hashSecret } from './secrets.ts';

export type Team = Static<typeof TeamSchema>;
export type TeamWithRole = Static<typeof TeamWithRoleSchema>;
export type ApiKey = Static<typeof ApiKeySchema>;

interface KeyRow {
  id: string;
  team_id: string;
  name: string;
  created_by: string;
  key_hash: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

export const teamOf = (r: { id: string; name: string; created_at: string }): Team => ({
  ID: r.id,
  Name: r.name,
  CreatedAt: r.created_at,
});

export const keyOf = (r: KeyRow): ApiKey => ({
  ID: r.id,
  TeamID: r.team_id,
  Name: r.name,
  CreatedBy: r.created_by,
  CreatedAt: r.created_at,
  LastUsedAt: r.last_used_at,
  RevokedAt: r.revoked_at,
});

export async function createTeam(q: Queryable, name: string): Promise<Team> {
  const team = { id: newId(PREFIX.team), name, created_at: now() };
  await q.run('INSERT INTO teams (id, name, created_at) VALUES (?, ?, ?)', [
    team.id,
    team.name,
    team.created_at,
  ]);
  return teamOf(team);
}

export async function getTeam(q: Queryable, id: string): Promise<Team | undefined> {
  const r = await q.get<{ id: string; name: string; created_at: string }>(
    'SELECT * FROM teams WHERE id = ?',
    [id],
  );
  return r && teamOf(r);
}

/** The oldest team (the dev server joins its local host to it). */
export async function firstTeam(q: Queryable): Promise<Team | undefined> {
  const r = await q.get<{ id: string; name: string; created_at: string }>(
    'SELECT * FROM teams ORDER BY created_at, id LIMIT 1',
  );
  return r && teamOf(r);
}

export async function countTeams(q: Queryable): Promise<number> {
  const r = await q.get<{ n: number | string }>('SELECT COUNT(*) AS n FROM teams');
  return Number(r?.n ?? 0);
}

/** Inserts a key for `teamId`; `material` is the bearer text (generated when omitted). */
export async function createKey(
  q: Queryable,
  teamId: string,
  name: string,
  createdBy: string,
  material: string = newSecret(PREFIX.apiKey),
): Promise<{ key: ApiKey; apiKey: string }> {
  const row: KeyRow = {
    id: newId(PREFIX.key),
    team_id: teamId,
    name,
    created_by: createdBy,
    key_hash: hashSecret(material),
    created_at: now(),
    last_used_at: null,
    revoked_at: null,
  };
  await q.run(
    'INSERT INTO api_keys (id, team_id, name, created_by, key_hash, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    [row.id, row.team_id, row.name, row.created_by, row.key_hash, row.created_at],
  );
  return { key: keyOf(row), apiKey: material };
}

export async function findKeyByHash(q: Queryable, hash: string): Promise<KeyRow | undefined> {
  return q.get<KeyRow>('SELECT * FROM api_keys WHERE key_hash = ?', [hash]);
}

/** The team's keys, oldest first. */
export async function listTeamKeys(q: Queryable, teamId: string): Promise<ApiKey[]> {
  const rows = await q.all<KeyRow>('SELECT * FROM api_keys WHERE team_id = ? ORDER BY created_at, id', [
    teamId,
  ]);
  return rows.map(keyOf);
}

/**
 * Revokes a key; revoking twice keeps the first time. With `teamId`, only a key of that team.
 * False when no such key exists.
 */
export async function revokeApiKey(q: Queryable, id: string, teamId?: string): Promise<boolean> {
  const at = now();
  const r =
    teamId === undefined
      ? await q.run('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?', [at, id])
      : await q.run('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? AND team_id = ?', [
          at,
          id,
          teamId,
        ]);
  return r.changes > 0;
}

export async function touchKey(q: Queryable, id: string, at: string): Promise<void> {
  await q.run('UPDATE api_keys SET last_used_at = ? WHERE id = ?', [at, id]);
}

export interface SessionRow {
  token_hash: string;
  user_id: string;
  created_at: string;
  expires_at: string;
}

export async function findSession(q: Queryable, hash: string): Promise<SessionRow | undefined> {
  return q.get<SessionRow>('SELECT * FROM sessions WHERE token_hash = ?', [hash]);
}

export async function membershipsOf(q: Queryable, userId: string): Promise<TeamWithRole[]> {
  const rows = await q.all<{ id: string; name: string; created_at: string; role: string }>(
    `SELECT t.id, t.name, t.created_at, m.role FROM memberships m JOIN teams t ON t.id = m.team_id
     WHERE m.user_id = ? ORDER BY m.created_at, t.id`,
    [userId],
  );
  return rows.map((r) => ({ ...teamOf(r), Role: r.role }));
}

/** First team and key on an empty database (spec "Process rules" 3). Returns the key when created. */
export async function bootstrap(
  db: Db,
  teamName: string,
  configuredKey: string,
): Promise<{ team: Team; apiKey: string; generated: boolean } | null> {
  return db.transaction(async (tx) => {
    // Replicas starting together: one creates the first team, the others then find it.
    if (db.dialect.setupLockSql) await tx.run(db.dialect.setupLockSql);
    if ((await countTeams(tx)) > 0) return null;
    const team = await createTeam(tx, teamName);
    const { apiKey } = await createKey(tx, team.ID, 'bootstrap', 'bootstrap', configuredKey || undefined);
    return { team, apiKey, generated: !configuredKey };
  });
}
