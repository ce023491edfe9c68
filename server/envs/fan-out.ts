// Fan-out: `count` forks of one healthy version in one request (POST /v1/envs/{env}/fork and
// POST /v1/sandboxes with `count`). The version's snapshot already exists, so the source is not
// frozen again: every fork clones that one snapshot. Each fork is its own environment with its own
// fork deployment (the engine's one-deployment-per-environment rule and the failure rule stay as
// they are: a fork that fails removes only itself), all submitted at once so they run
// concurrently; the host bounds how many stack operations it runs at a time (sidecar/pool.ts).
import type { ForkRequestBody } from '../../protocol/api/bodies.ts';
import { newId, PREFIX } from '../../protocol/ids.ts';
import type { Db } from '../db/types.ts';
import type { DeploymentEngine } from '../deployments/engine.ts';
import { BadRequest, Conflict, SvcError } from '../errors.ts';
import type { Caller } from '../identity/auth.ts';
import { assertLive, checkEnvName, envOf, forkableVersion, forkVersion, type Started } from './lifecycle.ts';
import { checkForkUnderPolicy } from './runtime-policy.ts';
import { countEnvsNamed, type Environment, findEnvByName, type Version } from './store.ts';

/** At most this many forks per request (E2B's `fork({count})` allows as many). */
export const MAX_FORK_COUNT = 100;

/** A fork of a fan-out: started (its environment and deployment), or why it could not start. */
export type ForkOutcome =
  | (Started & { environment: Environment })
  | { name: string; error: string; status: number };

export interface FanOut {
  /** The id every fork's params and clone evidence carry. */
  fanout: string;
  version: string;
  /** The one snapshot every fork clones. */
  snapshot: string;
  forks: ForkOutcome[];
}

export function checkCount(count: number): void {
  if (!Number.isInteger(count) || count < 1 || count > MAX_FORK_COUNT)
    throw new BadRequest(`count must be a whole number from 1 to ${MAX_FORK_COUNT}, not ${count}`);
}

/**
 * The names of a fan-out's forks, all checked before anything is created: `<name>-1` …
 * `<name>-<count>` when a name is given (each must be free), else the first `count` free
 * `<prefix><n>`.
 */
export async function fanOutNames(
  db: Db,
  projectId: string,
  count: number,
  name: string | undefined,
  prefix: string,
): Promise<string[]> {
  checkCount(count);
  if (name === undefined) {
    const names: string[] = [];
    for (let n = (await countEnvsNamed(db, projectId, prefix)) + 1; names.length < count; n++)
      if (!(await findEnvByName(db, projectId, `${prefix}${n}`))) names.push(`${prefix}${n}`);
    return names;
  }
  const names = Array.from({ length: count }, (_, i) => `${name}-${i + 1}`);
  for (const n of names) checkEnvName(n);
  for (const n of names)
    if (await findEnvByName(db, projectId, n))
      throw new Conflict(
        `environment ${n} already exists in this project (a fan-out names its forks ${name}-<i>)`,
      );
  return names;
}

/**
 * Starts one fork of `v` per name, each its own environment and deployment, tagged with one
 * fan-out id. A fork that cannot start (its name taken meanwhile, say) carries its own error and
 * the others go on.
 */
export async function fanOutVersion(
  db: Db,
  engine: DeploymentEngine,
  caller: Caller,
  v: Version,
  names: string[],
): Promise<FanOut> {
  // The team's runtime policy refuses the whole fan-out (400), not each fork.
  await checkForkUnderPolicy(engine.deps.requiredRuntime, caller.teamId, v.Spec);
  const id = newId(PREFIX.fanout);
  const count = names.length;
  const forks: ForkOutcome[] = [];
  for (const [i, name] of names.entries()) {
    try {
      forks.push(await forkVersion(db, engine, caller, v, name, { id, index: i + 1, count }));
    } catch (err) {
      if (!(err instanceof SvcError))
        engine.deps.log.warn(
          { fanout: id, name, err: (err as Error).message },
          'a fork of a fan-out did not start',
        );
      forks.push(
        err instanceof SvcError
          ? { name, error: err.message, status: err.status }
          : { name, error: 'internal error', status: 500 },
      );
    }
  }
  return { fanout: id, version: v.ID, snapshot: v.Snapshot, forks };
}

/**
 * The one domain function of a fan-out of a healthy version: `count` forks named `<name>-<i>`,
 * or `<prefix><n>` without a name. Answers at once; each fork's deployment goes on.
 */
export async function forkMany(
  db: Db,
  engine: DeploymentEngine,
  caller: Caller,
  v: Version,
  req: { count: number; name?: string; prefix: string },
): Promise<FanOut> {
  const names = await fanOutNames(db, v.ProjectID, req.count, req.name, req.prefix);
  return fanOutVersion(db, engine, caller, v, names);
}

/** POST /v1/envs/{env}/fork with `count`: the fork's checks, then the fan-out. */
export async function forkEnvMany(
  db: Db,
  engine: DeploymentEngine,
  caller: Caller,
  envId: string,
  body: Omit<ForkRequestBody, 'count'> & { count: number },
): Promise<FanOut> {
  checkCount(body.count);
  const env = await envOf(db, caller, envId);
  assertLive(env);
  const v = await forkableVersion(db, caller, env, body.version);
  return forkMany(db, engine, caller, v, { count: body.count, name: body.name, prefix: `${env.Name}-fork-` });
}
