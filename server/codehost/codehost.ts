// The code-hosting integration: console sign-in (OAuth app) and push-to-deploy (installed app).
// Each part is on only when its credentials are configured; otherwise its routes answer 503 and
// `/v1/codehost/*` report `configured: false`. Installations are rows the app reports through
// webhooks; a team links one before pushes deploy.
import type { Config } from '../config/config.ts';
import type { Queryable } from '../db/types.ts';
import { BadRequest, Conflict, NotConfigured, NotFound } from '../errors.ts';

export const SIGN_IN_OFF =
  'code-hosting sign-in is not configured: set SVC_CODEHOST_CLIENT_ID and SVC_CODEHOST_CLIENT_SECRET';
export const APP_OFF =
  'the code-hosting app is not configured: set SVC_CODEHOST_APP_ID and SVC_CODEHOST_APP_PRIVATE_KEY';
/** Configured, but this build has no client for the provider's API yet. */
export const APP_UNAVAILABLE =
  'the code-hosting app is configured but push-to-deploy is not available in this build';
export const SIGN_IN_UNAVAILABLE = 'code-hosting sign-in is configured but not available in this build';

export const signInConfigured = (c: Config): boolean =>
  Boolean(c.codehost.clientId && c.codehost.clientSecret);
export const appConfigured = (c: Config): boolean => Boolean(c.codehost.appId && c.codehost.appPrivateKey);

export function requireSignIn(c: Config): void {
  if (!signInConfigured(c)) throw new NotConfigured(SIGN_IN_OFF);
}
export function requireApp(c: Config): void {
  if (!appConfigured(c)) throw new NotConfigured(APP_OFF);
}

export interface Installation {
  InstallationID: number;
  TeamID: string;
  AccountLogin: string;
  CreatedAt: string;
}

interface Row {
  installation_id: number | string;
  team_id: string;
  account_login: string;
  created_at: string;
}

const installationOf = (r: Row): Installation => ({
  InstallationID: Number(r.installation_id),
  TeamID: r.team_id,
  AccountLogin: r.account_login,
  CreatedAt: r.created_at,
});

export async function getInstallation(q: Queryable, id: number): Promise<Installation | undefined> {
  const r = await q.get<Row>('SELECT * FROM installations WHERE installation_id = ?', [id]);
  return r && installationOf(r);
}

export async function listInstallations(q: Queryable, teamId: string): Promise<Installation[]> {
  const rows = await q.all<Row>('SELECT * FROM installations WHERE team_id = ? ORDER BY created_at', [
    teamId,
  ]);
  return rows.map(installationOf);
}

/** `GET /v1/codehost/installations`: the team's installations while the app is on, else none. */
export async function installationsView(
  q: Queryable,
  config: Config,
  teamId: string,
): Promise<{ installations: Installation[]; configured: boolean }> {
  if (!appConfigured(config)) return { installations: [], configured: false };
  return { installations: await listInstallations(q, teamId), configured: true };
}

/** `GET /v1/codehost/repos`: while the app is off, no installation can see a repository. */
export function reposView(config: Config): { repos: []; configured: false } {
  if (!appConfigured(config)) return { repos: [], configured: false };
  throw new NotConfigured(APP_UNAVAILABLE);
}

/** Binds an installation the app has reported to `teamId`: 404 unseen, 409 linked elsewhere. */
export async function linkInstallation(
  q: Queryable,
  config: Config,
  teamId: string,
  id: number,
): Promise<{ installation: Installation }> {
  // While the app is off it reports nothing, so every installation is unseen (404, not 503).
  if (!appConfigured(config)) throw new NotFound(`installation ${id} has not been reported: ${APP_OFF}`);
  const inst = await getInstallation(q, id);
  if (!inst) throw new NotFound(`installation ${id} has not been reported by the code-hosting app`);
  const r = await q.run(
    "UPDATE installations SET team_id = ? WHERE installation_id = ? AND (team_id = '' OR team_id = ?)",
    [teamId, id, teamId],
  );
  if (r.changes === 0) throw new Conflict(`installation ${id} is already linked to another team`);
  return { installation: { ...inst, TeamID: teamId } };
}

/**
 * A project source may name only an installation linked to the caller's team: 400 when it is
 * unknown or unlinked (link it first), 409 when another team holds it.
 */
export async function requireLinkedInstallation(q: Queryable, teamId: string, id: number): Promise<void> {
  const inst = await getInstallation(q, id);
  if (inst?.TeamID === teamId) return;
  if (inst?.TeamID) throw new Conflict(`installation ${id} is linked to another team`);
  throw new BadRequest(
    `installation ${id} is not linked to this team: link it with POST /v1/codehost/installations/${id}/link`,
  );
}
