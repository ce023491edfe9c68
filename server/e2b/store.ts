// The rows of the E2B-compatible surface: one per E2B sandbox, tying its id to the svc
// environment that is the sandbox, its team, the hash of its envd access token, its metadata and
// its lifetime. A killed or expired sandbox's row is deleted (the SDK then reads 404).
import { type Param, parseJson, type Queryable } from '../db/types.ts';

export type E2bState = 'running' | 'paused';

export interface E2bRow {
  id: string;
  team_id: string;
  env_id: string;
  template_id: string;
  token_hash: string;
  /** The token sealed (AES-256-GCM): get and connect hand it out again. */
  token_sealed: string;
  metadata: string;
  state: E2bState;
  started_at: string;
  end_at: string;
}

export interface E2bSandboxRow extends Omit<E2bRow, 'metadata'> {
  metadata: Record<string, string>;
}

const of = (r: E2bRow): E2bSandboxRow => ({ ...r, metadata: parseJson(r.metadata, {}) });

export async function insertSandbox(q: Queryable, r: E2bSandboxRow): Promise<void> {
  await q.run(
    `INSERT INTO e2b_sandboxes (id, team_id, env_id, template_id, token_hash, token_sealed, metadata, state,
       started_at, end_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      r.id,
      r.team_id,
      r.env_id,
      r.template_id,
      r.token_hash,
      r.token_sealed,
      JSON.stringify(r.metadata),
      r.state,
      r.started_at,
      r.end_at,
    ],
  );
}

export async function getSandbox(
  q: Queryable,
  teamId: string,
  id: string,
): Promise<E2bSandboxRow | undefined> {
  const r = await q.get<E2bRow>('SELECT * FROM e2b_sandboxes WHERE id = ? AND team_id = ?', [id, teamId]);
  return r && of(r);
}

/** By id alone: envd requests name the sandbox and prove themselves with its token, not a team key. */
export async function getSandboxById(q: Queryable, id: string): Promise<E2bSandboxRow | undefined> {
  const r = await q.get<E2bRow>('SELECT * FROM e2b_sandboxes WHERE id = ?', [id]);
  return r && of(r);
}

export interface ListQuery {
  states: E2bState[];
  /** Ids after this one (the previous page's last), in id (creation) order. */
  after: string;
  limit: number;
}

/** A team's sandboxes in the given states, oldest first, `limit` at most past `after`. */
export async function listSandboxes(q: Queryable, teamId: string, l: ListQuery): Promise<E2bSandboxRow[]> {
  const marks = l.states.map(() => '?').join(', ');
  const params: Param[] = [teamId, ...l.states, l.after, l.limit];
  const rows = await q.all<E2bRow>(
    `SELECT * FROM e2b_sandboxes WHERE team_id = ? AND state IN (${marks}) AND id > ? ORDER BY id LIMIT ?`,
    params,
  );
  return rows.map(of);
}

export async function setState(q: Queryable, id: string, state: E2bState, endAt: string): Promise<void> {
  await q.run('UPDATE e2b_sandboxes SET state = ?, end_at = ? WHERE id = ?', [state, endAt, id]);
}

export async function setEndAt(q: Queryable, id: string, endAt: string): Promise<void> {
  await q.run('UPDATE e2b_sandboxes SET end_at = ? WHERE id = ?', [endAt, id]);
}

/** Deletes the row and its process numbers; false when another request deleted it first (one kill wins). */
export async function deleteSandbox(q: Queryable, id: string): Promise<boolean> {
  const gone = (await q.run('DELETE FROM e2b_sandboxes WHERE id = ?', [id])).changes > 0;
  await q.run('DELETE FROM e2b_processes WHERE sandbox_id = ?', [id]);
  return gone;
}

/** A process of a sandbox under its envd pid: svc's id for it, its tag and the config it was started with. */
export interface E2bProcessRow {
  pid: number;
  proc: string;
  tag: string;
  config: string;
  tty: number;
}

/** Postgres returns BIGINT and INTEGER columns as strings where SQLite gives numbers. */
const numbers = (r: E2bProcessRow): E2bProcessRow => ({ ...r, pid: Number(r.pid), tty: Number(r.tty) });

/** The next envd pid of a sandbox (never handed out twice); undefined when the sandbox is gone. */
export async function nextPid(q: Queryable, sandboxId: string): Promise<number | undefined> {
  const r = await q.get<{ pid: number }>(
    'UPDATE e2b_sandboxes SET next_pid = next_pid + 1 WHERE id = ? RETURNING next_pid - 1 AS pid',
    [sandboxId],
  );
  return r ? Number(r.pid) : undefined;
}

/** Records a process under `pid`; false when the sandbox already has a number for that process. */
export async function insertProcess(q: Queryable, sandboxId: string, r: E2bProcessRow): Promise<boolean> {
  const done = await q.run(
    `INSERT INTO e2b_processes (sandbox_id, pid, proc, tag, config, tty) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (sandbox_id, proc) DO NOTHING`,
    [sandboxId, r.pid, r.proc, r.tag, r.config, r.tty],
  );
  return done.changes > 0;
}

/** A sandbox's process by envd pid, or by tag (the first started with it). */
export async function findProcess(
  q: Queryable,
  sandboxId: string,
  by: { pid: number } | { tag: string },
): Promise<E2bProcessRow | undefined> {
  const r =
    'pid' in by
      ? await q.get<E2bProcessRow>('SELECT * FROM e2b_processes WHERE sandbox_id = ? AND pid = ?', [
          sandboxId,
          by.pid,
        ])
      : await q.get<E2bProcessRow>(
          "SELECT * FROM e2b_processes WHERE sandbox_id = ? AND tag = ? AND tag <> '' ORDER BY pid LIMIT 1",
          [sandboxId, by.tag],
        );
  return r && numbers(r);
}

/** The envd pids a sandbox has for these svc process ids. */
export async function pidsOf(q: Queryable, sandboxId: string, procs: string[]): Promise<E2bProcessRow[]> {
  if (!procs.length) return [];
  const rows = await q.all<E2bProcessRow>(
    `SELECT * FROM e2b_processes WHERE sandbox_id = ? AND proc IN (${procs.map(() => '?').join(', ')})`,
    [sandboxId, ...procs],
  );
  return rows.map(numbers);
}

/** Running sandboxes whose time ran out by `at`. */
export async function expired(q: Queryable, at: string, limit: number): Promise<E2bSandboxRow[]> {
  const rows = await q.all<E2bRow>(
    "SELECT * FROM e2b_sandboxes WHERE state = 'running' AND end_at <= ? ORDER BY end_at LIMIT ?",
    [at, limit],
  );
  return rows.map(of);
}
