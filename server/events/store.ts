// Events (spec "Events"): append-only rows read newest first, filtered to the caller's team.
import { EventEmitter } from 'node:events';
import { newId, PREFIX } from '../../protocol/ids.ts';
import { json, now, parseJson, type Queryable } from '../db/types.ts';

export const EVENTS_RETURNED = 200;
/** A stored body longer than this is listed as `{truncated: true, bytes}` (M1: never a 500). */
export const MAX_LISTED_BODY_CHARS = 64 * 1024;

/**
 * Says "team X has a new event" after each append, so live streams (stream.ts) read the table at
 * once instead of waiting for their next poll. It carries no event: rows stay the only truth, and
 * a signal sent before a transaction commits is covered by the streams' own polling.
 */
export const appended = new EventEmitter<{ team: [teamId: string] }>();
appended.setMaxListeners(0);

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
  appended.emit('team', teamId);
}

export async function listEvents(q: Queryable, teamId: string, subject: string): Promise<Event[]> {
  // Oversized bodies (stored before the hub bounded event frames) are not even read.
  const rows = await q.all<Row>(
    `SELECT id, team_id, subject, kind, at, LENGTH(body) AS size,
            CASE WHEN LENGTH(body) > ${MAX_LISTED_BODY_CHARS} THEN NULL ELSE body END AS body
       FROM events WHERE team_id = ? AND subject = ? ORDER BY id DESC LIMIT ${EVENTS_RETURNED}`,
    [teamId, subject],
  );
  return rows.map(eventOf);
}

const eventOf = (r: Row): Event => ({
  ID: r.id,
  TeamID: r.team_id,
  Subject: r.subject,
  Kind: r.kind,
  Body: r.body === null ? { truncated: true, bytes: Number(r.size) } : parseJson(r.body, null),
  At: r.at,
});

/**
 * A team's events after `afterId` (oldest first, at most `limit`), for live streams: all subjects,
 * or one. Ids are time-ordered, so `id > afterId` is "appended later" up to insertion races, which
 * the caller covers by reading again from a little earlier.
 */
export async function eventsAfter(
  q: Queryable,
  teamId: string,
  subject: string | undefined,
  afterId: string,
  limit: number,
): Promise<Event[]> {
  const rows = subject
    ? await q.all<Row>(
        `SELECT * FROM events WHERE team_id = ? AND subject = ? AND id > ? ORDER BY id LIMIT ${limit}`,
        [teamId, subject, afterId],
      )
    : await q.all<Row>(`SELECT * FROM events WHERE team_id = ? AND id > ? ORDER BY id LIMIT ${limit}`, [
        teamId,
        afterId,
      ]);
  return rows.map(eventOf);
}
