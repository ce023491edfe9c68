// The one check of whether a host can take a command now: it belongs to the team, and it is a
// driver host or a sidecar with an open stream.

import type { Queryable } from '../db/types.ts';
import type { HostConnectivity } from './connectivity.ts';
import type { CommandTarget } from './dispatcher.ts';
import { getHostRow } from './store.ts';

export class HostUnavailable extends Error {}

/**
 * A host's team and kind by id. Both are set when the row is inserted and never change (hosts are
 * never deleted or moved), so they are read once per host, not per command (issue 15: the exec
 * hot path). Connectivity is never cached: it is the hub's live view.
 */
const facts = new Map<string, { teamId: string; kind: string }>();
const FACTS_MAX = 100_000;

async function hostFacts(q: Queryable, hostId: string) {
  const known = facts.get(hostId);
  if (known) return known;
  const row = await getHostRow(q, hostId);
  if (!row) return undefined;
  if (facts.size >= FACTS_MAX) facts.clear();
  const f = { teamId: row.team_id, kind: row.kind };
  facts.set(hostId, f);
  return f;
}

export async function commandTarget(
  q: Queryable,
  hub: HostConnectivity,
  teamId: string,
  hostId: string,
): Promise<CommandTarget> {
  if (!hostId) throw new HostUnavailable('environment has no host');
  const host = await hostFacts(q, hostId);
  if (!host || host.teamId !== teamId) throw new HostUnavailable(`host ${hostId} not found`);
  if (host.kind === 'sidecar' && !hub.isConnected(hostId))
    throw new HostUnavailable(`host ${hostId} is not connected`);
  return { hostId, teamId, kind: host.kind };
}
