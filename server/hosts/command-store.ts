// The commands table: every command is recorded before it is written to a stream, and exactly
// one outcome is stored on its row. `finishCommand` only changes a row that has not finished,
// so a late or duplicate result for an already-completed command id changes nothing.
import { newId, PREFIX } from '../../protocol/ids.ts';
import { json, now, type Queryable, updateColumns } from '../db/types.ts';

export type CommandStatus = 'sent' | 'acked' | 'succeeded' | 'failed';

export interface CommandRow {
  id: string;
  host_id: string;
  env_id: string;
  team_id: string;
  kind: string;
  payload: string;
  status: CommandStatus;
  result: string | null;
  error: string;
  created_at: string;
  acked_at: string | null;
  finished_at: string | null;
  /** The replica waiting for the outcome ('' before replicas were recorded). */
  origin: string;
  /** The replica that wrote it to the host's stream for another ('' when the origin did). */
  holder: string;
  /** A failure's type (frames.ts CommandFailureType); '' when it succeeded or was not recorded. */
  error_type: string;
}

export interface NewCommand {
  id: string;
  hostId: string;
  envId: string;
  teamId: string;
  kind: string;
  payload: unknown;
  /** The replica that waits for its outcome. */
  origin?: string;
}

export async function insertCommand(q: Queryable, c: NewCommand): Promise<void> {
  await q.run(
    `INSERT INTO commands (id, host_id, env_id, team_id, kind, payload, status, created_at, origin)
     VALUES (?, ?, ?, ?, ?, ?, 'sent', ?, ?)`,
    [c.id, c.hostId, c.envId, c.teamId, c.kind, json(c.payload), now(), c.origin ?? ''],
  );
}

/**
 * Records a command whose id is stable (a deployment verdict's, kind.ts `commandId`). A row of
 * that id that failed without the host's word (the replica waiting for it died, it timed out or
 * was cancelled) is opened again for this send: the host answers a resent id from what it kept
 * (or joins the run still going), never running it twice. One that succeeded gives its result,
 * nothing is sent. Any other (the host failed it, another replica still waits for it): a new id.
 */
export async function recordStable(
  q: Queryable,
  c: NewCommand,
): Promise<{ id: string } | { id: string; result: unknown }> {
  const opened = await q.get(
    `INSERT INTO commands (id, host_id, env_id, team_id, kind, payload, status, created_at, origin)
     VALUES (?, ?, ?, ?, ?, ?, 'sent', ?, ?)
     ON CONFLICT (id) DO UPDATE SET status = 'sent', result = NULL, error = '', error_type = '',
       acked_at = NULL, finished_at = NULL, holder = '', origin = excluded.origin, created_at = excluded.created_at
     WHERE commands.status = 'failed' AND commands.error_type IN ('', 'host_gone', 'timeout', 'cancelled')
       AND commands.host_id = excluded.host_id AND commands.kind = excluded.kind
     RETURNING id`,
    [c.id, c.hostId, c.envId, c.teamId, c.kind, json(c.payload), now(), c.origin ?? ''],
  );
  if (opened) return { id: c.id };
  const had = await getCommand(q, c.id);
  if (had?.status === 'succeeded' && had.host_id === c.hostId && had.kind === c.kind)
    return { id: c.id, result: had.result === null ? {} : JSON.parse(had.result) };
  const id = newId(PREFIX.command);
  await insertCommand(q, { ...c, id });
  return { id };
}

export async function markAcked(q: Queryable, id: string, at: string = now()): Promise<void> {
  await updateColumns(q, 'commands', { status: 'acked', acked_at: at }, "id = ? AND status = 'sent'", [id]);
}

/**
 * Stores the one outcome of a command. Returns false when the command had already finished, or
 * (`origin` given) when another replica waits for it now (it reopened the row: recordStable).
 */
export async function finishCommand(
  q: Queryable,
  id: string,
  outcome: { ok: true; result: unknown } | { ok: false; error: string; type?: string },
  ackedAt?: string,
  origin?: string,
): Promise<boolean> {
  const changed = await updateColumns(
    q,
    'commands',
    {
      status: outcome.ok ? 'succeeded' : 'failed',
      result: outcome.ok ? json(outcome.result) : undefined,
      error: outcome.ok ? undefined : outcome.error,
      error_type: outcome.ok ? undefined : outcome.type,
      acked_at: ackedAt,
      finished_at: now(),
    },
    origin === undefined ? 'id = ? AND finished_at IS NULL' : 'id = ? AND finished_at IS NULL AND origin = ?',
    origin === undefined ? [id] : [id, origin],
  );
  return changed > 0;
}

export async function getCommand(q: Queryable, id: string): Promise<CommandRow | undefined> {
  return q.get<CommandRow>('SELECT * FROM commands WHERE id = ?', [id]);
}

/**
 * Commands left in flight by processes that are gone can never get their result: every unfinished
 * one whose origin is not among `liveOrigins` (the replicas alive now) is failed.
 */
export async function failUnfinishedCommands(
  q: Queryable,
  reason: string,
  liveOrigins: readonly string[] = [],
): Promise<number> {
  const spared = liveOrigins.length ? ` AND origin NOT IN (${liveOrigins.map(() => '?').join(', ')})` : '';
  return updateColumns(
    q,
    'commands',
    { status: 'failed', error: reason, error_type: 'host_gone', finished_at: now() },
    `finished_at IS NULL${spared}`,
    liveOrigins,
  );
}

/** The unfinished commands a replica that died was waiting for: failed, as a restart does. */
export async function failCommandsOf(q: Queryable, origin: string, reason: string): Promise<number> {
  return updateColumns(
    q,
    'commands',
    { status: 'failed', error: reason, error_type: 'host_gone', finished_at: now() },
    'finished_at IS NULL AND origin = ?',
    [origin],
  );
}

/**
 * Takes an unfinished command to write it to its host's stream for its origin replica: its row for
 * exactly one taker, once (a command row is sent to a host at most once); undefined for the others.
 */
export async function claimCommand(
  q: Queryable,
  id: string,
  holder: string,
): Promise<Pick<CommandRow, 'host_id' | 'env_id' | 'team_id' | 'kind' | 'payload'> | undefined> {
  return q.get(
    `UPDATE commands SET holder = ? WHERE id = ? AND holder = '' AND finished_at IS NULL
     RETURNING host_id, env_id, team_id, kind, payload`,
    [holder, id],
  );
}

/**
 * Takes, of `ids`, the unfinished commands for `hostId` no replica took yet, as claimCommand does
 * for one: a lane's command together with the earlier ones of its lane whose notification may have
 * been lost, in one statement. The rows come back in no particular order.
 */
export async function claimCommands(
  q: Queryable,
  ids: readonly string[],
  hostId: string,
  holder: string,
): Promise<Pick<CommandRow, 'id' | 'host_id' | 'env_id' | 'team_id' | 'kind' | 'payload'>[]> {
  if (ids.length === 0) return [];
  return q.all(
    `UPDATE commands SET holder = ?
      WHERE id IN (${ids.map(() => '?').join(', ')}) AND host_id = ? AND holder = '' AND finished_at IS NULL
     RETURNING id, host_id, env_id, team_id, kind, payload`,
    [holder, ...ids, hostId],
  );
}

export type CommandOutcome = Pick<
  CommandRow,
  'id' | 'status' | 'result' | 'error' | 'error_type' | 'holder'
> & {
  finished: boolean;
};

/** The state of the commands among `ids` (a relay's poll for outcomes it was not told of). */
export async function commandOutcomes(q: Queryable, ids: readonly string[]): Promise<CommandOutcome[]> {
  if (ids.length === 0) return [];
  const rows = await q.all<Omit<CommandOutcome, 'finished'> & { finished_at: string | null }>(
    `SELECT id, status, result, error, error_type, holder, finished_at FROM commands
      WHERE id IN (${ids.map(() => '?').join(', ')})`,
    ids,
  );
  return rows.map((r) => ({ ...r, finished: r.finished_at !== null }));
}
