// Reading environments (spec "Environments", read routes): an environment of the caller's team
// with whether its host can take commands now, its versions and its deployments.

import type { Db } from '../db/types.ts';
import { type Deployment, listDeploymentsOfEnv } from '../deployments/store.ts';
import { NotFound } from '../errors.ts';
import type { HostConnectivity } from '../hosts/connectivity.ts';
import { getHostRow } from '../hosts/store.ts';
import { type Environment, getEnv, listVersions, type Version } from './store.ts';

export async function requireEnv(db: Db, teamId: string, id: string): Promise<Environment> {
  const env = await getEnv(db, teamId, id);
  if (!env) throw new NotFound(`environment ${id} not found`);
  return env;
}

/** A sidecar host is connected while its stream is open; a driver host always is. */
export async function hostConnected(db: Db, hub: HostConnectivity, hostId: string): Promise<boolean> {
  if (!hostId) return false;
  if (hub.isConnected(hostId)) return true;
  const host = await getHostRow(db, hostId);
  return host !== undefined && host.kind !== 'sidecar';
}

export async function envView(
  db: Db,
  hub: HostConnectivity,
  teamId: string,
  id: string,
): Promise<{ environment: Environment; connected: boolean }> {
  const environment = await requireEnv(db, teamId, id);
  return { environment, connected: await hostConnected(db, hub, environment.HostID) };
}

export async function envVersions(db: Db, teamId: string, id: string): Promise<Version[]> {
  const env = await requireEnv(db, teamId, id);
  return listVersions(db, env.ID);
}

export async function envDeployments(db: Db, teamId: string, id: string): Promise<Deployment[]> {
  const env = await requireEnv(db, teamId, id);
  return listDeploymentsOfEnv(db, env.ID);
}
