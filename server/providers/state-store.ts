// Per-environment provider state of driver hosts (spec "Driver behaviour": sandbox id, snapshot
// id). The provider's references are plain columns; anything secret the provider handed out (an
// in-sandbox access token) is sealed with the cloud tokens' key.
import type { SecretBox } from '../clouds/secret-box.ts';
import { now, type Queryable } from '../db/types.ts';

export interface ProviderState {
  envId: string;
  hostId: string;
  teamId: string;
  provider: string;
  /** The provider's id of the sandbox. */
  ref: string;
  /** Name of the last snapshot taken. */
  snapshot: string;
  /** Provider details (addresses, access tokens): stored sealed. */
  data: Record<string, string>;
}

interface Row {
  env_id: string;
  host_id: string;
  team_id: string;
  provider: string;
  ref: string;
  snapshot: string;
  sealed: string;
}

export async function getState(
  q: Queryable,
  box: SecretBox,
  envId: string,
): Promise<ProviderState | undefined> {
  const r = await q.get<Row>('SELECT * FROM provider_state WHERE env_id = ?', [envId]);
  if (!r) return undefined;
  return {
    envId: r.env_id,
    hostId: r.host_id,
    teamId: r.team_id,
    provider: r.provider,
    ref: r.ref,
    snapshot: r.snapshot,
    data: r.sealed ? (JSON.parse(box.open(r.sealed)) as Record<string, string>) : {},
  };
}

export async function putState(q: Queryable, box: SecretBox, s: ProviderState): Promise<void> {
  const sealed = box.seal(JSON.stringify(s.data));
  await q.run(
    `INSERT INTO provider_state (env_id, host_id, team_id, provider, ref, snapshot, sealed, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (env_id) DO UPDATE SET host_id = excluded.host_id, ref = excluded.ref,
       snapshot = excluded.snapshot, sealed = excluded.sealed, updated_at = excluded.updated_at`,
    [s.envId, s.hostId, s.teamId, s.provider, s.ref, s.snapshot, sealed, now()],
  );
}

export async function dropState(q: Queryable, envId: string): Promise<void> {
  await q.run('DELETE FROM provider_state WHERE env_id = ?', [envId]);
}
