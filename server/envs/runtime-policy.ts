// The control plane's runtime policy: a team the operator names in SVC_GVISOR_TEAMS runs every
// environment under gVisor. A spec of such a team that does not name a runtime gets gvisor; one
// that asks for runc, and a fork of a version that does not run under gvisor, is refused (400)
// before anything is recorded. Teams are named by id or by name (naming adds a wall, never removes one).
import type { EnvSpec, Runtime } from '../../protocol/spec.ts';
import type { Db } from '../db/types.ts';
import { BadRequest } from '../errors.ts';
import { getTeam } from '../identity/store.ts';

export type RequiredRuntime = (teamId: string) => Promise<Runtime | null>;

/** The policy of a list of teams (ids or names): gvisor for those, none for the rest. */
export function gvisorTeamsPolicy(db: Db, teams: readonly string[]): RequiredRuntime {
  const named = new Set(teams);
  return async (teamId) => {
    if (named.size === 0) return null;
    if (named.has(teamId)) return 'gvisor';
    const team = await getTeam(db, teamId);
    return team && named.has(team.Name) ? 'gvisor' : null;
  };
}

const refusal = (asked: string) =>
  `this team must run environments under gvisor (the operator's SVC_GVISOR_TEAMS); ${asked}: set x-svc.runtime: gvisor or leave it out`;

/** The spec a new deploy records under the team's policy, or a BadRequest naming why not. */
export async function specUnderPolicy(
  policy: RequiredRuntime | undefined,
  teamId: string,
  spec: EnvSpec,
): Promise<EnvSpec> {
  const required = policy ? await policy(teamId) : null;
  if (!required || spec.runtime === required) return spec;
  if (spec.runtime !== undefined)
    throw new BadRequest(refusal(`the spec asks for x-svc.runtime: ${spec.runtime}`));
  return { ...spec, runtime: required };
}

/** A fork keeps its version's runtime: refused when that is not the one the team must run. */
export async function checkForkUnderPolicy(
  policy: RequiredRuntime | undefined,
  teamId: string,
  spec: EnvSpec,
): Promise<void> {
  const required = policy ? await policy(teamId) : null;
  if (required && spec.runtime !== required)
    throw new BadRequest(refusal(`this version runs under ${spec.runtime ?? "the host's default runtime"}`));
}

/** A runtime a request names (an E2B create's metadata), checked against the team's policy first. */
export async function checkAskedUnderPolicy(
  policy: RequiredRuntime | undefined,
  teamId: string,
  asked: Runtime | undefined,
): Promise<void> {
  const required = policy ? await policy(teamId) : null;
  if (required && asked !== undefined && asked !== required)
    throw new BadRequest(refusal(`the request asks for runtime ${asked}`));
}
