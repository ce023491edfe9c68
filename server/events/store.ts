// Events (spec "Events"): append-only rows read newest first, filtered to the caller's team.
import type { Static } from '@sinclair/typebox';
import type { Event as EventSchema } from '../../protocol/api/records.ts';
import { newId, PREFIX } from '../../protocol/ids.ts';
import { json, now, parseJson, type Queryable } from '../db/types.ts';

export const EVENTS_RETURNED = 200;
/**
 * A stored body longer than this is listed as `{truncated: true, bytes}`, so a huge event body is
 * never a 500.
 */
export const MAX_LISTED_BODY_CHARS = 64 * 1024;

/**
 * Where an appended event goes live once its row is committed: the application context's
 * EventBus (bus.ts). Rows stay the truth: an event appended without one reaches live streams at
 * their team's next poll.
 */
export interface LiveEvents {
  publish(e: Event): void;
}

export type Event = Static<typeof EventSchema>;

interface Row {
  id: string;
  team_id: string;
  subject: string;
  kind: string;
  body: string | null;
  size: number | string;
  at: string;
}

/**
 * Inserts the event; `live` hears of it after `q`'s transaction commits (never if it rolls back).
 * `live` is required so a writer cannot forget it: `null` (tests that write rows only) leaves the
 * event to the streams' periodic poll, up to 2 s late.
 */
export async function appendEvent(
  q: Queryable,
  teamId: string,
  subject: string,
  kind: string,
  body: unknown,
  live: LiveEvents | null | undefined,
): Promise<void> {
  const text = json(body);
  const e: Event = {
    ID: newId(PREFIX.event),
    TeamID: teamId,
    Subject: subject,
    Kind: kind,
    Body: null,
    At: now(),
  };
  await q.run('INSERT INTO events (id, team_id, subject, kind, body, at) VALUES (?, ?, ?, ?, ?, ?)', [
    e.ID,
    teamId,
    subject,
    kind,
    text,
    e.At,
  ]);
  // What a read of the row gives back (JSON's own round trip), not the caller's object.
  if (live) q.afterCommit(() => live.publish({ ...e, Body: parseJson(text, null) }));
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
 * A team's events after `afterId` (oldest first, at most `limit`), for a resuming live stream: all
 * subjects, or one.
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

/**
 * Ids of a team's events after `afterId` (oldest first, at most `limit`): the live feed's poll,
 * which reads bodies only of the ids it has not seen (eventsByIds). Ids are time-ordered, so
 * `id > afterId` is "appended later" up to insertion races, which the feed covers by reading
 * from a little earlier.
 */
export async function eventIdsAfter(
  q: Queryable,
  teamId: string,
  afterId: string,
  limit: number,
): Promise<string[]> {
  const rows = await q.all<{ id: string }>(
    `SELECT id FROM events WHERE team_id = ? AND id > ? ORDER BY id LIMIT ${limit}`,
    [teamId, afterId],
  );
  return rows.map((r) => r.id);
}

/** The team's events among `ids`, oldest first. */
export async function eventsByIds(q: Queryable, teamId: string, ids: readonly string[]): Promise<Event[]> {
  if (ids.length === 0) return [];
  const rows = await q.all<Row>(
    `SELECT * FROM events WHERE team_id = ? AND id IN (${ids.map(() => '?').join(', ')}) ORDER BY id`,
    [teamId, ...ids],
  );
  return rows.map(eventOf);
}
