// Who the caller is, their teams and their team's API keys (spec "Sign-in, teams and keys").
import type { Db } from '../db/types.ts';
import { BadRequest, NotFound } from '../errors.ts';
import type { Caller } from './auth.ts';
import {
  type ApiKey,
  createKey,
  getTeam,
  listTeamKeys,
  membershipsOf,
  revokeApiKey,
  type Team,
  type TeamWithRole,
} from './store.ts';
import { createOwnedTeam, getUser, type User } from './user-store.ts';

export interface Me {
  team: Team;
  teams: TeamWithRole[];
  user?: User;
}

export async function whoAmI(db: Db, caller: Caller): Promise<Me> {
  const team = await getTeam(db, caller.teamId);
  if (!team) throw new NotFound('team not found');
  if (!caller.userId) return { team, teams: [{ ...team, Role: caller.role }] };
  const [teams, user] = await Promise.all([membershipsOf(db, caller.userId), getUser(db, caller.userId)]);
  return { team, teams, user };
}

/** Sessions only (the route is `user`): the caller's memberships. */
export async function teamsOf(db: Db, caller: Caller): Promise<TeamWithRole[]> {
  return membershipsOf(db, caller.userId as string);
}

export async function newTeam(db: Db, caller: Caller, name: string): Promise<Team> {
  const trimmed = name.trim();
  if (!trimmed) throw new BadRequest('team name must not be blank');
  return db.transaction((tx) => createOwnedTeam(tx, caller.userId as string, trimmed));
}

/** The credential that created a key: the user for sessions, the key itself for API keys. */
export const creatorOf = (caller: Caller): string => caller.userId ?? caller.keyId ?? '';

export async function listKeys(db: Db, teamId: string): Promise<ApiKey[]> {
  return listTeamKeys(db, teamId);
}

export async function mintKey(
  db: Db,
  caller: Caller,
  name: string | undefined,
): Promise<{ key: ApiKey; api_key: string }> {
  const { key, apiKey } = await createKey(db, caller.teamId, name?.trim() || 'key', creatorOf(caller));
  return { key, api_key: apiKey };
}

/** Revokes a key of the team; revoking twice keeps the first time. 404 for other teams' keys. */
export async function revokeKey(db: Db, teamId: string, id: string): Promise<{ revoked: true }> {
  if (!(await revokeApiKey(db, id, teamId))) throw new NotFound(`key ${id} not found`);
  return { revoked: true };
}
