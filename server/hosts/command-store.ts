// The commands table: every command is recorded before it is written to a stream, and exactly
// one outcome is stored on its row. `finishCommand` only changes a row that has not finished,
// so a late or duplicate result for an already-completed command id changes nothing.
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
}

export interface NewCommand {
  id: string;
  hostId: string;
  envId: string;
  teamId: string;
  kind: string;
  payload: unknown;
}

export async function insertCommand(q: Queryable, c: NewCommand): Promise<void> {
  await q.run(
    `INSERT INTO commands (id, host_id, env_id, team_id, kind, payload, status, created_at)
     VALUES (?, ?, ?, ?, ?, ?, 'sent', ?)`,
    [c.id, c.hostId, c.envId, c.teamId, c.kind, json(c.payload), now()],
  );
}

export async function markAcked(q: Queryable, id: string, at: string = now()): Promise<void> {
  await updateColumns(q, 'commands', { status: 'acked', acked_at: at }, "id = ? AND status = 'sent'", [id]);
}

/** Stores the one outcome of a command. Returns false when the command had already finished. */
export async function finishCommand(
  q: Queryable,
  id: string,
  outcome: { ok: true; result: unknown } | { ok: false; error: string },
  ackedAt?: string,
): Promise<boolean> {
  const changed = await updateColumns(
    q,
    'commands',
    {
      status: outcome.ok ? 'succeeded' : 'failed',
      result: outcome.ok ? json(outcome.result) : undefined,
      error: outcome.ok ? undefined : outcome.error,
      acked_at: ackedAt,
      finished_at: now(),
    },
    'id = ? AND finished_at IS NULL',
    [id],
  );
  return changed > 0;
}

export async function getCommand(q: Queryable, id: string): Promise<CommandRow | undefined> {
  return q.get<CommandRow>('SELECT * FROM commands WHERE id = ?', [id]);
}

/** On start: commands left in flight by a previous process can never get their result here. */
export async function failUnfinishedCommands(q: Queryable, reason: string): Promise<number> {
  return updateColumns(
    q,
    'commands',
    { status: 'failed', error: reason, finished_at: now() },
    'finished_at IS NULL',
    [],
  );
}
