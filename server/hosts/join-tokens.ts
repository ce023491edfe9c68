// Join tokens (spec "Join token rules"): a `djt_` token lets one new sidecar join the team,
// optionally through a cloud. Valid one hour, single use, stored only as a hash.
import { newSecret, PREFIX } from '../../protocol/ids.ts';
import { isSandboxProvider } from '../clouds/providers.ts';
import { getCloud } from '../clouds/store.ts';
import type { Db, Queryable } from '../db/types.ts';
import { BadRequest, NotFound } from '../errors.ts';
import { hashSecret } from '../identity/secrets.ts';
import {
  claimJoinToken,
  getJoinToken,
  insertJoinToken,
  setJoinTokenHost,
  unclaimJoinToken,
} from './join-token-store.ts';

export const JOIN_TOKEN_TTL_SEC = 3600;

export const JOIN_USED = 'join: join token already used';
export const JOIN_EXPIRED = 'join: join token expired';
export const JOIN_UNKNOWN = 'join: unknown join token';

/** Records a new token for the team (and cloud, for provisioned machines); returns its text. */
export async function mintJoinToken(
  q: Queryable,
  teamId: string,
  cloudId = '',
): Promise<{ token: string; expiresAt: string }> {
  const token = newSecret(PREFIX.joinToken);
  const created = Date.now();
  const expiresAt = new Date(created + JOIN_TOKEN_TTL_SEC * 1000).toISOString();
  await insertJoinToken(q, {
    hash: hashSecret(token),
    teamId,
    cloudId,
    createdAt: new Date(created).toISOString(),
    expiresAt,
  });
  return { token, expiresAt };
}

/**
 * The ready-to-paste install line: the control plane's install script, which downloads the
 * sidecar for this machine's arch from the control plane's own /svcd-linux-<arch> and installs it.
 */
export function installCommand(publicUrl: string, token: string): string {
  return `curl -fsSL ${publicUrl}/install.sh | sudo sh -s -- --server ${publicUrl} --token ${token}`;
}

/** POST /v1/join-tokens: `cloudId`, when given, must be a manual or cloudvm cloud of the team. */
export async function createJoinToken(
  db: Db,
  publicUrl: string,
  teamId: string,
  cloudId: string | undefined,
): Promise<{ token: string; expires_in_sec: number; command: string }> {
  if (cloudId) {
    const cloud = await getCloud(db, teamId, cloudId);
    if (!cloud) throw new NotFound(`cloud ${cloudId} not found`);
    if (isSandboxProvider(cloud.Provider)) {
      throw new BadRequest(
        `cloud ${cloud.Name} is a ${cloud.Provider} cloud: its driver host needs no join; sidecars join manual or cloudvm clouds`,
      );
    }
  }
  const { token } = await mintJoinToken(db, teamId, cloudId ?? '');
  return { token, expires_in_sec: JOIN_TOKEN_TTL_SEC, command: installCommand(publicUrl, token) };
}

/**
 * Marks the token used, atomically, and says which team and cloud the new host joins; `hostId`
 * is recorded on the token. A refusal is one of the spec's messages (JOIN_USED, JOIN_EXPIRED) or
 * JOIN_UNKNOWN, returned as a string for the hub to send with its 1008 close.
 */
export async function consumeJoinToken(
  q: Queryable,
  token: string,
  hostId = '',
): Promise<{ teamId: string; cloudId: string } | string> {
  if (!token.startsWith(PREFIX.joinToken)) return JOIN_UNKNOWN;
  const hash = hashSecret(token);
  const at = new Date().toISOString();
  const claimed = await claimJoinToken(q, hash, at, hostId);
  const row = await getJoinToken(q, hash);
  if (!row) return JOIN_UNKNOWN;
  if (!claimed) return row.used_at ? JOIN_USED : JOIN_EXPIRED;
  return { teamId: row.team_id, cloudId: row.cloud_id };
}

/** Undoes a consume whose host could not be recorded, so the token is not lost to a fault. */
export async function releaseJoinToken(q: Queryable, token: string): Promise<void> {
  await unclaimJoinToken(q, hashSecret(token));
}

/** Lets the hub record the host id once it has assigned one (when it consumed without it). */
export async function recordJoinedHost(q: Queryable, token: string, hostId: string): Promise<void> {
  await setJoinTokenHost(q, hashSecret(token), hostId);
}
