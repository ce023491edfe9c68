// Who runs each unfinished deployment: its owner replica and the lease that owner renews while it
// lives (times are ISO 8601 text of the replicas' clocks, compared as text: one fixed format).
// One environment has at most one `running` deployment (the unique index of migration 16): a
// deployment starts by claiming its environment, which only the oldest unfinished deployment of
// that environment may do on a shared database.
import { isUniqueViolation, now, type Queryable } from '../db/types.ts';

/** Older than `d` (created first, ids break ties): the order deployments of one environment run in. */
const OLDER_UNFINISHED = `EXISTS (SELECT 1 FROM deployments o WHERE o.env_id = deployments.env_id
  AND o.finished_at IS NULL AND o.id <> deployments.id
  AND (o.created_at < deployments.created_at OR (o.created_at = deployments.created_at AND o.id < deployments.id)))`;

/**
 * Takes the deployment's environment: the deployment becomes `running` unless another deployment
 * of the environment runs. With `inOrder`, also only when no older deployment of the environment is
 * unfinished (replicas agree on the order through the rows; a single process orders by its queue).
 * A deployment already running (adopted, or recovered) holds its environment already: true.
 */
export async function claimEnvironment(
  q: Queryable,
  id: string,
  owner: string,
  leaseUntil: string | null,
  inOrder: boolean,
): Promise<boolean> {
  try {
    const r = await q.run(
      `UPDATE deployments SET status = 'running', lease_until = ?
        WHERE id = ? AND owner = ? AND finished_at IS NULL
        AND (status = 'running' OR ${inOrder ? `NOT ${OLDER_UNFINISHED}` : '1 = 1'})`,
      [leaseUntil, id, owner],
    );
    return r.changes > 0;
  } catch (err) {
    // Another replica's deployment of the environment started first.
    if (isUniqueViolation(err)) return false;
    throw err;
  }
}

/** Of `ids`, the deployments another replica owns now (it adopted them). */
export async function ownedByOthers(q: Queryable, ids: readonly string[], owner: string): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await q.all<{ id: string }>(
    `SELECT id FROM deployments WHERE owner <> ? AND id IN (${ids.map(() => '?').join(', ')})`,
    [owner, ...ids],
  );
  return rows.map((r) => r.id);
}

/** Renews every lease of `owner`; returns the unfinished deployments it still owns. */
export async function renewLeases(q: Queryable, owner: string, until: string): Promise<Set<string>> {
  const rows = await q.all<{ id: string }>(
    'UPDATE deployments SET lease_until = ? WHERE owner = ? AND finished_at IS NULL RETURNING id',
    [until, owner],
  );
  return new Set(rows.map((r) => r.id));
}

export interface Unowned {
  id: string;
  kind: string;
  env_id: string;
  target_env_id: string;
  owner: string;
}

/**
 * Unfinished deployments whose owner's lease lapsed (or that never had one: rows from before
 * leases), oldest first. `all`: every unfinished one (a sole writer's start, where nothing else runs).
 */
export async function lapsedDeployments(q: Queryable, at: string, all = false): Promise<Unowned[]> {
  return q.all<Unowned>(
    `SELECT id, kind, env_id, target_env_id, owner FROM deployments WHERE status IN ('pending', 'running')
      ${all ? '' : 'AND (lease_until IS NULL OR lease_until < ?)'} ORDER BY created_at, id`,
    all ? [] : [at],
  );
}

/**
 * Makes `owner` the owner of a deployment whose lease lapsed, if it still has lapsed and still
 * belongs to `from`: of two replicas adopting at once, exactly one does.
 */
export async function adoptDeployment(
  q: Queryable,
  d: { id: string; owner: string },
  owner: string,
  leaseUntil: string | null,
  at: string,
  force = false,
): Promise<boolean> {
  const r = await q.run(
    `UPDATE deployments SET owner = ?, lease_until = ? WHERE id = ? AND owner = ? AND finished_at IS NULL
      ${force ? '' : 'AND (lease_until IS NULL OR lease_until < ?)'}`,
    force ? [owner, leaseUntil, d.id, d.owner] : [owner, leaseUntil, d.id, d.owner, at],
  );
  return r.changes > 0;
}

/**
 * The commands an adopted deployment's previous owner left waiting for a result, on the
 * deployment's environments, fail: that replica can never take their result, and a late one is
 * then handled like any result given up on (late-results.ts). Only that replica's (`origin`): an
 * exec a live replica sent to the same environment is still waited for.
 */
export async function failOrphanCommands(
  q: Queryable,
  origin: string,
  envIds: readonly string[],
  before: string,
  reason: string,
): Promise<number> {
  const ids = envIds.filter(Boolean);
  if (ids.length === 0 || !origin) return 0;
  const r = await q.run(
    `UPDATE commands SET status = 'failed', error = ?, finished_at = ?
      WHERE finished_at IS NULL AND origin = ? AND created_at <= ? AND env_id IN (${ids.map(() => '?').join(', ')})`,
    [reason, now(), origin, before, ...ids],
  );
  return r.changes;
}
