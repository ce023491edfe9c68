// GET /v1/events?subject=<env:|dep:|host:|cmd:><id>: up to 200 events, newest first, team-filtered;
// GET /v1/events/stream (stream.ts) is the same, live.
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../context.ts';
import type { Db } from '../db/types.ts';
import { BadRequest } from '../errors.ts';
import type { App } from '../http/app.ts';
import { SECURED } from '../http/schema.ts';
import { EVENTS_RETURNED, type Event, listEvents } from './store.ts';

const SUBJECT_RE = /^(env|dep|host|cmd):[A-Za-z0-9_-]{1,128}$/;

/** The one subject filter of /v1/events and /v1/events/stream. */
export function checkSubject(subject: string | undefined): string {
  if (!subject || !SUBJECT_RE.test(subject)) {
    throw new BadRequest('subject must be env:<id>, dep:<id>, host:<id> or cmd:<id>');
  }
  return subject;
}

export async function eventsOf(db: Db, teamId: string, subject: string | undefined): Promise<Event[]> {
  return listEvents(db, teamId, checkSubject(subject));
}

export function eventRoutes(app: App, ctx: AppContext): void {
  app.get(
    '/v1/events',
    {
      schema: {
        tags: ['events'],
        summary: `Events of one subject, newest first (at most ${EVENTS_RETURNED})`,
        security: SECURED,
        querystring: Type.Object({
          subject: Type.Optional(
            Type.String({ maxLength: 200, description: 'env:<id>, dep:<id>, host:<id> or cmd:<id>' }),
          ),
        }),
      },
    },
    async (req) => ({ events: await eventsOf(ctx.db, req.caller.teamId, req.query.subject) }),
  );
}
