// The one check of whether a host can take a command now: it belongs to the team, and it is a
// driver host or a sidecar with an open stream.
import { Facts } from '../../shared/facts.ts';
import type { Queryable } from '../db/types.ts';
import type { HostConnectivity } from './connectivity.ts';
import type { CommandTarget } from './dispatcher.ts';
import { getHostRow } from './store.ts';

export class HostUnavailable extends Error {}

const FACTS_MAX = 100_000;

/** Where commands may go now; one per application context (its kept facts are its own). */
export class CommandTargets {
  /**
   * A host's team and kind by id. Both are set when the row is inserted and never change (hosts
   * are never deleted or moved), so they are read once per host, not per command (the exec hot
   * path), and are right on every replica. Connectivity is never kept: it is the hub's live view.
   */
  readonly #facts = new Facts<{ teamId: string; kind: string }>(FACTS_MAX);

  readonly #q: Queryable;
  readonly #hub: Pick<HostConnectivity, 'isConnected'>;

  constructor(q: Queryable, hub: Pick<HostConnectivity, 'isConnected'>) {
    this.#q = q;
    this.#hub = hub;
  }

  async of(teamId: string, hostId: string): Promise<CommandTarget> {
    if (!hostId) throw new HostUnavailable('environment has no host');
    const host = await this.#facts.get(hostId, async () => {
      const row = await getHostRow(this.#q, hostId);
      return row && { teamId: row.team_id, kind: row.kind };
    });
    if (!host || host.teamId !== teamId) throw new HostUnavailable(`host ${hostId} not found`);
    if (host.kind === 'sidecar' && !this.#hub.isConnected(hostId))
      throw new HostUnavailable(`host ${hostId} is not connected`);
    return { hostId, teamId, kind: host.kind };
  }
}
