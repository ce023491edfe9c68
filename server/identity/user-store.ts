// Users, memberships and sessions. A user signs in (dev login today, the code-hosting OAuth
// callback later) and receives a `dst_` session; a first-time user gets a personal team.
import { newId, newSecret, PREFIX } from '../../protocol/ids.ts';
import { type Db, now, type Queryable } from '../db/types.ts';
import { hashSecret } from './secrets.ts';
import { createTeam, type Team } from './store.ts';

export const SESSION_DAYS = 30;
export const OWNER = 'owner';

/** The user object of `GET /v1/me` (the spec leaves its fields open). */
export interface User {
  ID: string;
  Email: string;
  Login: string;
  Name: string;
  CreatedAt: string;
}

interface UserRow {
  id: string;
  email: string;
  login: string;
  name: string;
  codehost_id: string | null;
  created_at: string;
}

const userOf = (r: UserRow): User => ({
  ID: r.id,
  Email: r.email,
  Login: r.login,
  Name: r.name,
  CreatedAt: r.created_at,
});

export async function getUser(q: Queryable, id: string): Promise<User | undefined> {
  const r = await q.get<UserRow>('SELECT * FROM users WHERE id = ?', [id]);
  return r && userOf(r);
}

export async function addMembership(
  q: Queryable,
  teamId: string,
  userId: string,
  role: string,
): Promise<void> {
  await q.run('INSERT INTO memberships (team_id, user_id, role, created_at) VALUES (?, ?, ?, ?)', [
    teamId,
    userId,
    role,
    now(),
  ]);
}

/** Creates a team with `userId` as its owner. */
export async function createOwnedTeam(q: Queryable, userId: string, name: string): Promise<Team> {
  const team = await createTeam(q, name);
  await addMembership(q, team.ID, userId, OWNER);
  return team;
}

export async function isMember(q: Queryable, teamId: string, userId: string): Promise<boolean> {
  const r = await q.get('SELECT 1 AS one FROM memberships WHERE team_id = ? AND user_id = ?', [
    teamId,
    userId,
  ]);
  return r !== undefined;
}

/** Mints a session for `userId`; only its hash is stored. Returns the bearer text. */
export async function mintSession(q: Queryable, userId: string): Promise<string> {
  const token = newSecret(PREFIX.session);
  const created = new Date();
  const expires = new Date(created.getTime() + SESSION_DAYS * 24 * 3600 * 1000);
  await q.run('INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)', [
    hashSecret(token),
    userId,
    created.toISOString(),
    expires.toISOString(),
  ]);
  return token;
}

export interface SignIn {
  email: string;
  /** Display name; the login is used when empty. */
  name?: string;
  /** The code-hosting login; the e-mail's local part when absent. */
  login?: string;
}

/**
 * Finds the user by e-mail or creates them, with a personal team named after them and the owner
 * role on it, then mints a session. One transaction: a half-created user never exists.
 */
export async function signIn(db: Db, who: SignIn): Promise<{ user: User; token: string; created: boolean }> {
  const email = who.email.trim().toLowerCase();
  return db.transaction(async (tx) => {
    const existing = await tx.get<UserRow>('SELECT * FROM users WHERE email = ?', [email]);
    if (existing)
      return { user: userOf(existing), token: await mintSession(tx, existing.id), created: false };
    const login = who.login?.trim() || email.split('@')[0];
    const row: UserRow = {
      id: newId(PREFIX.user),
      email,
      login,
      name: who.name?.trim() || login,
      codehost_id: null,
      created_at: now(),
    };
    await tx.run('INSERT INTO users (id, email, login, name, created_at) VALUES (?, ?, ?, ?, ?)', [
      row.id,
      row.email,
      row.login,
      row.name,
      row.created_at,
    ]);
    await createOwnedTeam(tx, row.id, row.name);
    return { user: userOf(row), token: await mintSession(tx, row.id), created: true };
  });
}

/** Who the code host says signed in (spec "GET /auth/codehost/callback"). */
export interface CodehostSignIn {
  /** The code host's numeric user id, as text. */
  codehostId: string;
  login: string;
  name: string;
  email: string;
}

/**
 * Finds the user by code-host id, else by e-mail (and remembers the id), and refreshes login and
 * name; a first-time user is created with a personal team named after their login. Then mints a
 * session. One transaction.
 */
export async function signInWithCodehost(
  db: Db,
  who: CodehostSignIn,
): Promise<{ user: User; token: string; created: boolean }> {
  const email = who.email.trim().toLowerCase();
  const name = who.name.trim() || who.login;
  return db.transaction(async (tx) => {
    const found =
      (await tx.get<UserRow>('SELECT * FROM users WHERE codehost_id = ?', [who.codehostId])) ??
      (await tx.get<UserRow>('SELECT * FROM users WHERE email = ?', [email]));
    if (found) {
      await tx.run('UPDATE users SET codehost_id = ?, login = ?, name = ? WHERE id = ?', [
        who.codehostId,
        who.login,
        name,
        found.id,
      ]);
      const user = userOf({ ...found, login: who.login, name });
      return { user, token: await mintSession(tx, found.id), created: false };
    }
    const row: UserRow = {
      id: newId(PREFIX.user),
      email,
      login: who.login,
      name,
      codehost_id: who.codehostId,
      created_at: now(),
    };
    await tx.run(
      'INSERT INTO users (id, email, login, name, codehost_id, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      [row.id, row.email, row.login, row.name, row.codehost_id, row.created_at],
    );
    await createOwnedTeam(tx, row.id, who.login);
    return { user: userOf(row), token: await mintSession(tx, row.id), created: true };
  });
}
