// Hosts and targets as the API lists them (spec "Clouds, hosts and targets"). A hosted-provider
// cloud (sandbox-a, sandbox-b) has exactly one driver host, created on demand: when targets are
// listed, when placement runs, or when a target is connected.
import { PREFIX } from '../../protocol/ids.ts';
import { type CapabilityRow, capabilityRow, isSandboxProvider } from '../clouds/providers.ts';
import { type Cloud, listClouds } from '../clouds/store.ts';
import type { Queryable } from '../db/types.ts';
import type { HostConnectivity } from './connectivity.ts';
import { findDriverHost, type Host, insertDriverHost, listHosts } from './store.ts';

/** The spec's Host record: the stored fields plus `connected`. */
export interface HostView {
  ID: string;
  TeamID: string;
  CloudID: string;
  Name: string;
  Status: string;
  ProviderRef: string;
  LastSeenAt: string | null;
  CreatedAt: string;
  Capabilities: Record<string, unknown>;
  connected: boolean;
}

export interface Target extends HostView {
  /** `sidecar` or `driver:<provider>`. */
  kind: string;
  /** The provider of the cloud the host belongs to; absent for a sidecar joined without a cloud. */
  provider?: string;
  capabilities: Record<string, unknown>;
  /** The static capability row of a hosted provider. */
  table?: CapabilityRow;
}

export const isDriver = (h: Host): boolean => h.Kind !== 'sidecar';

export function hostView(h: Host, hub: HostConnectivity): HostView {
  return {
    ID: h.ID,
    TeamID: h.TeamID,
    CloudID: h.CloudID,
    Name: h.Name,
    Status: h.Status,
    ProviderRef: h.ProviderRef,
    LastSeenAt: h.LastSeenAt,
    CreatedAt: h.CreatedAt,
    Capabilities: h.Capabilities,
    connected: isDriver(h) || hub.isConnected(h.ID),
  };
}

/** A cloud's driver host id is derived from the cloud id, so creating it twice is harmless. */
export const driverHostId = (cloudId: string): string =>
  `${PREFIX.host}${cloudId.slice(PREFIX.cloud.length)}`;

/** Creates the driver host of a hosted-provider cloud unless it exists; returns it. */
export async function ensureDriverHost(
  q: Queryable,
  cloud: Pick<Cloud, 'ID' | 'TeamID' | 'Provider'>,
): Promise<Host> {
  const existing = await findDriverHost(q, cloud.ID);
  if (existing) return existing;
  await insertDriverHost(q, driverHostId(cloud.ID), {
    teamId: cloud.TeamID,
    cloudId: cloud.ID,
    name: cloud.Provider,
    kind: `driver:${cloud.Provider}`,
    capabilities: { provider: cloud.Provider, ...capabilityRow(cloud.Provider) },
  });
  return (await findDriverHost(q, cloud.ID)) as Host;
}

/** Every hosted-provider cloud of the team gets its driver host (placement calls this too). */
export async function ensureDriverHosts(q: Queryable, teamId: string): Promise<void> {
  const clouds = await listClouds(q, teamId);
  for (const c of clouds) {
    if (isSandboxProvider(c.Provider)) await ensureDriverHost(q, c);
  }
}

export async function hostsOf(q: Queryable, hub: HostConnectivity, teamId: string): Promise<HostView[]> {
  return (await listHosts(q, teamId)).map((h) => hostView(h, hub));
}

/** Sidecars first, then driver hosts (listHosts' order). */
export async function targetsOf(q: Queryable, hub: HostConnectivity, teamId: string): Promise<Target[]> {
  await ensureDriverHosts(q, teamId);
  const [hosts, clouds] = await Promise.all([listHosts(q, teamId), listClouds(q, teamId)]);
  const providerOf = new Map(clouds.map((c) => [c.ID, c.Provider]));
  return hosts.map((h) => {
    const view = hostView(h, hub);
    const provider = isDriver(h) ? h.Kind.slice('driver:'.length) : providerOf.get(h.CloudID);
    const table = isDriver(h) ? capabilityRow(provider ?? '') : undefined;
    return {
      ...view,
      kind: h.Kind,
      ...(provider ? { provider } : {}),
      capabilities: h.Capabilities,
      ...(table ? { table } : {}),
    };
  });
}
