// The rows of the state control-plane replicas share (leases.ts, and the rate windows below).
//
// Fixed rate windows counted in the database, for the limits that must hold across control-plane
// replicas (guessing: sign-in steps and failed authentications per address, unknown user codes per
// user): counted in one process's memory, N replicas behind a balancer would allow N times the
// guesses. One UPSERT counts a hit and starts a new window once the old one ended; the count and
// the window's end come back in the same statement, so two replicas counting at once never lose a
// hit. Rows of ended windows are deleted a bounded batch at a time.
import type { Queryable } from '../db/types.ts';

export interface WindowCount {
  count: number;
  /** When the window ends, in ms since the epoch. */
  resetAt: number;
}

/** Counts one hit of `key` in its current window (a new one of `windowMs` if none is running). */
export async function hitWindow(
  q: Queryable,
  key: string,
  windowMs: number,
  at = Date.now(),
): Promise<WindowCount> {
  const now = new Date(at).toISOString();
  const row = await q.get<{ count: number | string; reset_at: string }>(
    `INSERT INTO rate_windows (key, count, reset_at) VALUES (?, 1, ?)
     ON CONFLICT (key) DO UPDATE SET
       count = CASE WHEN rate_windows.reset_at <= ? THEN 1 ELSE rate_windows.count + 1 END,
       reset_at = CASE WHEN rate_windows.reset_at <= ? THEN excluded.reset_at ELSE rate_windows.reset_at END
     RETURNING count, reset_at`,
    [key, new Date(at + windowMs).toISOString(), now, now],
  );
  if (!row) throw new Error('counting a rate window returned no row');
  return { count: Number(row.count), resetAt: Date.parse(row.reset_at) };
}

/** The hits of `key` in its running window (0 when none runs). */
export async function peekWindow(q: Queryable, key: string, at = Date.now()): Promise<WindowCount> {
  const row = await q.get<{ count: number | string; reset_at: string }>(
    'SELECT count, reset_at FROM rate_windows WHERE key = ? AND reset_at > ?',
    [key, new Date(at).toISOString()],
  );
  return row ? { count: Number(row.count), resetAt: Date.parse(row.reset_at) } : { count: 0, resetAt: at };
}

/** Running windows of keys starting with `prefix` that have at least `min` hits, at most `limit`. */
export async function windowsOver(
  q: Queryable,
  prefix: string,
  min: number,
  limit: number,
  at = Date.now(),
): Promise<{ key: string; resetAt: number }[]> {
  const rows = await q.all<{ key: string; reset_at: string }>(
    `SELECT key, reset_at FROM rate_windows WHERE reset_at > ? AND count >= ? AND substr(key, 1, ?) = ?
     LIMIT ?`,
    [new Date(at).toISOString(), min, prefix.length, prefix, limit],
  );
  return rows.map((r) => ({ key: r.key, resetAt: Date.parse(r.reset_at) }));
}

/**
 * Deletes at most `limit` rows of `table` whose `column` (ISO time) is at or before `before`:
 * cleanup that any request or timer may run without holding the table for long.
 * Table and column names come from code, never from input.
 */
export async function dropExpired(
  q: Queryable,
  table: 'rate_windows' | 'oauth_states' | 'blob_tokens' | 'leases',
  key: string,
  column: string,
  before: string,
  limit = 100,
): Promise<number> {
  const r = await q.run(
    `DELETE FROM ${table} WHERE ${key} IN (SELECT ${key} FROM ${table} WHERE ${column} <= ? LIMIT ?)`,
    [before, limit],
  );
  return r.changes;
}

// Named leases (leases.ts).

/** Takes or renews `name` for `holder` until now + `ttlMs`; false while another holder's is live. */
export async function tryLease(
  q: Queryable,
  name: string,
  holder: string,
  ttlMs: number,
  at = Date.now(),
): Promise<boolean> {
  const r = await q.run(
    `INSERT INTO leases (name, holder, until) VALUES (?, ?, ?)
     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
     WHERE leases.holder = excluded.holder OR leases.until <= ?`,
    [name, holder, new Date(at + ttlMs).toISOString(), new Date(at).toISOString()],
  );
  return r.changes > 0;
}

/** Gives `name` up at once (only this holder's): another replica need not wait for it to lapse. */
export async function releaseLease(q: Queryable, name: string, holder: string): Promise<void> {
  await q.run('DELETE FROM leases WHERE name = ? AND holder = ?', [name, holder]);
}

/** Who holds `name` and until when, lapsed or not (operators, tests). */
export async function leaseHolder(
  q: Queryable,
  name: string,
): Promise<{ holder: string; until: string } | undefined> {
  return q.get('SELECT holder, until FROM leases WHERE name = ?', [name]);
}
