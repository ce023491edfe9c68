// GET /v1/events/stream: the events of /v1/events as Server-Sent Events, live (issue 13; spec
// "Events"). Same credential and `?subject=` filter, only the caller's team. Each event is one
// `id:` + `data:` (the event record as JSON, so no field of it can break the framing); a comment
// line every `heartbeatMs` keeps proxies from closing an idle stream; `Last-Event-ID` (header, as
// EventSource sends it on reconnect) resumes after that event with nothing lost or repeated.
//
// Rows are the only truth: a stream reads the table after an append signal for its team or on
// its poll. Ids are time-ordered but an insert can land after a later-numbered one, so each read
// starts `lookbackMs` back and skips the ids this stream has already written.
import { PassThrough } from 'node:stream';
import { Type } from '@sinclair/typebox';
import { idFloor, PREFIX } from '../../protocol/ids.ts';
import type { AppContext } from '../context.ts';
import type { Db } from '../db/types.ts';
import { BadRequest, SvcError } from '../errors.ts';
import type { App } from '../http/app.ts';
import { SECURED } from '../http/schema.ts';
import type { Authenticator } from '../identity/auth.ts';
import { checkSubject } from './routes.ts';
import { appended, eventsAfter } from './store.ts';

/** Timings of every stream; tests shorten the heartbeat to see one. */
export const STREAM_TIMING = { heartbeatMs: 15_000, pollMs: 2_000, lookbackMs: 10_000 };
/** Rows per read; a resuming client catches up in pages of this size. */
const PAGE = 500;
/** More than this unsent to a slow client ends its stream; it resumes with Last-Event-ID. */
const MAX_BUFFERED = 1024 * 1024;
/** Open streams per process; beyond it a new one is 503 (EventSource retries). */
export const MAX_STREAMS = 2_000;
const EVENT_ID_RE = /^evt_[0-9a-z]{22}$/;

interface StreamOptions {
  db: Db;
  auth: Authenticator;
  teamId: string;
  subject: string | undefined;
  /** Re-checked on every heartbeat: a revoked key or a lost membership ends the stream. */
  credential: { authorization: string | undefined; team: string | undefined };
  /** Highest id the client has; '' for "from now on". */
  after: string;
}

class LiveStream {
  readonly out = new PassThrough();
  #o: StreamOptions;
  #cursor: string;
  /** Ids within the look-back window that this stream has written (or that predate it). */
  #seen = new Set<string>();
  #reading: Promise<void> | null = null;
  #again = false;
  #timers: NodeJS.Timeout[] = [];
  #closed = false;
  #onAppend = (teamId: string) => {
    if (teamId === this.#o.teamId) void this.read();
  };

  constructor(o: StreamOptions) {
    this.#o = o;
    this.#cursor = o.after || idFloor(PREFIX.event, Date.now());
  }

  async start(): Promise<void> {
    // Rows already in the window at or before the cursor count as seen: the client has them (or,
    // without Last-Event-ID, asked only for what comes next).
    const floor = this.#floor();
    if (floor < this.#cursor) {
      for (let after = floor; ; ) {
        const rows = await eventsAfter(this.#o.db, this.#o.teamId, this.#o.subject, after, PAGE);
        for (const r of rows) if (r.ID <= this.#cursor) this.#seen.add(r.ID);
        if (rows.length < PAGE || rows[rows.length - 1].ID > this.#cursor) break;
        after = rows[rows.length - 1].ID;
      }
    }
    this.out.write(`retry: 3000\n: connected\n\n`);
    appended.on('team', this.#onAppend);
    this.#timers.push(setInterval(() => void this.read(), STREAM_TIMING.pollMs));
    this.#timers.push(setInterval(() => void this.#heartbeat(), STREAM_TIMING.heartbeatMs));
    await this.read();
  }

  #floor(): string {
    const floor = idFloor(PREFIX.event, Date.now() - STREAM_TIMING.lookbackMs);
    return this.#cursor < floor ? this.#cursor : floor;
  }

  /** One read at a time; a signal during a read runs one more after it. */
  read(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    if (this.#reading) {
      this.#again = true;
      return this.#reading;
    }
    this.#reading = (async () => {
      try {
        do {
          this.#again = false;
          await this.#readOnce();
        } while (this.#again && !this.#closed);
      } catch {
        this.close();
      } finally {
        this.#reading = null;
      }
    })();
    return this.#reading;
  }

  async #readOnce(): Promise<void> {
    const floor = this.#floor();
    for (const id of this.#seen) if (id < floor) this.#seen.delete(id);
    for (let after = floor; !this.#closed; ) {
      const rows = await eventsAfter(this.#o.db, this.#o.teamId, this.#o.subject, after, PAGE);
      for (const e of rows) {
        if (this.#seen.has(e.ID)) continue;
        this.#seen.add(e.ID);
        if (e.ID > this.#cursor) this.#cursor = e.ID;
        this.out.write(`id: ${e.ID}\ndata: ${JSON.stringify(e)}\n\n`);
      }
      if (this.out.writableLength > MAX_BUFFERED) return this.close();
      if (rows.length < PAGE) return;
      after = rows[rows.length - 1].ID;
    }
  }

  async #heartbeat(): Promise<void> {
    const { authorization, team } = this.#o.credential;
    try {
      const caller = await this.#o.auth.authenticate(authorization, team, 'key');
      if (caller.teamId !== this.#o.teamId) throw new Error('team changed');
    } catch {
      return this.close();
    }
    if (!this.#closed) this.out.write(`: heartbeat ${new Date().toISOString()}\n\n`);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    appended.off('team', this.#onAppend);
    for (const t of this.#timers) clearInterval(t);
    this.out.end();
  }
}

export function eventStreamRoutes(app: App, ctx: AppContext): void {
  const open = new Set<LiveStream>();
  // Streams never finish by themselves: end them so shutdown does not wait its full 10 s.
  app.addHook('preClose', async () => {
    for (const s of open) s.close();
  });

  app.get(
    '/v1/events/stream',
    {
      // A HEAD would open a stream nobody reads.
      exposeHeadRoute: false,
      schema: {
        tags: ['events'],
        summary: "The team's events as Server-Sent Events, live (Last-Event-ID resumes)",
        description:
          'text/event-stream. Each event: `id: <event ID>` and `data: <event record JSON>`. ' +
          'Comment lines are heartbeats. Without `subject`, every subject of the team.',
        security: SECURED,
        querystring: Type.Object({
          subject: Type.Optional(
            Type.String({ maxLength: 200, description: 'env:<id>, dep:<id>, host:<id> or cmd:<id>' }),
          ),
        }),
        headers: Type.Object({
          'last-event-id': Type.Optional(Type.String({ maxLength: 64 })),
        }),
      },
    },
    async (req, reply) => {
      const { subject } = req.query;
      if (subject !== undefined) checkSubject(subject);
      const after = req.headers['last-event-id'] ?? '';
      if (after && !EVENT_ID_RE.test(after)) throw new BadRequest('Last-Event-ID must be an event ID');
      if (open.size >= MAX_STREAMS) throw new SvcError(503, 'too many open event streams; retry later');
      const team = req.headers['x-svc-team'];
      const s = new LiveStream({
        db: ctx.db,
        auth: ctx.auth,
        teamId: req.caller.teamId,
        subject,
        credential: {
          authorization: req.headers.authorization,
          team: typeof team === 'string' ? team : undefined,
        },
        after,
      });
      open.add(s);
      const done = () => {
        open.delete(s);
        s.close();
      };
      // A client going away closes the response (the request's own 'close' is not that signal).
      reply.raw.once('close', done);
      s.out.once('close', done);
      await s.start().catch((err) => {
        done();
        throw err;
      });
      reply
        .header('cache-control', 'no-store')
        .header('x-accel-buffering', 'no')
        .type('text/event-stream; charset=utf-8');
      return reply.send(s.out);
    },
  );
}
