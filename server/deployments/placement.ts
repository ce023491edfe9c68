// Placement order for a deploy's `place` phase (spec "Targets, placement and drivers"):
// 1. the environment's own host, if connected; 2. the pinned target; 3. the first connected host
// of the team, sidecars before driver hosts; 4. otherwise provisioning.
import type { Runtime } from '../../protocol/spec.ts';
import { findCloudByRef } from '../clouds/store.ts';
import type { Environment } from '../envs/store.ts';
import { listHosts } from '../hosts/store.ts';
import type { OrchestratorDeps } from './deps.ts';

export type Placement = { hostId: string; reason: string } | { provision: true; reason: string };

export const PROVISIONING = 'no connected host (provisioning)';
export const NO_GVISOR_HOST =
  'no connected host runs gvisor: install runsc on a host (apt-get install runsc) and restart its svcd, which registers it with Docker';

const runsGvisor = (caps: Record<string, unknown>) =>
  Array.isArray(caps.runtimes) && caps.runtimes.includes('gvisor');

const reachable = (deps: OrchestratorDeps, h: { ID: string; Kind: string }) =>
  h.Kind !== 'sidecar' || deps.hub.isConnected(h.ID);

export async function place(
  deps: OrchestratorDeps,
  teamId: string,
  env: Environment,
  pinnedTarget: string | null,
  runtime?: Runtime,
): Promise<Placement> {
  const hosts = await listHosts(deps.db, teamId);
  const own = hosts.find((h) => h.ID === env.HostID);
  if (own && reachable(deps, own)) return { hostId: own.ID, reason: 'environment already on host' };

  if (pinnedTarget) {
    const cloud = await findCloudByRef(deps.db, teamId, pinnedTarget);
    if (!cloud) throw new Error(`target '${pinnedTarget}': no such cloud`);
    await deps.ensureDriverHosts(teamId);
    const all = await listHosts(deps.db, teamId);
    const driver = all.find((h) => h.CloudID === cloud.ID && h.Kind !== 'sidecar');
    const sidecar = all.find(
      (h) => h.CloudID === cloud.ID && h.Kind === 'sidecar' && deps.hub.isConnected(h.ID),
    );
    const pick = driver ?? sidecar;
    if (!pick) throw new Error(`target '${cloud.Name}' (${cloud.Provider}): no connected host`);
    return { hostId: pick.ID, reason: `target ${cloud.Name}` };
  }

  await deps.ensureDriverHosts(teamId);
  const all = await listHosts(deps.db, teamId); // sidecars first, then driver hosts
  if (runtime === 'gvisor') {
    const able = all.find((h) => h.Kind === 'sidecar' && reachable(deps, h) && runsGvisor(h.Capabilities));
    if (able) return { hostId: able.ID, reason: 'first connected host running gvisor' };
    throw new Error(NO_GVISOR_HOST);
  }
  const first = all.find((h) => reachable(deps, h));
  if (first) return { hostId: first.ID, reason: 'first connected host in team' };
  return { provision: true, reason: PROVISIONING };
}
