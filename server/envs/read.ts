// Reading environments (spec "Environments", read routes): an environment of the caller's team
// with whether its host can take commands now, its versions and its deployments.

import { LINEAGE_MAX_DEPTH } from '../../protocol/api.ts';
import type { Db } from '../db/types.ts';
import { type Deployment, listDeploymentsOfEnv } from '../deployments/store.ts';
import { NotFound } from '../errors.ts';
import type { HostConnectivity } from '../hosts/connectivity.ts';
import { getHostRow } from '../hosts/store.ts';
import { type Environment, getEnv, getVersion, listVersions, type Version } from './store.ts';

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

/** A step of a lineage (protocol/api.ts LineageStep), as the stores read it. */
export interface Ancestor {
  environment: Environment;
  version: Version;
}

/**
 * What the environment was forked from, up the chain (nearest first): each step is the version it
 * forked (its ParentVersionID) and that version's environment, read within the caller's team. The
 * chain ends at an environment that is no fork, at a version or environment no longer there, or
 * after LINEAGE_MAX_DEPTH steps.
 */
export async function envLineage(db: Db, teamId: string, id: string): Promise<{ ancestors: Ancestor[] }> {
  let child = await requireEnv(db, teamId, id);
  const ancestors: Ancestor[] = [];
  const seen = new Set([child.ID]);
  while (child.ParentVersionID && ancestors.length < LINEAGE_MAX_DEPTH) {
    const version = await getVersion(db, teamId, child.ParentVersionID);
    const environment = version && (await getEnv(db, teamId, version.EnvID));
    if (!version || !environment || seen.has(environment.ID)) break;
    seen.add(environment.ID);
    ancestors.push({ environment, version });
    child = environment;
  }
  return { ancestors };
}
