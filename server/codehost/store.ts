// The code-hosting context's rows: installations the app reported, webhook deliveries already
// handled (so a redelivery deploys nothing twice), the check run posted for a deployment, each
// user's sealed code-host token, and the commits pushes deployed (so a replay deploys nothing).
import type { Static } from '@sinclair/typebox';
import type { Installation as InstallationSchema } from '../../protocol/api/records.ts';
import { now, type Queryable } from '../db/types.ts';

export type Installation = Static<typeof InstallationSchema>;

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

/** Reported (created, unsuspended, new permissions): kept, or recorded unlinked. */
export async function upsertInstallation(q: Queryable, id: number, accountLogin: string): Promise<void> {
  const r = await q.run('UPDATE installations SET account_login = ? WHERE installation_id = ?', [
    accountLogin,
    id,
  ]);
  if (r.changes === 0)
    await q.run(
      "INSERT INTO installations (installation_id, team_id, account_login, created_at) VALUES (?, '', ?, ?)",
      [id, accountLogin, now()],
    );
}

export async function deleteInstallation(q: Queryable, id: number): Promise<void> {
  await q.run('DELETE FROM installations WHERE installation_id = ?', [id]);
}

/** Links `id` to `teamId` unless another team holds it; false when it does. */
export async function claimInstallation(q: Queryable, id: number, teamId: string): Promise<boolean> {
  const r = await q.run(
    "UPDATE installations SET team_id = ? WHERE installation_id = ? AND (team_id = '' OR team_id = ?)",
    [teamId, id, teamId],
  );
  return r.changes > 0;
}

/** Records a delivery; false when it was recorded before (a redelivery). */
export async function recordDelivery(q: Queryable, id: string, event: string): Promise<boolean> {
  const r = await q.run(
    'INSERT INTO codehost_deliveries (delivery_id, event, answer, received_at) VALUES (?, ?, ?, ?) ON CONFLICT (delivery_id) DO NOTHING',
    [id, event, '', now()],
  );
  return r.changes > 0;
}

export async function saveDeliveryAnswer(q: Queryable, id: string, answer: unknown): Promise<void> {
  await q.run('UPDATE codehost_deliveries SET answer = ? WHERE delivery_id = ?', [
    JSON.stringify(answer),
    id,
  ]);
}

export async function deliveryAnswer(q: Queryable, id: string): Promise<unknown> {
  const r = await q.get<{ answer: string }>('SELECT answer FROM codehost_deliveries WHERE delivery_id = ?', [
    id,
  ]);
  return r?.answer ? JSON.parse(r.answer) : null;
}

export interface CheckRun {
  deploymentId: string;
  installationId: number;
  repo: string;
  checkRunId: number;
}

export async function saveCheckRun(q: Queryable, c: CheckRun): Promise<void> {
  await q.run(
    'INSERT INTO codehost_check_runs (deployment_id, installation_id, repo, check_run_id, conclusion, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    [c.deploymentId, c.installationId, c.repo, c.checkRunId, '', now()],
  );
}

export async function concludeCheckRun(
  q: Queryable,
  deploymentId: string,
  conclusion: string,
): Promise<void> {
  await q.run('UPDATE codehost_check_runs SET conclusion = ? WHERE deployment_id = ?', [
    conclusion,
    deploymentId,
  ]);
}

/** A user's code-host token document, sealed; '' when none was kept. */
export async function sealedUserToken(q: Queryable, userId: string): Promise<string> {
  const r = await q.get<{ sealed: string }>('SELECT sealed FROM codehost_user_tokens WHERE user_id = ?', [
    userId,
  ]);
  return r?.sealed ?? '';
}

export async function saveSealedUserToken(q: Queryable, userId: string, sealed: string): Promise<void> {
  await q.run(
    'INSERT INTO codehost_user_tokens (user_id, sealed, updated_at) VALUES (?, ?, ?) ON CONFLICT (user_id) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at',
    [userId, sealed, now()],
  );
}

export async function forgetUserToken(q: Queryable, userId: string): Promise<void> {
  await q.run('DELETE FROM codehost_user_tokens WHERE user_id = ?', [userId]);
}

/** Records that a push deploys `sha` to the project's branch; false when one already did. */
export async function claimPushedCommit(
  q: Queryable,
  projectId: string,
  branch: string,
  sha: string,
): Promise<boolean> {
  const r = await q.run(
    'INSERT INTO codehost_pushed_commits (project_id, branch, sha, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (project_id, branch, sha) DO NOTHING',
    [projectId, branch, sha, now()],
  );
  return r.changes > 0;
}

/** A claimed commit whose deploy never started: a later delivery of it may try again. */
export async function releasePushedCommit(
  q: Queryable,
  projectId: string,
  branch: string,
  sha: string,
): Promise<void> {
  await q.run('DELETE FROM codehost_pushed_commits WHERE project_id = ? AND branch = ? AND sha = ?', [
    projectId,
    branch,
    sha,
  ]);
}

// Console sign-ins waiting for the code host's redirect (oauth.ts): the state as a sha256 hash.

export async function insertOAuthState(q: Queryable, stateHash: string, returnTo: string, expiresAt: string) {
  await q.run('INSERT INTO oauth_states (state_hash, return_to, expires_at) VALUES (?, ?, ?)', [
    stateHash,
    returnTo,
    expiresAt,
  ]);
}

export async function oauthState(
  q: Queryable,
  stateHash: string,
): Promise<{ state_hash: string; return_to: string; expires_at: string } | undefined> {
  return q.get('SELECT state_hash, return_to, expires_at FROM oauth_states WHERE state_hash = ?', [
    stateHash,
  ]);
}

/** True for the one caller that deleted it. */
export async function deleteOAuthState(q: Queryable, stateHash: string): Promise<boolean> {
  return (await q.run('DELETE FROM oauth_states WHERE state_hash = ?', [stateHash])).changes > 0;
}

/** Tests: every waiting state past its time. */
export async function expireOAuthStates(q: Queryable): Promise<void> {
  await q.run('UPDATE oauth_states SET expires_at = ?', [new Date(0).toISOString()]);
}
