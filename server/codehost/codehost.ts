// The code-hosting integration: console sign-in (OAuth app) and push-to-deploy (installed app).
// Each part is on only when its credentials are configured: sign-in, the webhook and
// deploy-from-source answer 503 while theirs are unset, and `/v1/codehost/*` report
// `configured: false`. Installations are rows the app reports through webhooks; a team links one
// before pushes deploy, through a user whom the code host lets see it.
import type { Config } from '../config/config.ts';
import type { Queryable } from '../db/types.ts';
import { BadRequest, Conflict, Forbidden, NotConfigured, NotFound } from '../errors.ts';
import type { Caller } from '../identity/auth.ts';
import type { GitHub, RepoInfo } from './github.ts';
import { claimInstallation, getInstallation, type Installation, listInstallations } from './store.ts';
import { SIGN_IN_FIRST, type UserTokens } from './user-token.ts';

export type { Installation } from './store.ts';

export const SIGN_IN_OFF =
  'code-hosting sign-in is not configured: set SVC_CODEHOST_CLIENT_ID and SVC_CODEHOST_CLIENT_SECRET';
export const APP_OFF =
  'the code-hosting app is not configured: set SVC_CODEHOST_APP_ID and SVC_CODEHOST_APP_PRIVATE_KEY';
export const WEBHOOK_OFF =
  'webhooks are refused: the code-hosting app is configured but SVC_CODEHOST_WEBHOOK_SECRET is not set';

export const signInConfigured = (c: Config): boolean =>
  Boolean(c.codehost.clientId && c.codehost.clientSecret);
export const appConfigured = (c: Config): boolean => Boolean(c.codehost.appId && c.codehost.appPrivateKey);

export function requireSignIn(c: Config): void {
  if (!signInConfigured(c)) throw new NotConfigured(SIGN_IN_OFF);
}
export function requireApp(c: Config): void {
  if (!appConfigured(c)) throw new NotConfigured(APP_OFF);
}

/** The console origin: SVC_CONSOLE_URL, else the control plane's own public URL (it serves /app/). */
export const consoleUrl = (c: Config): string => (c.consoleUrl || c.publicUrl).replace(/\/+$/, '');

/** `GET /v1/codehost/installations`: the team's installations while the app is on, else none. */
export async function installationsView(
  q: Queryable,
  config: Config,
  teamId: string,
): Promise<{ installations: Installation[]; configured: boolean }> {
  if (!appConfigured(config)) return { installations: [], configured: false };
  return { installations: await listInstallations(q, teamId), configured: true };
}

/**
 * Binds an installation to the caller's team. Only a user signed in with the code host can link
 * (403 for an API key or a session without a code-host sign-in), and only an installation the
 * code host lists among those that user can see. An installation the user cannot see answers as
 * one never reported (the same 404, asked in the same order), so ids cannot be probed; one linked
 * to another team is 409.
 */
export async function linkInstallation(
  q: Queryable,
  config: Config,
  tokens: UserTokens,
  caller: Caller,
  id: number,
): Promise<{ installation: Installation }> {
  // While the app is off it reports nothing, so every installation is unseen.
  if (!appConfigured(config)) throw new NotFound(`installation ${id} has not been reported: ${APP_OFF}`);
  if (!caller.userId) throw new Forbidden(SIGN_IN_FIRST);
  requireSignIn(config);
  const visible = await tokens.canSee(caller.userId, id);
  const inst = await getInstallation(q, id);
  if (!visible || !inst)
    throw new NotFound(
      `installation ${id} is not an installation of the app that you can see on the code host`,
    );
  if (!(await claimInstallation(q, id, caller.teamId)))
    throw new Conflict(`installation ${id} is already linked to another team`);
  return { installation: { ...inst, TeamID: caller.teamId } };
}

/** An installation of the caller's team, or 404 (another team's is not theirs to see). */
export async function teamInstallation(q: Queryable, teamId: string, id: number): Promise<Installation> {
  const inst = await getInstallation(q, id);
  if (!inst || inst.TeamID !== teamId) throw new NotFound(`installation ${id} is not linked to this team`);
  return inst;
}

/** `GET /v1/codehost/repos?installation=`: what a linked installation can see. */
export async function reposView(
  q: Queryable,
  config: Config,
  github: GitHub,
  teamId: string,
  installation: number | undefined,
): Promise<{ repos: RepoInfo[]; configured: boolean }> {
  if (!appConfigured(config)) return { repos: [], configured: false };
  if (installation === undefined)
    throw new BadRequest('installation is required: GET /v1/codehost/repos?installation=<id>');
  await teamInstallation(q, teamId, installation);
  return { repos: await github.repositories(installation), configured: true };
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
