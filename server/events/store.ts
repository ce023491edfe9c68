// Events (spec "Events"): append-only rows read newest first, filtered to the caller's team.
import { newId, PREFIX } from '../../protocol/ids.ts';
import { json, now, parseJson, type Queryable } from '../db/types.ts';

export const EVENTS_RETURNED = 200;
/** A stored body longer than this is listed as `{truncated: true, bytes}` (M1: never a 500). */
export const MAX_LISTED_BODY_CHARS = 64 * 1024;

export interface Event {
  ID: string;
  TeamID: string;
  Subject: string;
  Kind: string;
  Body: unknown;
  At: string;
}

interface Row {
  id: string;
  team_id: string;
  subject: string;
  kind: string;
  body: string | null;
  size: number | string;
  at: string;
}

export async function appendEvent(
  q: Queryable,
  teamId: string,
  subject: string,
  kind: string,
  body: unknown,
): Promise<void> {
  await q.run('INSERT INTO events (id, team_id, subject, kind, body, at) VALUES (?, ?, ?, ?, ?, ?)', [
    newId(PREFIX.event),
    teamId,
    subject,
    kind,
    json(body),
    now(),
  ]);
}

export async function listEvents(q: Queryable, teamId: string, subject: string): Promise<Event[]> {
  // Oversized bodies (stored before the hub bounded event frames) are not even read.
  const rows = await q.all<Row>(
    `SELECT id, team_id, subject, kind, at, LENGTH(body) AS size,
            CASE WHEN LENGTH(body) > ${MAX_LISTED_BODY_CHARS} THEN NULL ELSE body END AS body
       FROM events WHERE team_id = ? AND subject = ? ORDER BY id DESC LIMIT ${EVENTS_RETURNED}`,
    [teamId, subject],
  );
  return rows.map((r) => ({
    ID: r.id,
    TeamID: r.team_id,
    Subject: r.subject,
    Kind: r.kind,
    Body: r.body === null ? { truncated: true, bytes: Number(r.size) } : parseJson(r.body, null),
    At: r.at,
  }));
}
