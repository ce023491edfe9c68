// The one check of whether a host can take a command now: it belongs to the team, and it is a
// driver host or a sidecar with an open stream.
import type { HostConnectivity } from '../context.ts';
import type { Queryable } from '../db/types.ts';
import type { CommandTarget } from './dispatcher.ts';
import { getHostRow } from './store.ts';

export class HostUnavailable extends Error {}

export async function commandTarget(
  q: Queryable,
  hub: HostConnectivity,
  teamId: string,
  hostId: string,
): Promise<CommandTarget> {
  if (!hostId) throw new HostUnavailable('environment has no host');
  const row = await getHostRow(q, hostId);
  if (!row || row.team_id !== teamId) throw new HostUnavailable(`host ${hostId} not found`);
  if (row.kind === 'sidecar' && !hub.isConnected(hostId))
    throw new HostUnavailable(`host ${hostId} is not connected`);
  return { hostId, teamId, kind: row.kind };
}
